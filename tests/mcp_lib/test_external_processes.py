"""In-house stdio MCP servers as processes: one per server per run, in a process group of its own, and the whole
group ended -- by pid, grandchildren included -- when a call times out, when the run ends and when the process
exits (normally, by an exception, by SIGTERM). Against a real server (tests/mcp_lib/group_server.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mcp_lib import Registry
from tests.fakes.processes import alive, gone

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("group_server.py")
pytestmark = [pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX"),
              pytest.mark.scenario]  # every test here starts processes


def config(tmp_path: Path, extra: str = "") -> dict[str, str]:
    path = tmp_path / "helpbot.toml"
    path.write_text(f"[[mcp_servers]]\nname = \"grp\"\ncommand = {json.dumps(sys.executable)}\n"
                    f"args = [{json.dumps(str(SERVER))}]\nenv = [\"GROUP_SERVER_STUBBORN\"]\n"
                    f"tools = [\"whoami\", \"hang\"]\n{extra}", encoding="utf-8")
    return {"HELPBOT_CONFIG": str(path)}


@pytest.fixture
def cleanup() -> Iterator[list[int]]:
    """Pids a failing test leaves are killed afterwards, so one failure does not leak into the machine."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def whoami(registry: Registry, cleanup: list[int]) -> dict[str, int]:
    result = registry.call("grp_whoami", {})
    assert not result.is_error, result.message
    assert result.item is not None
    cleanup += [result.item["pid"], result.item["grandchild"]]
    return result.item


def test_one_server_process_serves_every_call_of_the_run(tmp_path: Path, cleanup: list[int]) -> None:
    registry = Registry(env=config(tmp_path))
    first = whoami(registry, cleanup)
    assert first["pgid"] == first["pid"]  # a process group of its own, led by the server
    with ThreadPoolExecutor(4) as pool:  # the agent's parallel tool calls
        seen = list(pool.map(lambda _: whoami(registry, cleanup), range(4)))
    assert {s["pid"] for s in seen} == {first["pid"]}
    registry.close()
    assert gone(first["pid"], first["grandchild"])  # the grandchild too, though the server exited by itself


def test_a_timed_out_call_ends_the_whole_group_and_the_next_call_starts_afresh(
        tmp_path: Path, cleanup: list[int]) -> None:
    registry = Registry(env=config(tmp_path, extra="timeout_s = 0.5\n"))
    before = whoami(registry, cleanup)
    hung = registry.call("grp_hang", {})
    assert hung.is_error and "did not answer within 0.5 s" in (hung.message or "")
    assert gone(before["pid"], before["grandchild"])
    after = whoami(registry, cleanup)
    assert after["pid"] != before["pid"]
    registry.close()
    assert gone(after["pid"], after["grandchild"])


def test_a_group_that_ignores_sigterm_is_killed(tmp_path: Path, cleanup: list[int]) -> None:
    registry = Registry(env={**config(tmp_path), "GROUP_SERVER_STUBBORN": "1"})
    pids = whoami(registry, cleanup)
    registry.close()  # SIGTERM is ignored: SIGKILL after the grace (2 s)
    assert gone(pids["pid"], pids["grandchild"])


CHILD = """
import json, os, sys, time
from agent.errors import sigterm_raises
from mcp_lib import Registry

mode = sys.argv[1]
with sigterm_raises():
    registry = Registry(env={"HELPBOT_CONFIG": sys.argv[2]})
    print(json.dumps(registry.call("grp_whoami", {}).item), flush=True)
    if mode == "raise":
        raise RuntimeError("the run failed")
    if mode == "sigterm":
        registry.call("grp_hang", {})  # SIGTERM arrives while the call waits
"""


@pytest.mark.parametrize("mode", ["exit", "raise", "sigterm"])
def test_nothing_of_the_group_outlives_the_process(tmp_path: Path, cleanup: list[int], mode: str) -> None:
    env_file = config(tmp_path)["HELPBOT_CONFIG"]
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode, env_file], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    pids = json.loads(child.stdout.readline())
    cleanup += [pids["pid"], pids["grandchild"]]
    if mode == "sigterm":
        child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=30)
    assert child.returncode == {"exit": 0, "raise": 1, "sigterm": 1}[mode], err
    assert gone(pids["pid"], pids["grandchild"])


def test_mcp_libs_own_server_stderr_is_masked_for_the_credentials_it_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """``mcp-lib`` (and ``mcp-lib serve``) log a server's stderr themselves: the credential they pass it, a value no
    pattern knows, is masked there as in the tool's result (helpbot passes its guard's door instead)."""
    from mcp_lib.cli import main

    leaky = ROOT / "tests" / "fakes" / "leaky_server.py"
    path = tmp_path / "helpbot.toml"
    path.write_text(f"[[mcp_servers]]\nname = \"leaky\"\ncommand = {json.dumps(sys.executable)}\n"
                    f"args = [{json.dumps(str(leaky))}]\nenv = [\"LEAKY_TOKEN\"]\ntools = [\"echo\"]\n",
                    encoding="utf-8")
    monkeypatch.setenv("HELPBOT_CONFIG", str(path))
    monkeypatch.setenv("LEAKY_TOKEN", "k3y9Zq")
    assert main(["leaky:echo", "text=hi"]) == 0
    out, err = capfd.readouterr()
    assert "served with [REDACTED]" in out and "MCP server 'leaky': leaky: starting, token [REDACTED]" in err
    assert "k3y9Zq" not in out + err and "ops.lead@example.com" not in err
