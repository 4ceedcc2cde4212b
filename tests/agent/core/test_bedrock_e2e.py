"""End to end through the real client (agent.core.claude over httpx2, botocore's SigV4) to a local Bedrock-compatible
HTTP stub."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest

from agent.core.claude import CONNECT_TIMEOUT_S, MAX_REPORTED_TOKENS, MIN_ATTEMPT_S, Claude, build_model
from agent.core.loop import Agent
from agent.core.model import Request
from agent.core.model_config import ModelConfig
from agent.core.settings import Settings
from agent.core.tools import RegistryTools
from agent.errors import ModelRequestError, ModelUnavailable
from mcp_lib import Registry
from mcp_lib.http import NameResolution
from tests.fakes import bedrock as stub_lib
from tests.fakes.bedrock import HELLO, MODEL, SYSTEM, BedrockStub, answering_with_the_first_faq_hit
from tests.fakes.clock import FakeClock
from tests.fakes.loop import FakeTools, check_transcript


def bedrock(stub: BedrockStub, clock: FakeClock, **env: str) -> Claude:
    config = ModelConfig.from_env({"AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key",
                                   "ANTHROPIC_BEDROCK_BASE_URL": stub.url, **env})
    assert config is not None
    return build_model(config, clock=clock)


def through_transport(handler: Callable[[httpx2.Request], httpx2.Response], clock: FakeClock) -> Claude:
    """The real client over an httpx2 MockTransport: for failures a local server cannot produce on cue."""
    config = ModelConfig.from_env({"AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key"})
    assert config is not None
    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    return build_model(config, clock=clock, http_client=client)


def ok(request: httpx2.Request) -> httpx2.Response:
    status, headers, body = stub_lib.text("ok")
    return httpx2.Response(status, headers=headers, json=body)


def ask(model: Claude, deadline: float | None = None) -> Any:
    return model.create(Request(SYSTEM, HELLO, [], None, 256, MODEL, deadline))


def test_a_tool_use_round_trip_through_the_client(stub: BedrockStub) -> None:
    stub.responder = answering_with_the_first_faq_hit
    clock = FakeClock(wall=datetime(2026, 11, 18, tzinfo=UTC).timestamp())
    agent = Agent(bedrock(stub, clock), RegistryTools(Registry(env={})), Settings(), clock=clock)
    answer = agent.run("Shopifyの在庫同期が遅れているときの確認手順は？")

    assert not answer.degraded and answer.rounds == 1 and answer.stop == "end_turn"
    assert [c.name for c in answer.tool_calls] == ["faq_search"]
    assert answer.sources and answer.sources[0]["url"] in answer.text
    assert answer.usage.cache_read_input_tokens == 2900 and answer.usage.input_tokens == 1500
    check_transcript(answer.messages)

    first, second = stub.requests
    assert first.path == f"/model/{MODEL}/invoke" and first.model_id == MODEL
    assert first.headers["authorization"] == "Bearer test-bedrock-key"
    for request in (first, second):
        body = request.body
        assert body["anthropic_version"] == "bedrock-2023-05-31"
        assert "model" not in body and "stream" not in body
        assert body["max_tokens"] == 4096 and body["tool_choice"] == {"type": "auto"}
        assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert [t["name"] for t in body["tools"]] == ["faq_search", "faq_getEntry"]
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["tools"][0]["input_schema"]["properties"]["limit"]["type"] == "integer"
    reply = second.body["messages"][-1]["content"][0]
    assert reply["type"] == "tool_result" and reply["tool_use_id"] == "toolu_bdrk_01"
    assert second.body["messages"][1]["content"][1] == {
        "type": "tool_use", "id": "toolu_bdrk_01", "name": "faq_search", "input": {"query": "Shopify 在庫同期 遅延"}}


def without_marks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
            for m in messages]


def marked(messages: list[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if any("cache_control" in b for b in m["content"])]


def test_a_call_in_the_final_request_is_refused_and_asked_again_with_the_same_tools_and_tool_choice(
        stub: BedrockStub) -> None:
    def responder(model_id: str, body: dict[str, Any]) -> stub_lib.Reply:
        last = body["messages"][-1]["content"]
        if last[0]["type"] == "tool_result" and last[0].get("is_error"):  # helpbot refused the call
            return stub_lib.text("集めた情報から回答します。")
        return stub_lib.tool_use("faq_search", {"query": "在庫"}, tool_id=f"toolu_{len(stub.requests)}")

    stub.responder = responder
    agent = Agent(bedrock(stub, FakeClock()), RegistryTools(Registry(env={})), Settings(max_rounds=2))
    answer = agent.run("在庫がずれる")
    assert answer.stop == "round_limit" and answer.rounds == 2 and answer.text == "集めた情報から回答します。"
    assert len(stub.requests) == 4
    asked, again = stub.requests[-2].body, stub.requests[-1].body
    # first asked with tool_choice auto (the cached transcript is read) -- the model called a tool anyway
    assert asked["tool_choice"] == {"type": "auto"} and "cache_control" in asked["messages"][-3]["content"][-1]
    assert asked["messages"][-1]["content"][-1]["text"].startswith("[helpbot] The tool rounds are used up.")
    # then the same tools and tool_choice, the transcript only appended to: the same cache entry is read
    assert again["tool_choice"] == asked["tool_choice"] and again["tools"] == asked["tools"]
    assert again["system"] == asked["system"]
    assert without_marks(again["messages"][:len(asked["messages"])]) == without_marks(asked["messages"])
    assert marked(again["messages"]) == marked(asked["messages"])
    [refusal] = again["messages"][-1]["content"]
    assert refusal["is_error"] is True and refusal["content"].startswith("[helpbot] Not run: no more tool calls.")
    check_transcript(again["messages"])


def test_a_model_that_calls_a_tool_after_the_refusal_too_gets_no_third_request(stub: BedrockStub) -> None:
    def responder(model_id: str, body: dict[str, Any]) -> stub_lib.Reply:
        if body["tool_choice"] == {"type": "none"}:  # never sent: it would read no cached message
            return stub_lib.text("集めた情報から回答します。")
        return stub_lib.tool_use("faq_search", {"query": "在庫"}, tool_id=f"toolu_{len(stub.requests)}")

    stub.responder = responder
    agent = Agent(bedrock(stub, FakeClock()), RegistryTools(Registry(env={})), Settings(max_rounds=2))
    answer = agent.run("在庫がずれる")
    assert answer.stop == "round_limit" and answer.rounds == 2 and answer.degraded
    assert [r.body["tool_choice"] for r in stub.requests] == [{"type": "auto"}] * 4
    assert answer.text.startswith("⚠️ これは AI が生成した回答ではありません（AI モデルが回答しなかった")
    assert answer.sources and all(f"{i}. {s['title']}" in answer.text for i, s in enumerate(answer.sources, 1))
    assert answer.messages[-1]["content"][0]["is_error"] is True  # the refused call, answered; the last not kept
    check_transcript(answer.messages)


def test_throttled_twice_then_success_with_our_retries_only(stub: BedrockStub) -> None:
    stub.script(stub_lib.throttled(retry_after="7"), stub_lib.throttled(), stub_lib.text("ok"))
    clock = FakeClock()
    response = ask(bedrock(stub, clock))
    assert response.text == "ok"
    assert len(stub.requests) == 3  # one request per attempt ...
    assert clock.sleeps[0] == 7.0  # ... ours did, honouring retry-after,
    assert 3.0 <= clock.sleeps[1] <= 5.0  # then backing off exponentially (2 s * 2 ± 25 %)
    assert len(response.retries) == 2 and "ThrottlingException" in response.retries[0]


def test_throttled_forever_gives_up_after_the_attempts(stub: BedrockStub) -> None:
    stub.script(stub_lib.throttled())
    clock = FakeClock()
    with pytest.raises(ModelUnavailable, match=r"after 3 attempt.*HTTP 429 ThrottlingException") as caught:
        ask(bedrock(stub, clock, HELPBOT_MODEL_MAX_ATTEMPTS="3"))
    assert len(stub.requests) == 3 and len(clock.sleeps) == 2
    assert not caught.value.out_of_time  # the attempts ran out, not the time


def test_retry_after_ms_is_honoured(stub: BedrockStub) -> None:
    stub.script(stub_lib.error(429, "ThrottlingException", "Too many requests", {"retry-after-ms": "1500"}),
                stub_lib.text("ok"))
    clock = FakeClock()
    assert ask(bedrock(stub, clock)).text == "ok"
    assert clock.sleeps == [1.5] and len(stub.requests) == 2


def test_a_retry_after_date_is_read_on_the_runs_clock(stub: BedrockStub) -> None:
    """``Retry-After`` as an HTTP date: that date less the run's wall clock, not the machine's."""
    from email.utils import formatdate

    from tests.fakes.clock import EPOCH

    stub.script(stub_lib.error(429, "ThrottlingException", "Too many requests",
                               {"retry-after": formatdate(EPOCH + 9, usegmt=True)}), stub_lib.text("ok"))
    clock = FakeClock()
    assert ask(bedrock(stub, clock)).text == "ok"
    assert clock.sleeps == [9.0] and len(stub.requests) == 2


def test_connection_errors_and_timeouts_are_retried() -> None:
    failures: list[Exception] = [httpx2.ConnectError("connection refused"), httpx2.ReadTimeout("read timed out")]

    def handler(request: httpx2.Request) -> httpx2.Response:
        if failures:
            raise failures.pop(0)
        return ok(request)

    clock = FakeClock()
    response = ask(through_transport(handler, clock))
    assert response.text == "ok" and len(clock.sleeps) == 2
    assert "ConnectError" in response.retries[0] and "ReadTimeout" in response.retries[1]


def test_an_answer_whose_compressed_body_does_not_decode_is_retried() -> None:
    """A gzip body mangled on the way (httpx2's DecodingError) is retried as a reset is: it was taken for a request
    Bedrock rejected, and the run degraded."""
    sent: list[int] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(1)
        if len(sent) > 1:
            return ok(request)
        return httpx2.Response(200, headers={"content-type": "application/json", "content-encoding": "gzip"},
                               stream=httpx2.ByteStream(b"\x1f\x8b\x08\x00 not a deflate stream"))

    clock = FakeClock()
    response = ask(through_transport(handler, clock))
    assert response.text == "ok" and len(sent) == 2 and "DecodingError" in response.retries[0]


def test_a_request_never_outlives_the_deadline() -> None:
    timeouts: list[dict[str, float]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        timeouts.append(request.extensions["timeout"])
        return ok(request)

    clock = FakeClock()
    ask(through_transport(handler, clock), deadline=clock.monotonic() + 3)
    assert timeouts[0]["read"] == 3.0  # not the 120 s request timeout, and no floor above the time left


def test_no_request_is_sent_once_the_deadline_leaves_no_time(stub: BedrockStub) -> None:
    clock = FakeClock()
    with pytest.raises(ModelUnavailable, match="no time left") as caught:
        ask(bedrock(stub, clock), deadline=clock.monotonic() + 0.5)
    assert caught.value.out_of_time and stub.requests == [] and clock.sleeps == []


def test_retries_stop_at_the_deadline(stub: BedrockStub) -> None:
    stub.script(stub_lib.error(503, "ServiceUnavailableException", "Bedrock is unable to process your request."))
    clock = FakeClock()
    with pytest.raises(ModelUnavailable, match="503 ServiceUnavailableException") as caught:
        ask(bedrock(stub, clock), deadline=clock.monotonic() + 10)
    # 2 s, 4 s (+-25 %), then no wait that would leave less than the second an attempt needs
    assert sum(clock.sleeps) <= 10 - MIN_ATTEMPT_S and len(clock.sleeps) == 2 and len(stub.requests) == 3
    assert caught.value.out_of_time  # the loop then still asks for the final answer


def test_a_retry_after_beyond_the_deadline_is_not_waited_for(stub: BedrockStub) -> None:
    stub.script(stub_lib.throttled(retry_after="60"))
    clock = FakeClock()
    with pytest.raises(ModelUnavailable):
        ask(bedrock(stub, clock), deadline=clock.monotonic() + 30)
    assert len(stub.requests) == 1 and clock.sleeps == []


def test_the_stub_rejects_another_anthropic_version_and_we_send_bedrocks(stub: BedrockStub) -> None:
    """anthropic 2.x's own default version, which Claude 4.5 on Bedrock may refuse (api-notes)."""
    raw = httpx2.post(f"{stub.url}/model/{MODEL}/invoke", headers={"authorization": "Bearer k"},
                     json={"anthropic_version": "2026-10-21", "max_tokens": 10, "messages": HELLO})
    assert raw.status_code == 400 and raw.headers["x-amzn-errortype"].startswith("ValidationException")

    assert ask(bedrock(stub, FakeClock())).text == "ok"
    assert stub.requests[1].body["anthropic_version"] == "bedrock-2023-05-31"
    assert stub.requests[1].headers["content-type"] == "application/json"


def test_client_errors_are_not_retried_and_say_what_was_rejected(stub: BedrockStub) -> None:
    stub.script(stub_lib.error(400, "ValidationException", "messages.1: tool_use ids were found without "
                                                           "tool_result blocks"))
    clock = FakeClock()
    with pytest.raises(ModelRequestError) as caught:
        ask(bedrock(stub, clock))
    assert caught.value.status == 400 and len(stub.requests) == 1 and clock.sleeps == []
    assert "HTTP 400 ValidationException: messages.1: tool_use ids" in str(caught.value)


def test_a_401_is_not_retried(stub: BedrockStub) -> None:
    stub.script(stub_lib.error(401, "UnrecognizedClientException", "The security token included in the request is "
                                                                   "invalid."), stub_lib.text("ok"))
    clock = FakeClock()
    with pytest.raises(ModelRequestError, match=r"401 UnrecognizedClientException.*check the API key") as caught:
        ask(bedrock(stub, clock))
    assert caught.value.status == 401 and len(stub.requests) == 1 and clock.sleeps == []


def test_access_denied_carries_a_hint(stub: BedrockStub) -> None:
    stub.script(stub_lib.error(403, "AccessDeniedException", "You don't have access to the model"))
    with pytest.raises(ModelRequestError, match=r"403 AccessDeniedException.*model access"):
        ask(bedrock(stub, FakeClock()))
    assert len(stub.requests) == 1


def test_a_model_that_stays_down_degrades_to_faq_sources(stub: BedrockStub) -> None:
    stub.script(stub_lib.error(503, "ServiceUnavailableException", "Bedrock is unable to process your request."))
    clock = FakeClock()
    agent = Agent(bedrock(stub, clock, HELPBOT_MODEL_MAX_ATTEMPTS="2"), RegistryTools(Registry(env={})),
                  Settings(), clock=clock)
    answer = agent.run("Shopifyの在庫同期が遅れているときの確認手順は？")
    assert answer.degraded and "503" in (answer.error or "")
    assert answer.sources and all(s["url"] for s in answer.sources)
    assert "AI モデルを利用できなかった" in answer.text


def test_the_direct_anthropic_api_behind_the_same_interface(stub: BedrockStub) -> None:
    config = ModelConfig.from_env({"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": stub.url})
    assert config is not None
    model = build_model(config, clock=FakeClock())
    response = model.create(Request(SYSTEM, HELLO, [], None, 64, config.model))
    assert response.text == "ok"
    request = stub.requests[0]
    assert request.path == "/v1/messages" and request.body["model"] == "claude-sonnet-4-6"
    assert "sk-ant-test" in (request.headers.get("x-api-key") or request.headers["authorization"])
    assert "anthropic_version" not in request.body
    assert request.headers["anthropic-version"]


def test_an_unreachable_endpoint_gets_one_quick_retry_then_the_run_degrades() -> None:
    def refused(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("[Errno 111] Connection refused")

    clock = FakeClock()
    model = through_transport(refused, clock)
    with pytest.raises(ModelUnavailable, match=r"after 2 attempt.*ConnectError") as caught:
        ask(model, deadline=clock.monotonic() + 480)
    assert len(clock.sleeps) == 1 and clock.sleeps[0] <= 1.25 and not caught.value.out_of_time

    clock = FakeClock()
    agent = Agent(through_transport(refused, clock), RegistryTools(Registry(env={})), Settings(), clock=clock)
    answer = agent.run("Shopifyの在庫同期が遅れているときの確認手順は？")
    assert answer.degraded and "ConnectError: [Errno 111] Connection refused" in (answer.error or "")
    assert answer.seconds <= 15 and answer.sources  # on the run's clock: one quick retry, not a minute of them


def test_a_model_host_whose_name_does_not_resolve_degrades_within_15_s() -> None:
    """getaddrinfo is outside httpx's timeouts: a name server that never answers would hold each attempt for as
    long as the resolver's own retries (30 s and more). The lookup is bounded by the connect timeout instead; the
    wait seam moves the run's clock by what it would have waited."""
    clock = FakeClock()
    looked_up: list[str] = []

    def resolver(host: str, port: int) -> object:
        looked_up.append(host)
        threading.Event().wait(60)  # never answers (a daemon thread nobody waits for)
        raise AssertionError

    def wait(future: Future[object], timeout: float) -> object:
        clock.advance(timeout)
        raise TimeoutError

    config = ModelConfig.from_env({"AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key"})
    assert config is not None
    model = build_model(config, clock=clock, names=NameResolution(resolver, wait=wait))
    agent = Agent(model, RegistryTools(Registry(env={})), Settings(), clock=clock)
    answer = agent.run("Shopifyの在庫同期が遅れているときの確認手順は？")
    assert answer.degraded and "not resolved within 5 s" in (answer.error or "")
    assert looked_up == ["bedrock-runtime.ap-northeast-1.amazonaws.com"]  # one lookup, shared by both attempts
    assert answer.seconds <= 15 and answer.sources  # 2 x 5 s + one quick retry, not a minute


def test_a_connection_not_made_in_a_few_seconds_is_not_waited_for() -> None:
    timeouts: list[dict[str, float]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        timeouts.append(request.extensions["timeout"])
        return ok(request)

    ask(through_transport(handler, FakeClock()))
    assert timeouts[0]["connect"] == CONNECT_TIMEOUT_S and timeouts[0]["read"] == 120.0


def test_an_empty_bedrock_api_key_in_the_environment_means_unset(stub: BedrockStub,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Actions passes an unset secret as "": nothing reads the process environment's copy (the SDK once did, and
    raised "Cannot specify both" next to AWS keys)."""
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "")
    env = {"AWS_BEARER_TOKEN_BEDROCK": "", "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "ANTHROPIC_BEDROCK_BASE_URL": stub.url}
    config = ModelConfig.from_env(env)
    assert config is not None and config.bearer_token is None
    assert ask(build_model(config, clock=FakeClock())).text == "ok"
    assert stub.requests[0].headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/")


def test_the_model_client_waits_on_the_runs_clock_not_its_own(stub: BedrockStub) -> None:
    """One clock per run: the deadline the loop computes and the retries' sleeps are on the agent's clock, whatever
    the model client was built with (here a clock 1000 s ahead, as an uptime-dependent test once had)."""
    stub.script(stub_lib.throttled(retry_after="7"), stub_lib.text("ok"))
    run_clock, model_clock = FakeClock(start=1.0), FakeClock(start=1000.0)
    agent = Agent(bedrock(stub, model_clock), RegistryTools(Registry(env={})), Settings(), clock=run_clock)
    answer = agent.run("在庫")
    assert not answer.degraded and answer.text == "ok"
    assert run_clock.sleeps == [7.0] and model_clock.sleeps == [] and answer.seconds == pytest.approx(7.0)


def test_a_tool_use_whose_input_is_a_string_is_answered_with_an_error_result(stub: BedrockStub) -> None:
    """Through the real client: it does not validate the input's shape, so the loop must."""
    stub.script(stub_lib.message([{"type": "tool_use", "id": "toolu_x", "name": "faq_search", "input": "在庫"}],
                                 stop_reason="tool_use"),
                stub_lib.text("入力が不正でした。"))
    clock = FakeClock()
    agent = Agent(bedrock(stub, clock), RegistryTools(Registry(env={})), Settings(), clock=clock)
    answer = agent.run("在庫")
    assert not answer.degraded and answer.text == "入力が不正でした。" and answer.tool_calls[0].is_error
    sent = stub.requests[1].body["messages"]
    assert sent[1]["content"][0]["input"] == {} and sent[2]["content"][0]["is_error"] is True
    check_transcript(sent)


@pytest.mark.parametrize("odd", [{"usage": {"input_tokens": 10**400, "output_tokens": 10**400}},
                                 {"usage": {"input_tokens": -5}}, {"stop_reason": ["end_turn"]},
                                 {"stop_reason": {"a": 1}}])
def test_a_usage_or_stop_reason_no_service_reports_still_ends_in_an_answer(odd: dict[str, Any]) -> None:
    """Bedrock is a peer like any other: a 400-digit token count overflowed the cost's float, a list as the
    stop_reason was unhashable -- both a traceback of the run."""
    def handler(request: httpx2.Request) -> httpx2.Response:
        status, headers, body = stub_lib.text("回答です")
        return httpx2.Response(status, headers=headers, json={**body, **odd})

    clock = FakeClock()
    answer = Agent(through_transport(handler, clock), RegistryTools(Registry(env={})), Settings(), clock=clock).run("?")
    assert answer.text == "回答です" and answer.stop == "end_turn" and 0 <= answer.cost_usd < 1e6


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("garbage", ["abc", [1], {"a": 1}, "1e999", float("inf"), float("nan"), "12.5", "9" * 5000])
def test_a_usage_count_that_is_no_count_reads_as_0(stub: BedrockStub, garbage: Any, streamed: bool) -> None:
    """int() of "abc" or "1e999" raised ValueError (a list TypeError, JSON's 1e999 OverflowError) out of the model
    call: a proxy's or a stub's odd usage failed the request. A count of 400 digits is still cut to the clamp."""
    usage = dict.fromkeys(("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"), garbage)
    stub.script(stub_lib.text("ok", usage={**usage, "output_tokens": 10**400}))
    response = bedrock(stub, FakeClock()).create(Request(SYSTEM, HELLO, [], None, 256, MODEL, None,
                                                         on_text=(lambda _: None) if streamed else None))
    assert response.text == "ok" and stub.requests[-1].path.endswith("-stream" if streamed else "/invoke")
    assert response.usage.to_dict() == {**dict.fromkeys(usage, 0), "output_tokens": MAX_REPORTED_TOKENS}


@pytest.mark.parametrize("number", [b"NaN", b"-Infinity", b"1e999"])
def test_a_tool_input_with_a_number_json_cannot_write_is_refused_and_the_run_goes_on(number: bytes) -> None:
    """Python's JSON reads NaN and 1e999 (inf), but no request can carry them: the next request was refused
    (ValueError: Out of range float values) and the run ended degraded."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        if len(sent) == 1:
            return httpx2.Response(200, headers={"content-type": "application/json"}, content=(
                b'{"content": [{"type": "tool_use", "id": "t1", "name": "faq_search", "input": {"query": "x", '
                b'"limit": ' + number + b'}}], "stop_reason": "tool_use", "usage": {}}'))
        status, headers, body = stub_lib.text("最終回答")
        return httpx2.Response(status, headers=headers, json=body)

    clock = FakeClock()
    answer = Agent(through_transport(handler, clock), RegistryTools(Registry(env={})), Settings(), clock=clock).run("?")
    assert not answer.degraded and answer.text == "最終回答" and [c.is_error for c in answer.tool_calls] == [True]
    call, result = sent[1]["messages"][-2]["content"][0], sent[1]["messages"][-1]["content"][0]
    assert call["input"] == {} and result["is_error"] and "NaN or Infinity" in result["content"]


@pytest.mark.parametrize("odd", [b'{"type": "server_tool_use", "id": "s1", "input": {"n": NaN}}',
                                 b'{"type": "thinking", "thinking": "x", "signature": "s", "n": [Infinity]}'])
def test_a_block_no_request_can_carry_back_is_left_out_and_the_run_goes_on(odd: bytes) -> None:
    """A block passed back as it came with a NaN or an Infinity made the run's next request fail (ValueError: out
    of range float values): a degraded answer."""
    sent: list[bytes] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.content)
        if len(sent) == 1:
            return httpx2.Response(200, headers={"content-type": "application/json"}, content=(
                b'{"content": [' + odd + b', {"type": "tool_use", "id": "t1", "name": "faq_search", "input": '
                b'{"query": "x"}}], "stop_reason": "tool_use", "usage": {}}'))
        status, headers, body = stub_lib.text("最終回答")
        return httpx2.Response(status, headers=headers, json=body)

    clock = FakeClock()
    answer = Agent(through_transport(handler, clock), RegistryTools(Registry(env={})), Settings(), clock=clock).run("?")
    assert not answer.degraded and answer.text == "最終回答" and len(sent) == 2


def test_a_lone_surrogate_in_a_tool_result_does_not_break_the_next_request() -> None:
    """A service's JSON may escape half a character ("\\ud800", which json.loads keeps); no UTF-8 request can
    carry it, so the tool result reaches the model with U+FFFD in its place and the run goes on."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        status, headers, body = (stub_lib.tool_use("wiki", {"query": "x"}) if len(sent) == 1
                                 else stub_lib.text("最終回答"))
        return httpx2.Response(status, headers=headers, json=body)

    clock = FakeClock()
    tools = FakeTools({"wiki": lambda args: {"body": json.loads('"a\\ud800b"')}})
    answer = Agent(through_transport(handler, clock), tools, Settings(), clock=clock).run("?")
    assert not answer.degraded and answer.text == "最終回答"
    assert "a\ufffdb" in json.dumps(sent[1]["messages"][-1]["content"], ensure_ascii=False)
