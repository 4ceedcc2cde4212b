"""The streamed model request end to end: the real client against the Bedrock stub's ``invoke-with-response-stream``
(real AWS event-stream frames, decoded by botocore) and the direct API's server-sent events, text deltas to
``Request.on_text``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agent.core.claude import Claude, ModelConfig, build_model
from agent.core.claude_stream import accumulate
from agent.core.model import Request
from agent.errors import ModelRequestError
from tests.fakes import bedrock as stub_lib
from tests.fakes.bedrock import HELLO, MODEL, BedrockStub
from tests.fakes.clock import FakeClock


def bedrock(stub: BedrockStub, clock: FakeClock) -> Claude:
    config = ModelConfig.from_env({"AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key",
                                   "ANTHROPIC_BEDROCK_BASE_URL": stub.url})
    assert config is not None
    return build_model(config, clock=clock)


def request(on_text: object = None, clock: FakeClock | None = None) -> Request:
    return Request([], HELLO, [], None, 1024, MODEL, None, clock, on_text=on_text)  # type: ignore[arg-type]


def test_a_streamed_answer_arrives_delta_by_delta_and_whole(stub: BedrockStub) -> None:
    answer = "在庫同期は毎時0分に走ります。遅れる場合は [FAQ](faq://stock-sync) を見てください。"
    stub.script(stub_lib.text(answer))
    stub.delta_chars = 7
    deltas: list[str] = []
    response = bedrock(stub, FakeClock()).create(request(deltas.append))
    assert stub.requests[-1].path.endswith("/invoke-with-response-stream")
    assert "stream" not in stub.requests[-1].body and stub.requests[-1].body["anthropic_version"] == \
        stub_lib.BEDROCK_VERSION
    assert len(deltas) == -(-len(answer) // 7) and "".join(deltas) == answer
    assert response.text == answer and response.stop_reason == "end_turn"
    assert response.usage.input_tokens == 1200 and response.usage.output_tokens == 80


def test_a_tool_call_streams_its_preamble_and_keeps_its_input(stub: BedrockStub) -> None:
    stub.script(stub_lib.tool_use("faq_search", {"query": "在庫"}))
    deltas: list[str] = []
    response = bedrock(stub, FakeClock()).create(request(deltas.append))
    assert deltas == ["調べます。"]
    assert response.tool_uses == [{"type": "tool_use", "id": "toolu_bdrk_01", "name": "faq_search",
                                   "input": {"query": "在庫"}}]
    assert response.stop_reason == "tool_use"


def test_without_on_text_the_request_is_not_streamed(stub: BedrockStub) -> None:
    stub.script(stub_lib.text("ok"))
    assert bedrock(stub, FakeClock()).create(request()).text == "ok"
    assert stub.requests[-1].path.endswith("/invoke")


def test_a_throttled_stream_is_retried_streamed(stub: BedrockStub) -> None:
    stub.script(stub_lib.throttled("1"), stub_lib.text("二度目"))
    deltas: list[str] = []
    clock = FakeClock()
    response = bedrock(stub, clock).create(request(deltas.append, clock))
    assert response.text == "二度目" and deltas == ["二度目"]
    assert [r.path.rsplit("/", 1)[-1] for r in stub.requests] == ["invoke-with-response-stream"] * 2


def test_a_stream_cut_off_after_text_is_retried_unstreamed(stub: BedrockStub) -> None:
    """A reset after the first deltas: the retry is a plain request, so no text reaches Slack twice."""
    answers = iter([stub_lib.text("途中で切れる回答"), stub_lib.text("完全な回答")])
    stub.responder = lambda model_id, body: next(answers)
    stub.cut_after = 3  # frames: message_start, content_block_start, one delta, then the connection drops
    deltas: list[str] = []
    clock = FakeClock()
    response = bedrock(stub, clock).create(request(deltas.append, clock))
    assert deltas == ["途中で切れる回答"] and response.text == "完全な回答"
    assert [r.path.rsplit("/", 1)[-1] for r in stub.requests] == ["invoke-with-response-stream", "invoke"]


def test_an_exception_in_the_stream_before_any_text_is_retried_streamed(stub: BedrockStub) -> None:
    """A ResponseStream exception (throttlingException, HTTP 429 by the API reference) after message_start."""
    stub.script(stub_lib.text("回答"))
    stub.cut_after, stub.stream_exception = 1, ("throttlingException", "Too many tokens, please wait.")
    deltas: list[str] = []
    clock = FakeClock()
    response = bedrock(stub, clock).create(request(deltas.append, clock))
    assert response.text == "回答" and deltas == ["回答"] and len(clock.sleeps) == 1
    assert "HTTP 429 throttlingException: Too many tokens" in response.retries[0]
    assert [r.path.rsplit("/", 1)[-1] for r in stub.requests] == ["invoke-with-response-stream"] * 2


def test_a_validation_exception_in_the_stream_is_not_retried(stub: BedrockStub) -> None:
    stub.script(stub_lib.text("回答"))
    stub.cut_after, stub.stream_exception = 1, ("validationException", "Input is too long for requested model.")
    with pytest.raises(ModelRequestError, match="HTTP 400 validationException: Input is too long") as caught:
        bedrock(stub, FakeClock()).create(request(lambda delta: None))
    assert caught.value.status == 400 and len(stub.requests) == 1


def test_the_direct_api_streams_server_sent_events(stub: BedrockStub) -> None:
    config = ModelConfig.from_env({"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": stub.url})
    assert config is not None
    stub.script(stub_lib.tool_use("faq_search", {"query": "在庫"}))
    stub.delta_chars = 2
    deltas: list[str] = []
    response = build_model(config, clock=FakeClock()).create(
        Request([], HELLO, [], None, 1024, config.model, None, on_text=deltas.append))
    sent = stub.requests[-1]
    assert sent.path == "/v1/messages" and sent.body["stream"] is True and sent.body["model"] == config.model
    assert deltas == ["調べ", "ます", "。"] and response.stop_reason == "tool_use"
    assert response.tool_uses == [{"type": "tool_use", "id": "toolu_bdrk_01", "name": "faq_search",
                                   "input": {"query": "在庫"}}]


def test_a_tool_input_nested_deeper_than_json_goes_stays_the_models_string() -> None:
    raw = "[" * 100_000 + "]" * 100_000  # the model's own bytes: refused by the loop as not an object, never a crash
    events = [
        {"type": "message_start", "message": {"role": "assistant", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "x"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": raw}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
    ]
    message = accumulate(iter(events), lambda text: None)
    assert message["content"][0]["input"] == raw


def one_char_deltas(count: int) -> Iterator[dict[str, Any]]:
    yield {"type": "message_start", "message": {"role": "assistant", "content": []}}
    yield {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    yield {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "x"}}
    json_delta = {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta"}}
    yield {**json_delta, "delta": {**json_delta["delta"], "partial_json": '{"q": "'}}
    for _ in range(count):
        yield {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}}
        yield {**json_delta, "delta": {**json_delta["delta"], "partial_json": "b"}}
    yield {**json_delta, "delta": {**json_delta["delta"], "partial_json": '"}'}}
    yield {"type": "content_block_stop", "index": 1}
    yield {"type": "message_stop"}  # block 0 never stopped: joined all the same


def test_a_stream_of_many_small_deltas_is_accumulated_in_linear_time() -> None:
    """Each delta copied its block's text so far: 400,000 one-character deltas (a peer's 60 MB) took 4 s."""
    message = accumulate(one_char_deltas(400_000), lambda text: None)
    assert message["content"] == [{"type": "text", "text": "a" * 400_000},
                                  {"type": "tool_use", "id": "t", "name": "x", "input": {"q": "b" * 400_000}}]


def test_a_delta_that_is_not_text_is_a_refused_response_not_text_streamed() -> None:
    events = [{"type": "message_start", "message": {}}, {"type": "content_block_start", "index": 0,
                                                          "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ["a"]}}]
    streamed: list[str] = []
    with pytest.raises(ValueError, match="not text"):
        accumulate(iter(events), streamed.append)
    assert streamed == []
