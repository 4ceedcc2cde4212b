"""``mcp-lib`` has no egress guard but the same logging door (mcp_lib/logs.py) with mcp_lib's masker: an in-house
stdio server that puts the call's arguments on stdout makes the mcp SDK log them, and the held credential among
them leaves masked -- also in a debugging run's traceback. Run as the console script, its own start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.scenario  # every test here starts processes

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "agent" / "stdout_server.py"
HELD = "q7zr"  # a credential no pattern knows


@pytest.mark.parametrize("mode", ["print", "invalid"])
def test_mcp_libs_library_log_holds_no_held_credential(mode: str, tmp_path: Path) -> None:
    config = tmp_path / "helpbot.toml"
    config.write_text(f"[[mcp_servers]]\nname = \"stdout\"\ncommand = {json.dumps(sys.executable)}\n"
                      f"args = [{json.dumps(str(SERVER))}, \"{mode}\"]\ntools = [\"lookup\"]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELPBOT_", "SLACK_", "GITHUB_", "REDMINE_"))}
    env.update(HELPBOT_CONFIG=str(config), INHOUSE_TOKEN=HELD, HELPBOT_DEBUG="1")
    done = subprocess.run([str(Path(sys.executable).with_name("mcp-lib")), "stdout:lookup", f"障害 {HELD}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert HELD not in done.stderr and HELD not in done.stdout
    assert "mcp.client.stdio ERROR: Failed to parse JSONRPC message from server" in done.stderr
    assert "Traceback" in done.stderr and "[REDACTED]" in done.stderr  # with HELPBOT_DEBUG: masked, not dropped
