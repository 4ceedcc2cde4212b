"""Hostile in-house stdio MCP servers (tests/mcp_lib/hostile_server.py): garbage on stdout, 5 MB answers, a tool
that raises, a server that exits mid-call, a flood on stderr -- each an error value or a bounded result, and the
next call still served; and what a grandchild leaving the process group does."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from mcp_lib import Registry
from tests.fakes.processes import alive, gone

SERVER = Path(__file__).with_name("hostile_server.py")
TOOLS = ["garbage", "huge", "fails", "dies", "noisy", "escapes"]
pytestmark = [pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX"),
              pytest.mark.scenario]  # every test here starts processes


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    path = tmp_path / "helpbot.toml"
    path.write_text(f"[[mcp_servers]]\nname = \"hos\"\ncommand = {json.dumps(sys.executable)}\n"
                    f"args = [{json.dumps(str(SERVER))}]\ntools = {json.dumps(TOOLS)}\ntimeout_s = 20\n",
                    encoding="utf-8")
    made = Registry(env={"HELPBOT_CONFIG": str(path)})
    yield made
    made.close()


@pytest.mark.parametrize("tool", ["garbage", "huge", "fails", "dies", "noisy"])
def test_a_hostile_tool_is_a_bounded_result_and_the_server_still_serves(registry: Registry, tool: str) -> None:
    result = registry.call(f"hos_{tool}", {})
    if tool in ("fails", "dies"):
        assert result.is_error, result
    text = json.dumps(result.item) if result.item is not None else (result.message or "")
    assert len(text) < 1_000_000  # 5 MB does not reach the model whole
    again = registry.call("hos_huge" if tool != "huge" else "hos_fails", {})
    assert again is not None  # the session recovers (a new process after an exit)


@pytest.mark.xfail(strict=True, reason="known limit: a grandchild that calls setsid() leaves the server's process "
                                        "group, so ending the group cannot reach it (Actions' job cleanup does)")
def test_a_grandchild_that_leaves_the_group_is_not_left_running(registry: Registry) -> None:
    result = registry.call("hos_escapes", {})
    assert not result.is_error and result.item is not None
    pids = result.item
    try:
        registry.close()
        assert gone(pids["pid"])
        assert not alive(pids["escaped"]), "a setsid grandchild outlives the run"
    finally:
        if alive(pids["escaped"]):
            os.kill(pids["escaped"], signal.SIGKILL)
