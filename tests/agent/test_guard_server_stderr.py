"""An in-house stdio MCP server's stderr (helpbot.toml) as an outward channel.

A server's own logging repeats what it was called with -- attacker-chosen arguments, in a private run a private
message the model read -- and whatever it holds (its credential, a colleague's address). Its stderr is the
Actions log: it goes through the egress guard's door (``guard.server_err``), never straight to fd 2. Captured
at the file-descriptor level (``capfd``), where a child writing on the inherited stderr would show.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.core.model import Request
from tests.fakes.model import calls
from tests.fakes.outward import PRIVATE, outward_env, private_then, public_view, run
from tests.fakes.slack import FakeSlack, Workspace

pytestmark = pytest.mark.scenario  # every test here starts processes

LEAKY = Path(__file__).parents[1] / "fakes" / "leaky_server.py"
TOKEN = "k3y9"  # short: only the exact value of a credential helpbot holds masks it


@pytest.fixture
def env(fake: FakeSlack, tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "helpbot.toml"
    config.write_text(f"[[mcp_servers]]\nname = \"leaky\"\ncommand = {json.dumps(sys.executable)}\n"
                      f"args = [{json.dumps(str(LEAKY))}]\nenv = [\"LEAKY_TOKEN\"]\ntools = [\"echo\"]\n",
                      encoding="utf-8")
    return {**outward_env(fake), "HELPBOT_CONFIG": str(config), "LEAKY_TOKEN": TOKEN}


def test_a_servers_stderr_is_masked_and_cut_in_a_public_run(env: dict[str, str], ws: Workspace, fake: FakeSlack,
                                                            tmp_path: Path, capfd: pytest.CaptureFixture[str]
                                                            ) -> None:
    results: list[str] = []

    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("leaky_echo", {"text": "問い合わせ taro.yamada@example.co.jp 090-1234-5678"}))
        results.extend(r["content"] for r in request.tool_results())
        return "確認しました。"

    out = run(env, ws, fake, tmp_path, capfd, script)
    assert results and "served with [REDACTED]" in results[0] and TOKEN not in results[0]  # nor to the model
    assert "MCP server 'leaky': leaky: echo(問い合わせ" in out.stderr  # the server's words, under its name
    out.assert_nowhere(TOKEN, "ops.lead@example.com", "taro.yamada", "1234-5678")
    assert max(len(line) for line in out.stderr.splitlines()) < 1100  # a 200 kB line is cut


def test_a_private_runs_server_leaves_nothing_in_the_log(env: dict[str, str], ws: Workspace, fake: FakeSlack,
                                                         tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The model reads the private channel and hands it to the server, which logs it: nothing of it (nor that
    the server wrote anything) reaches the log, the summary or the trace -- they read as a run without it."""
    script = private_then(lambda read: calls(("leaky_echo", {"text": read}),
                                             ("leaky_echo", {"text": read.encode().hex()})))

    def quiet(request: Request) -> Any:
        return "確認しました。"

    out = run(env, ws, fake, tmp_path / "leaky", capfd, script, channel="C0SECRET", question="障害対応の手順は？")
    out.assert_nowhere(PRIVATE, "社内限定", PRIVATE.encode().hex()[:24], TOKEN, "leaky:", "MCP server",
                       but=("posts",))
    baseline = run(env, ws, fake, tmp_path / "quiet", capfd, quiet, channel="C0SECRET", question="障害対応の手順は？")
    assert public_view(out) == public_view(baseline)
