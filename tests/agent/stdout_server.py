"""A stdio MCP server (JSON-RPC by hand) whose stdout -- the protocol's channel -- carries what it was called with,
as an in-house server's stray debug ``print`` does. For tests/agent/test_logging_door.py.

    stdout_server.py print     before each result, a line ``debug: lookup {"q": …}`` (not JSON-RPC)
    stdout_server.py invalid   before each result, a JSON-RPC response with ``"result": "not-an-object"``
                               that starts with the call's arguments

Either makes the mcp SDK log ``Failed to parse JSONRPC message from server`` with pydantic's
``input_value='…'``: the model's argument, in a private run a private message. Each call still gets its real
result, so the run goes on (no waiting for a timeout)."""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]
TOOL = {"name": "lookup", "description": "Look something up.", "annotations": {"readOnlyHint": True},
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message, ensure_ascii=False) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, ident, params = request.get("method"), request.get("id"), request.get("params") or {}
    if ident is None:  # a notification
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
            "serverInfo": {"name": "stdout", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [TOOL]}})
    elif method == "tools/call":
        arguments = params.get("arguments") or {}
        if MODE == "print":
            sys.stdout.write(f"debug: lookup {json.dumps(arguments, ensure_ascii=False)}\n")
        else:
            send({**arguments, "jsonrpc": "2.0", "id": ident, "result": "not-an-object"})
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "nothing found"}],
                                                        "isError": False}})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "method not found"}})
