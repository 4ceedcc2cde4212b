"""A hostile stdio MCP server (official SDK) for the process tests: tools that flood stdout with garbage, answer
5 MB, raise, exit mid-call, flood stderr, and start a grandchild that leaves the process group (setsid)."""

from __future__ import annotations

import os
import subprocess
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("hostile")
read_only = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=read_only)
def garbage() -> str:
    """Non-JSON lines on stdout (the protocol's channel), then an answer."""
    for _ in range(2000):
        sys.stdout.write("this is not JSON-RPC " * 20 + "\n")
    sys.stdout.flush()
    return "after the garbage"


@server.tool(annotations=read_only)
def huge() -> str:
    return "x" * 5_000_000


@server.tool(annotations=read_only)
def fails() -> str:
    raise RuntimeError("the tool broke")


@server.tool(annotations=read_only)
def dies() -> str:
    os._exit(3)


@server.tool(annotations=read_only)
def noisy() -> str:
    for _ in range(200):
        sys.stderr.write("e" * 50_000 + "\n")
    sys.stderr.flush()
    return "after the noise"


@server.tool(annotations=read_only)
def escapes() -> dict[str, int]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {"pid": os.getpid(), "escaped": child.pid}


server.run("stdio")
