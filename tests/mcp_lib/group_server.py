"""A tiny stdio MCP server (official SDK) for the process tests: it starts a grandchild, reports both pids, and
has a tool that never answers. ``GROUP_SERVER_STUBBORN=1``: server and grandchild ignore SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

STUBBORN = os.environ.get("GROUP_SERVER_STUBBORN") == "1"
if STUBBORN:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the grandchild (ignored signals survive exec)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
server = MCPServer("group")
read_only = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=read_only)
def whoami() -> dict[str, int]:
    return {"pid": os.getpid(), "pgid": os.getpgid(0), "grandchild": grandchild.pid}


@server.tool(annotations=read_only)
async def hang() -> str:
    await anyio.sleep(600)
    return "never"


server.run("stdio")
