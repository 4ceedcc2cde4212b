"""The one door for Python logging (mcp_lib/logs.py, installed by every entry point): a library's record leaves
only through the egress guard in effect.

End to end: ``helpbot answer`` (the real entry point, the Bedrock stub playing a hostile model) calls an
in-house stdio server whose stdout carries the call's arguments (tests/agent/stdout_server.py); the mcp SDK logs
the unparsable line with pydantic's ``input_value``. Captured at the file-descriptor level (``capfd``)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import guard
from agent.guard import PRIVATE_RUN, Guard
from mcp_lib import logs
from mcp_lib.redact import Masker
from tests.agent.conftest import PREFIXES
from tests.fakes import bedrock as stub_lib
from tests.fakes.bedrock import BedrockStub
from tests.fakes.front import REPO, event_file
from tests.fakes.outward import outward_env
from tests.fakes.slack import FakeSlack, Workspace

SERVER = Path(__file__).with_name("stdout_server.py")
HELD = "q7zr"  # a held credential no pattern knows: only its exact value masks it
ARGUMENT = "障害メモ-ZX81"  # what the hostile model hands the server


def hostile(argument: str) -> Callable[[str, dict[str, Any]], stub_lib.Reply]:
    def respond(model_id: str, body: dict[str, Any]) -> stub_lib.Reply:
        if not any(b.get("type") == "tool_result" for m in body["messages"] if isinstance(m["content"], list)
                   for b in m["content"]):
            return stub_lib.tool_use("stdout_lookup", {"q": argument})
        return stub_lib.text("確認しました。")

    return respond


@pytest.fixture
def answering(fake: FakeSlack, tmp_path: Path) -> Iterator[tuple[BedrockStub, dict[str, str]]]:
    """The Bedrock stub, and the environment of a helpbot process pointed at it, the fake Slack and the server."""
    with BedrockStub() as running:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(PREFIXES)}, **outward_env(fake),
               "AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key", "ANTHROPIC_BEDROCK_BASE_URL": running.url,
               "INHOUSE_TOKEN": HELD, "HELPBOT_CONFIG": str(tmp_path / "helpbot.toml")}
        yield running, env


def answer(answering: tuple[BedrockStub, dict[str, str]], argument: str, ws: Workspace, tmp_path: Path, mode: str,
           channel: str, **env: str) -> str:
    """``helpbot answer`` as a process (the console script: its own start-up, no test harness's logging); its
    stderr."""
    stub, process_env = answering
    stub.responder = hostile(argument)
    (tmp_path / "helpbot.toml").write_text(
        f"[[mcp_servers]]\nname = \"stdout\"\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}, \"{mode}\"]\ntools = [\"lookup\"]\n", encoding="utf-8")
    asked = ws.post(channel, "在庫同期の確認手順は？", user="U0TANAKA")
    reacted = ws.reacted({"channel": channel, "ts": asked.ts, "user": "U0TANAKA", "reaction": "help"})
    path = event_file(tmp_path, reacted)
    helpbot = Path(sys.executable).with_name("helpbot")
    done = subprocess.run([str(helpbot), "answer", "--event", path], cwd=REPO, env={**process_env, **env},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert stub.requests, "the model was asked"
    return done.stderr


@pytest.mark.scenario
@pytest.mark.parametrize("mode", ["print", "invalid"])
def test_a_public_runs_library_log_holds_no_held_credential(mode: str, answering: tuple[BedrockStub, dict[str, str]],
                                                             ws: Workspace, tmp_path: Path) -> None:
    err = answer(answering, f"{ARGUMENT} {HELD}", ws, tmp_path, mode, "C0ECSUP")
    assert HELD not in err
    assert "Traceback" not in err and "input_value" not in err  # a library's traceback: only with HELPBOT_DEBUG
    assert "mcp.client.stdio ERROR: Failed to parse JSONRPC message from server" in err  # the SDK's record


@pytest.mark.scenario
@pytest.mark.parametrize("mode", ["print", "invalid"])
def test_a_private_runs_library_log_keeps_only_logger_and_level(mode: str,
                                                                 answering: tuple[BedrockStub, dict[str, str]],
                                                                 ws: Workspace, tmp_path: Path) -> None:
    err = answer(answering, ARGUMENT, ws, tmp_path, mode, "C0SECRET", HELPBOT_DEBUG="1")  # not even debugging's
    assert "ZX81" not in err and "障害メモ" not in err and "lookup" not in err
    assert f"mcp.client.stdio ERROR: {PRIVATE_RUN}" in err


# -- the handler, with a library's logger ---------------------------------------------------------------------------
class Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def emitted(policy: Any, record: Any, *, debug: bool = False, level: int = logging.WARNING) -> str:
    sink = Sink()
    with logs.installed(lambda: policy, withheld=PRIVATE_RUN, env={"HELPBOT_DEBUG": "1" if debug else ""},
                        stream=lambda: sink):
        try:
            raise ValueError(f"input_value='{record}'")
        except ValueError:
            logging.getLogger("httpx").log(level, "GET https://x.example/?q=%s", record, exc_info=True)
    return sink.text


def test_a_library_record_is_masked_by_value_and_one_line() -> None:
    text = emitted(Guard(Masker(values=[HELD])), f"{HELD}\n::warning::forged")
    assert text == "httpx WARNING: GET https://x.example/?q=[REDACTED] ⏎ ::warning::forged\n"


def test_a_library_traceback_only_with_debug_and_masked() -> None:
    text = emitted(Guard(Masker(values=[HELD])), HELD, debug=True)
    assert "Traceback" in text and "input_value='[REDACTED]'" in text and HELD not in text


def test_a_private_record_keeps_logger_and_level_only() -> None:
    text = emitted(Guard(private=True), "社内限定", debug=True, level=logging.ERROR)
    assert text == f"httpx ERROR: {PRIVATE_RUN}\n"


def test_below_warning_nothing() -> None:
    logging.getLogger("httpx").setLevel(logging.DEBUG)  # a library that lowers its own level
    try:
        assert emitted(Guard(), "x", level=logging.INFO) == ""
    finally:
        logging.getLogger("httpx").setLevel(logging.NOTSET)


def test_a_huge_record_is_masked_within_its_line_only() -> None:
    """A megabyte message (a server echoing a model's argument) is masked within the line it may keep and the
    margin past it, not whole: the masker's cost stays a line's. A secret across the cut is still masked whole."""
    seen: list[int] = []

    class Counting(logs.Masking):
        def text(self, text: str) -> str:
            seen.append(len(text))
            return super().text(text)

    message = "ログ a-b " * 125_000
    text = emitted(Counting(Masker()), "x" * (logs.LINE_CHARS - 60) + f" password={HELD}{'z' * 100} " + message)
    assert max(seen) <= logs.LINE_CHARS + logs.MASK_MARGIN
    assert HELD not in text and "password=[REDACTED]" in text and len(text.rstrip("\n")) == logs.LINE_CHARS


def test_mcp_libs_policy_masks_through_its_masker() -> None:
    text = emitted(logs.Masking.from_env({"INHOUSE_TOKEN": HELD}), f"{HELD} taro@example.com")
    assert HELD not in text and "taro@example.com" not in text


def test_the_door_is_the_guard_in_effect_and_restores_what_was_there() -> None:
    root = logging.getLogger()
    before = root.handlers[:]
    sink = Sink()
    with guard.installed(Guard(Masker(values=[HELD]))), guard.logging_installed({}, lambda: sink):
        guard.narrow(private=True)
        logging.getLogger("slack_sdk.web").warning("%s", HELD)
    assert sink.text == f"slack_sdk.web WARNING: {PRIVATE_RUN}\n"
    assert root.handlers == before


def test_a_private_run_says_it_once_per_logger_and_level() -> None:
    """How many records a private run's libraries wrote is the model's choice (one per call): not a channel."""
    sink = Sink()
    with logs.installed(lambda: Guard(private=True), withheld=PRIVATE_RUN, env={}, stream=lambda: sink):
        for n in range(5):
            logging.getLogger("mcp.client.stdio").error("call %d", n)
        logging.getLogger("httpx").warning("x")
    assert sink.text == f"mcp.client.stdio ERROR: {PRIVATE_RUN}\nhttpx WARNING: {PRIVATE_RUN}\n"
