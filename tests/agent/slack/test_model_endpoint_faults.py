"""A hostile model endpoint behind the real client (an httpx2 MockTransport on the run's fake clock), end to end
through ``helpbot answer``: garbage bodies, malformed tool_use, refusals, endless max_tokens, 529 storms, refused
connections. Each run ends with one answer or one notice, ✅ or ❌, no 👀 or placeholder, and within the run's
deadline on the fake clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from agent.core.claude import build_model
from agent.core.loop import Agent
from agent.core.model_config import ModelConfig
from agent.core.settings import Settings
from agent.core.tools import RegistryTools
from agent.slack.front import Options, run
from tests.fakes import bedrock as stub_lib
from tests.fakes.clock import FakeClock
from tests.fakes.front import BOT, question_of, thread_state
from tests.fakes.slack import FakeSlack, Workspace

DEADLINE_S = 480.0


def reply(status: int, body: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
    if isinstance(body, bytes | str):
        return httpx2.Response(status, headers=headers or {}, content=body)
    return httpx2.Response(status, headers=headers or {}, json=body)


def message(content: Any, stop: str = "end_turn") -> httpx2.Response:
    status, headers, body = stub_lib.message(content, stop)
    return reply(status, body, headers)


def tool(name: Any = "faq_search", arguments: Any = None, tool_id: Any = "toolu_1") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"query": "在庫"} if arguments is None
            else arguments}


def after_first(first: Callable[[], httpx2.Response]) -> Callable[[int], httpx2.Response]:
    """``first()`` for the first request, then a plain answer."""
    return lambda n: first() if n == 1 else message([{"type": "text", "text": "在庫同期の手順です。"}])


def always(make: Callable[[], httpx2.Response]) -> Callable[[int], httpx2.Response]:
    return lambda n: make()


def refused(n: int) -> httpx2.Response:
    raise httpx2.ConnectError("[Errno 111] Connection refused")


def timed_out(n: int) -> httpx2.Response:
    raise httpx2.ReadTimeout("timed out")


ENDPOINTS: dict[str, Callable[[int], httpx2.Response]] = {
    "garbage-200": always(lambda: reply(200, b"<html>not json")),
    "json-not-a-message": always(lambda: reply(200, {"hello": "world"})),
    "json-list": always(lambda: reply(200, [1, 2, 3])),
    "content-not-a-list": always(lambda: reply(200, {**stub_lib.message([])[2], "content": "text"})),
    "missing-usage": always(lambda: reply(200, {k: v for k, v in stub_lib.message(
        [{"type": "text", "text": "回答"}])[2].items() if k != "usage"})),
    "tool-input-string": after_first(lambda: message([tool(arguments="在庫")], "tool_use")),
    "tool-input-list": after_first(lambda: message([tool(arguments=["在庫"])], "tool_use")),
    "tool-name-number": after_first(lambda: message([tool(name=7)], "tool_use")),
    "tool-name-missing": after_first(lambda: message([{"type": "tool_use", "id": "t", "input": {}}], "tool_use")),
    "tool-id-missing": after_first(lambda: message([{"type": "tool_use", "name": "faq_search",
                                                     "input": {"query": "x"}}], "tool_use")),
    "duplicate-ids": after_first(lambda: message([tool(tool_id="same"), tool(tool_id="same"),
                                                  tool(name="nope", tool_id="same")], "tool_use")),
    "thousands-of-calls": after_first(lambda: message([tool(tool_id=f"t{i}") for i in range(3000)], "tool_use")),
    "surrogate-escapes": always(lambda: reply(200, json.dumps(stub_lib.message(
        [{"type": "text", "text": "X"}])[2]).replace('"X"', '"\\ud800 回答 \\udfff"').encode())),
    "refusal": always(lambda: message([], "refusal")),
    "endless-max-tokens": always(lambda: message([{"type": "text", "text": "途中まで"}], "max_tokens")),
    "max-tokens-mid-tool": always(lambda: message([tool()], "max_tokens")),
    "stop-null": always(lambda: message([{"type": "text", "text": "回答"}], None)),  # type: ignore[arg-type]
    "529-storm": always(lambda: reply(529, {"message": "Overloaded"}, {"x-amzn-ErrorType": "ServiceUnavailable"})),
    "429-retry-after-huge": always(lambda: reply(429, {"message": "slow down"},
                                                 {"x-amzn-ErrorType": "ThrottlingException", "retry-after": "86400"})),
    "400-validation": always(lambda: reply(400, {"message": "bad"}, {"x-amzn-ErrorType": "ValidationException"})),
    "403-denied": always(lambda: reply(403, {"message": "no"}, {"x-amzn-ErrorType": "AccessDeniedException"})),
    "refused": refused,
    "timeouts": timed_out,
    "empty-200": always(lambda: reply(200, b"")),
    "huge-text": always(lambda: message([{"type": "text", "text": "あ" * 300_000}])),
}


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_a_hostile_model_endpoint_ends_the_run_in_one_answer_or_notice(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], endpoint: str) -> None:
    q = question_of(ws)
    clock = FakeClock()
    count = {"n": 0}

    def handler(request: httpx2.Request) -> httpx2.Response:
        count["n"] += 1
        clock.advance(0.5)  # each request takes a little time
        return ENDPOINTS[endpoint](count["n"])

    config = ModelConfig.from_env({"AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key"})
    assert config is not None
    model = build_model(config, clock=clock,
                        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))

    def make(registry: Any, on_progress: Any, on_event: Any) -> Agent:
        return Agent(model, RegistryTools(registry), Settings(), clock=clock, on_progress=on_progress,
                     on_event=on_event)

    start = clock.monotonic()
    code = run(Options(channel="C0ECSUP", ts=q.ts), env, make_agent=make, clock=clock)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code in (0, 1), code
    assert placeholders == [] and "eyes" not in reactions
    assert kinds in (["answer"], ["failure"]), kinds
    assert reactions == {("white_check_mark" if kinds == ["answer"] else "x"): [BOT]}
    assert clock.monotonic() - start <= DEADLINE_S + 60, (clock.monotonic() - start, count["n"])
    if endpoint in ("refused",):
        assert clock.monotonic() - start <= 15, clock.monotonic() - start  # degraded within 15 s
