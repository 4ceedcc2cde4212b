"""Builders for ``helpbot answer`` runs against the fake Slack: the scripted-model runner, what a thread shows,
and the checks that a run ended in one final state."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.core.loop import Agent
from agent.core.run import Progress
from agent.core.settings import Settings
from agent.core.tools import RegistryTools
from agent.slack import front
from agent.slack.blocks import PLACEHOLDER
from agent.slack.front import Options, run
from agent.slack.markers import EVENT_TYPES
from agent.slack.post import MAX_WAIT_S, WRITE_BUDGET_S
from mcp_lib import Caller, Registry
from tests.fakes.clock import FakeClock
from tests.fakes.model import Request, ScriptedModel, calls
from tests.fakes.slack import FakeSlack, Message, Workspace

REPO = Path(__file__).resolve().parents[2]
WRITES = {"chat.postMessage", "chat.update", "chat.delete", "reactions.add", "reactions.remove"}
BOT = "U0HELPBOT"
FAQ_URL = "https://github.com/acme/helpbot/blob/HEAD/faq/stock-sync-delay.md"


def question_of(ws: Workspace) -> Message:
    """The sample workspace's question: a thread parent in #ec-support with one human reply."""
    return ws.history("C0ECSUP")[0]


def writes(fake: FakeSlack) -> list[Any]:
    return [r for r in fake.requests if r.method in WRITES]


def bot_messages(ws: Workspace, channel: str, ts: str) -> list[Message]:
    return [m for m in ws.thread(channel, ts) if m.user == BOT]


def markdown_of(message: Message) -> str:
    return "\n\n".join(b["text"] for b in message.blocks or [] if b["type"] == "markdown")


def event_file(tmp_path: Path, payload: dict[str, Any] | str, name: str = "event.json") -> str:
    path = tmp_path / name
    if isinstance(payload, str):
        path.write_text(payload, encoding="utf-8")
    else:
        path.write_text(json.dumps({"action": "slack-help", "client_payload": payload}), encoding="utf-8")
    return str(path)


def cites_first_faq_hit(answer_prefix: str = "連携ログを確認してください。") -> Callable[[Request], Any]:
    """A scripted model: search the FAQ, then answer citing the first hit's URL."""

    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("faq_search", {"query": "Shopify 在庫同期 遅延"}))
        first = json.loads(request.tool_results()[0]["content"])["items"][0]
        return f"{answer_prefix}[{first['title']}]({first['url']})"

    return script


def factory(env: dict[str, str], model: ScriptedModel, settings: Settings | None = None,
            seen: list[Caller] | None = None) -> front.AgentFactory:
    def make(registry: Registry, on_progress: Callable[[Progress], None],
             on_event: Callable[[dict[str, Any]], None]) -> Agent:
        if seen is not None:
            seen.append(registry.caller)
        return Agent(model, RegistryTools(registry), settings or Settings(), on_progress=on_progress,
                     on_event=on_event)

    return make


def answer_scripted(env: dict[str, str], script: Callable[[Request], Any], *, clock: FakeClock | None = None,
                    seen: list[Caller] | None = None, sleeps: list[float] | None = None,
                    **options: Any) -> tuple[int, ScriptedModel]:
    model = ScriptedModel(script)
    clock = clock or FakeClock()
    code = run(Options(**options), env, make_agent=factory(env, model, seen=seen), clock=clock)
    if sleeps is not None:
        sleeps += clock.sleeps
    return code, model


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


STORM = 1000  # longer than any budget


def thread_state(ws: Workspace, ts: str) -> tuple[list[str], list[Message], dict[str, list[str]]]:
    """(kinds of helpbot's markers in the thread, placeholders left, reactions on the question)."""
    ours = [m for m in ws.thread("C0ECSUP", ts)[1:] if m.user == BOT]
    kinds = [k for m in ours for k, t in EVENT_TYPES.items() if (m.metadata or {}).get("event_type") == t]
    return kinds, [m for m in ours if PLACEHOLDER in (m.text or "")], ws.reactions("C0ECSUP", ts)


def then(fault: Any, script: Any) -> Any:
    """The script, after ``fault()`` at its first request: a fault for the answer's writes, not the placeholder's."""
    armed = {"done": False}

    def scripted(request: Request) -> Any:
        if not armed["done"]:
            armed["done"] = True
            fault()
        return script(request)

    return scripted


WRITE_METHODS = ["reactions.add", "chat.postMessage", "chat.update", "chat.delete", "reactions.remove"]


def ours(ws: Workspace, ts: str) -> list[Message]:
    return [m for m in ws.thread("C0ECSUP", ts)[1:] if m.user == BOT]


def kinds_of(ws: Workspace, ts: str) -> list[str]:
    return [k for m in ours(ws, ts) for k, t in EVENT_TYPES.items() if (m.metadata or {}).get("event_type") == t]


def placeholders(ws: Workspace, ts: str) -> list[Message]:
    return [m for m in ours(ws, ts) if PLACEHOLDER in (m.text or "")]


def assert_final(ws: Workspace, ts: str, kind: str) -> None:
    """Exactly one answer (✅) or one notice (❌); no placeholder, no 👀."""
    assert kinds_of(ws, ts) == [kind], [m.text[:80] for m in ours(ws, ts)]
    assert placeholders(ws, ts) == []
    reactions = ws.reactions("C0ECSUP", ts, by=BOT)
    assert "eyes" not in reactions
    assert reactions == {("white_check_mark" if kind == "answer" else "x"): [BOT]}


def bounded(sleeps: list[float]) -> None:
    assert sum(sleeps) <= WRITE_BUDGET_S + 2 and all(s <= MAX_WAIT_S + 0.5 for s in sleeps), sleeps


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


def envelope_file(tmp_path: Path, data: dict[str, Any]) -> str:
    return event_file(tmp_path, json.dumps(data), name="mention.json")
