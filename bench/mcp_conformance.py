"""The official MCP conformance suite (``@modelcontextprotocol/conformance`` from npm) against ``mcp-lib serve``.

    uv run python bench/mcp_conformance.py                 # every active server scenario, against the baseline
    uv run python bench/mcp_conformance.py --scenario tools-list

The suite drives a server over streamable HTTP only, so the very server ``mcp-lib serve`` runs over stdio
(:func:`mcp_lib.server.build_server` on the default registry: the FAQ, as configured here) is served here over
the official SDK's streamable HTTP app (``Server.streamable_http_app``, DNS-rebinding protection on), on a socket
bound to 127.0.0.1 and handed to uvicorn (no free-port race). The suite needs Node 22 or later; it runs from npm
through ``npx -p node@22`` whatever the machine's Node is. Scenarios that need what helpbot does not declare
(resources, prompts, logging, completions, sampling, elicitation, the suite's own test tools) are listed in
``bench/mcp_conformance_baseline.yml``: the suite exits 0 when exactly those fail, 1 on a regression or a stale
entry. Results (``checks.json`` per scenario) go to ``--output`` (a temporary directory by default).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402

from mcp_lib.registry import Registry  # noqa: E402
from mcp_lib.server import build_server  # noqa: E402

SUITE = "@modelcontextprotocol/conformance@0.1.16"
NODE = "node@22"
BASELINE = Path(__file__).with_name("mcp_conformance_baseline.yml")


def serve_http() -> tuple[str, uvicorn.Server, threading.Thread]:
    """``mcp-lib serve``'s server over streamable HTTP on 127.0.0.1; the URL once it accepts connections."""
    app = build_server(Registry()).streamable_http_app()
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        threading.Event().wait(0.05)  # readiness of a real server, not a test's timing
    return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", server, thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", help="one scenario (default: the suite's active scenarios)")
    parser.add_argument("--output", type=Path, help="where the results go (default: a temporary directory)")
    parser.add_argument("--no-baseline", action="store_true", help="report every failure, expected or not")
    args = parser.parse_args(argv)
    output = args.output or Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    url, server, thread = serve_http()
    command = ["npx", "--yes", "-p", NODE, "-p", SUITE, "conformance", "server", "--url", url, "-o", str(output)]
    if args.scenario:
        command += ["--scenario", args.scenario]
    if not args.no_baseline:
        command += ["--expected-failures", str(BASELINE)]
    try:
        print("$", " ".join(command), flush=True)
        done = subprocess.run(command, check=False)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    print(f"results: {output}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
