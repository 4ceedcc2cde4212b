"""Example in-house MCP server: the farm sales DB of the "AI concierge" article (see README.md)."""
