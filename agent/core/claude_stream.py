"""One streamed Messages response as it arrives -- Bedrock's AWS event-stream frames (InvokeModelWithResponseStream)
or the direct API's server-sent events, each carrying one Messages stream event: the text deltas to ``on_text``,
then the message the events build, as the request without streaming would have answered it."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

from agent.errors import StatusError, Truncated

# An error in the stream stands for the HTTP status documented for its type: Bedrock's ResponseStream exceptions
# (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ResponseStream.html) and the API's error event
# types (docs.anthropic.com/en/api/errors); any other counts as a 500.
STREAM_ERRORS = {"validationException": 400, "modelTimeoutException": 408, "modelStreamErrorException": 424,
                 "throttlingException": 429, "serviceUnavailableException": 503, "invalid_request_error": 400,
                 "rate_limit_error": 429, "overloaded_error": 529}
# Deltas whose text extends a field of the block (a tool's JSON is parsed at the block's end).
APPENDED = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


def read_stream(response: Any, bedrock: bool, on_text: Callable[[str], None]) -> dict[str, Any]:
    """The message of a streamed httpx2 ``response``, each text delta passed to ``on_text`` as it arrives."""
    return accumulate(_frames(response.iter_bytes()) if bedrock else _sse(response.iter_lines()), on_text)


def _frames(chunks: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    """An AWS event stream's events (botocore's decoder): a ``chunk`` carries ``{"bytes": base64(event)}``; an
    ``exception`` (or ``error``) message ends the stream."""
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    for data in chunks:
        buffer.add_data(data)
        for frame in buffer:
            headers, payload = frame.headers, json.loads(frame.payload or b"{}")
            if headers.get(":message-type") in ("exception", "error"):
                kind = str(headers.get(":exception-type") or headers.get(":error-code") or "error")
                raise StatusError(STREAM_ERRORS.get(kind, 500), kind,
                                  str(payload.get("message") or headers.get(":error-message") or ""))
            if headers.get(":event-type") == "chunk":
                yield json.loads(base64.b64decode(payload["bytes"]))


def _sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The events of a server-sent event stream (``data:`` lines, an event ending at a blank line)."""
    data: list[str] = []
    for line in [*lines, ""]:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def accumulate(events: Iterator[dict[str, Any]], on_text: Callable[[str], None]) -> dict[str, Any]:
    """The message the stream events build (docs.anthropic.com/en/api/messages-streaming): blocks by index, tool
    inputs from their JSON deltas (a string when they do not parse: the loop refuses it), usage as last reported.
    A field's deltas are joined once, at the block's end (a copy per delta was quadratic in their number)."""
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    pieces: dict[int, dict[str, list[str]]] = {}  # index -> field -> its text so far, delta by delta

    def join(index: int) -> None:
        for name, parts in pieces.pop(index, {}).items():
            blocks[index][name] = "".join(parts)

    for event in events:
        kind, index = event.get("type"), event.get("index", 0)
        if kind == "error":
            error = event.get("error") or {}
            name = str(error.get("type") or "error")
            raise StatusError(STREAM_ERRORS.get(name, 500), name, str(error.get("message") or ""))
        if kind == "message_start":
            message = dict(event["message"])
        elif kind == "content_block_start":
            blocks[index] = dict(event["content_block"])
            pieces.pop(index, None)
        elif kind == "content_block_delta":
            block, delta = blocks[index], event["delta"]
            field = APPENDED.get(delta.get("type"))
            if field:
                if not isinstance(delta[field], str):
                    raise ValueError(f"a {delta['type']} that is not text: {str(delta[field])[:80]}")
                pieces.setdefault(index, {}).setdefault(field, [block.get(field, "")]).append(delta[field])
                if field == "text" and delta[field]:
                    on_text(delta[field])
            elif delta.get("type") == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta.get("type") == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
        elif kind == "content_block_stop" and index in blocks:
            join(index)
            if "partial_json" in blocks[index]:
                raw = blocks[index].pop("partial_json")
                try:
                    blocks[index]["input"] = json.loads(raw) if raw else {}
                except (ValueError, RecursionError):  # the model's own bytes: nested too deep is refused too
                    blocks[index]["input"] = raw
        elif kind == "message_delta":
            message.update(event.get("delta") or {})
            message["usage"] = {**(message.get("usage") or {}), **(event.get("usage") or {})}
        elif kind == "message_stop":
            for index in list(pieces):
                join(index)
            return {**message, "content": [blocks[i] for i in sorted(blocks)]}
    raise Truncated("the response stream ended before message_stop")
