"""60 near-duplicate synthetic tools (3 commodities x 5 measures x 4 scopes) for the tool-retrieval tests."""

from ajet.retrieval.server import build_server

mcp = build_server(commodities=3, measures=5, scopes=4)

if __name__ == "__main__":
    mcp.run(show_banner=False)
