"""A stdio MCP server (official SDK) that talks on its stderr: at start-up, and for every call the argument it
got, the credential it was passed (``LEAKY_TOKEN``) and a colleague's address -- what an in-house server's debug
logging does; its result names the credential as well. For the tests of what a server writes on its stderr."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

TOKEN = os.environ.get("LEAKY_TOKEN", "")
print(f"leaky: starting, token {TOKEN}", file=sys.stderr, flush=True)
server = MCPServer("leaky")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    print(f"leaky: echo({text}) with token={TOKEN} for ops.lead@example.com", file=sys.stderr, flush=True)
    print("x" * 200_000 + TOKEN, file=sys.stderr, flush=True)  # one very long line, the token past its cut
    return f"ok (served with {TOKEN})"  # the result carries the credential too


server.run("stdio")
