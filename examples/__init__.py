"""Examples that run beside helpbot (in-house MCP servers to connect to it)."""
