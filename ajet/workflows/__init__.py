"""Built-in workflows, named in a YAML like any plugin: `ajet.workflows.mcp_agent:McpAgent`."""
