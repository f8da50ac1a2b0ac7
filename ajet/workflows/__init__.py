"""Built-in workflows, picked by name with the `workflow` config group (`workflow=chat`,
`workflow=mcp_agent`) or named like any plugin (`ajet.workflows.mcp_agent:McpAgent`)."""
