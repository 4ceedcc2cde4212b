"""A local Bedrock Runtime stand-in: ``POST /model/{modelId}/invoke``, ``.../invoke-with-response-stream`` (and
the direct API's ``/v1/messages``).

It answers like Bedrock does: a Messages API response body on success; on errors the ``x-amzn-ErrorType``
header and a ``{"message": ...}`` body (400 ValidationException, 429 ThrottlingException, 503
ServiceUnavailableException). It checks what Bedrock checks and we care about: a JSON content type, a body that
carries ``anthropic_version: bedrock-2023-05-31`` and not ``model`` or ``stream``, an ``Authorization`` header;
and it refuses a request over the documented limits (:func:`over_the_limits`) with a 400 ValidationException.
The direct API's path checks its own headers and answers its error shape (:func:`direct_api_refusal`).

Behaviour is scripted: ``stub.responder`` is a function ``(model_id, body) -> (status, headers, json)``; helpers
build replies. Every request is recorded in ``stub.requests``. A streamed request gets the same reply as Messages
API stream events (message_start, content_block_start/delta/stop, message_delta, message_stop): from Bedrock each
in an AWS event-stream frame as InvokeModelWithResponseStream sends it (``bedrock_stream``), from the direct API
as server-sent events; ``stub.delta_chars`` cuts the text deltas, ``stub.delta_delay_s`` paces them (a bench's
token rate; tests leave it 0), ``stub.cut_after`` drops the connection after that many frames and
``stub.stream_exception`` then sends that ResponseStream exception instead.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

BEDROCK_VERSION = "bedrock-2023-05-31"
# What the client tests send: a model id as Bedrock names it, a system prompt, one user turn.
MODEL = "jp.anthropic.claude-sonnet-4-5-20250929-v1:0"
SYSTEM = [{"type": "text", "text": "You are a test."}]
HELLO = [{"role": "user", "content": [{"type": "text", "text": "こんにちは"}]}]
Reply = tuple[int, dict[str, str], dict[str, Any]]


@dataclass
class Recorded:
    path: str
    model_id: str
    headers: dict[str, str]
    body: dict[str, Any]
    size: int = 0  # the body's bytes


# The limits, as documented (the smaller figure where Bedrock's and Anthropic's differ; stricter when unsure):
# - "The maximum size of the payload you can send in a request is 20MB" (Bedrock, Claude Messages request and
#   response: docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-request-
#   response.html). Over the API's own 25,000,000 bytes Bedrock answers its constraint message; between the two
#   it answers "Input is too long for requested model." (as reported, openai/codex#46247) -- refused here at 20 MB.
# - Images (docs.anthropic.com/en/docs/build-with-claude/vision; Bedrock's Message reference says 3.75 MB, 8000 px
#   and 20 images): 5 MB of base64 each, 8000 px a side, 2000 px a side once a request has more than 20, at most
#   100; one that does not decode whole, "Could not process image". The messages are the API's, which Bedrock
#   passes on (e.g. anthropics/claude-code#5147, aws-sdk-js-v3#6785).
# - PDFs: 100 pages a request ("A maximum of 100 PDF pages may be provided.", the PDF support guide); a PDF that
#   cannot be parsed is refused.
BODY_LIMIT = 20_000_000
API_BODY_LIMIT = 25_000_000
IMAGE_BASE64_LIMIT = 5 * 1024 * 1024
IMAGE_SIDE, MANY_IMAGES, MANY_IMAGE_SIDE, MAX_IMAGES = 8000, 20, 2000, 100
PDF_PAGES = 100


def over_the_limits(size: int, body: dict[str, Any]) -> str | None:
    """Why Bedrock would refuse this request for its size or its media; None when it would not."""
    from PIL import Image
    from pypdf import PdfReader

    if size > API_BODY_LIMIT:
        return ("1 validation error detected: Value at 'body' failed to satisfy constraint: Member must have length "
                f"less than or equal to {API_BODY_LIMIT}")
    if size > BODY_LIMIT:
        return "Input is too long for requested model."
    images: list[tuple[str, int, int]] = []
    pages = 0
    for m, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        for c, block in enumerate(content if isinstance(content, list) else []):
            source = block.get("source") if isinstance(block, dict) else None
            if not isinstance(source, dict) or source.get("type") != "base64":
                continue
            where, data = f"messages.{m}.content.{c}", str(source.get("data") or "")
            if block.get("type") == "image":
                if len(data) > IMAGE_BASE64_LIMIT:
                    return (f"{where}.image.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > "
                            f"{IMAGE_BASE64_LIMIT} bytes")
                try:
                    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
                        image.load()  # a whole header over a broken body is refused too
                        kind, (width, height) = str(image.format).lower(), image.size
                except Exception:
                    return f"{where}.image.source.base64.data: Could not process image"
                if f"image/{kind}" != source.get("media_type"):
                    return (f"{where}.image.source.base64.data: Image does not match the provided media type "
                            f"{source.get('media_type')}")
                if max(width, height) > IMAGE_SIDE:
                    return (f"{where}.image.source.base64.data: At least one of the image dimensions exceed max "
                            f"allowed size: {IMAGE_SIDE} pixels")
                images.append((where, width, height))
            elif block.get("type") == "document":
                try:
                    pages += len(PdfReader(io.BytesIO(base64.b64decode(data))).pages)
                except Exception:
                    return f"{where}.document.source.base64.data: The PDF specified was not valid."
    if pages > PDF_PAGES:
        return f"A maximum of {PDF_PAGES} PDF pages may be provided."
    if pages + len(images) > MAX_IMAGES:  # pages and images count together
        return f"Too much media: {pages} document pages + {len(images)} images > {MAX_IMAGES}"
    if len(images) > MANY_IMAGES and any(max(w, h) > MANY_IMAGE_SIDE for _, w, h in images):
        return ("At least one of the image dimensions exceed max allowed size for many-image requests: "
                f"{MANY_IMAGE_SIDE} pixels")
    return None


def message(content: list[dict[str, Any]], stop_reason: str = "end_turn", usage: dict[str, int] | None = None
            ) -> Reply:
    usage = usage or {"input_tokens": 1200, "output_tokens": 80, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}
    body = {"id": "msg_bdrk_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
            "content": content, "stop_reason": stop_reason, "stop_sequence": None, "usage": usage}
    return 200, {"x-amzn-bedrock-input-token-count": str(usage["input_tokens"])}, body


def text(answer: str, **kwargs: Any) -> Reply:
    return message([{"type": "text", "text": answer}], **kwargs)


def tool_use(name: str, arguments: dict[str, Any], tool_id: str = "toolu_bdrk_01") -> Reply:
    return message([{"type": "text", "text": "調べます。"},
                    {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}], stop_reason="tool_use")


def error(status: int, kind: str, text: str, headers: dict[str, str] | None = None) -> Reply:
    return status, {"x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/",
                    **(headers or {})}, {"message": text}


def throttled(retry_after: str | None = None) -> Reply:
    return error(429, "ThrottlingException", "Too many requests, please wait before trying again.",
                 {"retry-after": retry_after} if retry_after else None)


# -- streaming: InvokeModelWithResponseStream ---------------------------------------------------------------------
# https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html: the body
# is an AWS event stream (https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html, "event stream
# encoding"): each message is a prelude (total length, headers length, both big-endian u32, and their CRC32), the
# headers (name length u8, name, type 7 = string, value length u16, value), the payload and a CRC32 of all before.
# A ``chunk`` event's payload is ``{"bytes": base64(one Messages API stream event as JSON)}``; an error mid-stream is
# an ``exception`` message named by ``:exception-type``, one of the ResponseStream members
# (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ResponseStream.html) with ``{"message"}``.
STREAM_EXCEPTIONS = frozenset({"internalServerException", "modelStreamErrorException", "modelTimeoutException",
                               "serviceUnavailableException", "throttlingException", "validationException"})


def event_frame(payload: bytes, event_type: str = "chunk", message_type: str = "event") -> bytes:
    def header(name: str, value: str) -> bytes:
        raw_name, raw_value = name.encode(), value.encode()
        return bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value

    kind = ":event-type" if message_type == "event" else ":exception-type"
    headers = header(kind, event_type) + header(":content-type", "application/json") + header(
        ":message-type", message_type)
    prelude = struct.pack(">II", 12 + len(headers) + len(payload) + 4, len(headers))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + headers + payload
    return message + struct.pack(">I", binascii.crc32(message))


def exception_frame(exception_type: str, text: str) -> bytes:
    assert exception_type in STREAM_EXCEPTIONS, exception_type
    return event_frame(json.dumps({"message": text}).encode(), exception_type, "exception")


def stream_events(body: dict[str, Any], delta_chars: int) -> list[dict[str, Any]]:
    """A Messages API response as the stream events that make it up."""
    usage = body.get("usage") or {}
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(body.get("content") or []):
        if block.get("type") == "text":
            events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text",
                                                                                              "text": ""}})
            text = block.get("text", "")
            step = delta_chars or max(1, len(text))
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": text[i:i + step]}} for i in range(0, len(text), step)]
        else:
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {**block, "input": {}}})
            events.append({"type": "content_block_delta", "index": index, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}))}})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": body.get("stop_reason"),
                                                      "stop_sequence": None},
                   "usage": {"output_tokens": usage.get("output_tokens", 0)}})
    events.append({"type": "message_stop"})
    return events


def bedrock_stream(body: dict[str, Any], delta_chars: int = 0) -> list[bytes]:
    return [event_frame(json.dumps({"bytes": base64.b64encode(json.dumps(event).encode()).decode()}).encode())
            for event in stream_events(body, delta_chars)]


# -- the direct API (https://docs.anthropic.com/en/api/messages, /versioning, /errors, /messages-streaming) --------
def sse_stream(body: dict[str, Any], delta_chars: int = 0) -> list[bytes]:
    """The same events as server-sent events: ``event: <type>`` and ``data: <json>``, a blank line after each."""
    return [f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
            for event in stream_events(body, delta_chars)]


def direct_api_refusal(headers: dict[str, str], body: dict[str, Any]) -> Reply | None:
    """What the API refuses before the model: no ``x-api-key`` (401), no ``anthropic-version`` header or no
    ``model`` (400), in its error shape ``{"type": "error", "error": {"type", "message"}}``."""
    def refusal(status: int, kind: str, text: str) -> Reply:
        return status, {}, {"type": "error", "error": {"type": kind, "message": text}}

    if not headers.get("x-api-key"):
        return refusal(401, "authentication_error", "x-api-key header is required")
    if not headers.get("anthropic-version"):
        return refusal(400, "invalid_request_error", "anthropic-version: header is required")
    if not body.get("model") or "anthropic_version" in body:
        return refusal(400, "invalid_request_error", "model: Field required" if not body.get("model")
                       else "anthropic_version: Extra inputs are not permitted")
    return None


def signed_as_sent(secrets: dict[str, str], url: str, headers: dict[str, str], body: bytes) -> bool:
    """Whether a SigV4 ``Authorization`` signs this request as it arrived (the signed headers, the path, the body),
    recomputed with botocore's signer for an access key whose secret the stub knows; other requests pass. SigV4:
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html; a signature that
    does not match is refused (403 InvalidSignatureException, as AWS's JSON services answer)."""
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return True
    fields = dict(part.strip().split("=", 1) for part in auth.removeprefix("AWS4-HMAC-SHA256 ").split(","))
    access_key, _, region, service, _ = fields["Credential"].split("/")
    if access_key not in secrets:
        return True
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    names = [name for name in fields["SignedHeaders"].split(";") if name != "host"]  # host: from the URL
    request = AWSRequest("POST", url, data=body, headers={name: headers.get(name, "") for name in names})
    request.context["timestamp"] = headers.get("x-amz-date", "")
    signer = SigV4Auth(Credentials(access_key, secrets[access_key], headers.get("x-amz-security-token")), service,
                       region)
    return signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request) == \
        fields["Signature"]


class BedrockStub:
    def __init__(self) -> None:
        self.delta_chars = 0  # 0: one text delta per block
        self.delta_delay_s = 0.0
        self.cut_after: int | None = None  # the next stream drops its connection after this many frames
        self.stream_exception: tuple[str, str] | None = None  # (type, message) sent after cut_after frames instead
        self.first_text_at: list[float] = []  # per streamed request: when its first text delta was sent
        self.requests: list[Recorded] = []
        self.aws_secrets: dict[str, str] = {}  # access key -> secret: their SigV4 signatures are checked
        self.responder: Callable[[str, dict[str, Any]], Reply] = lambda model_id, body: text("ok")
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._send(*error(400, "ValidationException", "Malformed input request"))
                path = self.path.split("?")[0]
                headers = {k.lower(): v for k, v in self.headers.items()}
                if path == "/v1/messages":  # the direct Anthropic API
                    stub.requests.append(Recorded(path, body.get("model", ""), headers, body, len(raw)))
                    refused_here = direct_api_refusal(headers, body)
                    if refused_here:
                        return self._send(*refused_here)
                    status, reply_headers, reply = stub.responder(body.get("model", ""), body)
                    if body.get("stream") and status == 200:
                        return self._stream(reply, sse=True)
                    return self._send(status, reply_headers, reply)
                parts = path.split("/")
                if len(parts) != 4 or parts[1] != "model" or parts[3] not in ("invoke",
                                                                              "invoke-with-response-stream"):
                    return self._send(*error(404, "UnknownOperationException", f"no route for {path}"))
                model_id = unquote(parts[2])
                stub.requests.append(Recorded(path, model_id, headers, body, len(raw)))
                if body.get("anthropic_version") != BEDROCK_VERSION:
                    return self._send(*error(400, "ValidationException",
                                             f"invalid anthropic_version {body.get('anthropic_version')!r}"))
                for key in ("model", "stream"):
                    if key in body:
                        return self._send(*error(400, "ValidationException", f"extraneous key [{key}] is not "
                                                                             "permitted"))
                if not headers.get("authorization"):
                    return self._send(*error(403, "AccessDeniedException", "Missing Authentication Token"))
                if not signed_as_sent(stub.aws_secrets, f"http://{self.headers['host']}{self.path}", headers, raw):
                    return self._send(*error(403, "InvalidSignatureException", "The request signature we calculated "
                                             "does not match the signature you provided."))
                if headers.get("content-type") != "application/json":  # "You must specify application/json."
                    return self._send(*error(400, "ValidationException", "the content type must be application/json"))
                refused = over_the_limits(len(raw), body)
                if refused:
                    return self._send(*error(400, "ValidationException", refused))
                status, reply_headers, reply = stub.responder(model_id, body)
                if parts[3] == "invoke-with-response-stream" and status == 200:
                    return self._stream(reply)
                return self._send(status, reply_headers, reply)

            def _stream(self, reply: dict[str, Any], sse: bool = False) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream" if sse else "application/vnd.amazon.eventstream")
                if not sse:
                    self.send_header("x-amzn-bedrock-content-type", "application/json")
                self.end_headers()  # HTTP/1.0: the body ends when the connection closes
                frames = sse_stream(reply, stub.delta_chars) if sse else bedrock_stream(reply, stub.delta_chars)
                if stub.cut_after is not None:
                    frames, stub.cut_after = frames[:stub.cut_after], None
                    if stub.stream_exception:
                        frames.append(exception_frame(*stub.stream_exception))
                        stub.stream_exception = None
                first_text = 2 if reply.get("content") and reply["content"][0].get("type") == "text" else None
                for index, frame in enumerate(frames):
                    if stub.delta_delay_s:
                        time.sleep(stub.delta_delay_s)  # the bench's token rate, never a test's
                    self.wfile.write(frame)
                    self.wfile.flush()
                    if index == first_text:  # message_start, content_block_start, then the first delta
                        stub.first_text_at.append(time.monotonic())

            def _send(self, status: int, headers: dict[str, str], body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order (the last one repeats)."""
        queue = list(replies)

        def responder(model_id: str, body: dict[str, Any]) -> Reply:
            return queue.pop(0) if len(queue) > 1 else queue[0]

        self.responder = responder

    def __enter__(self) -> BedrockStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def answering_with_the_first_faq_hit(model_id: str, body: dict[str, Any]) -> Reply:
    """A model stand-in: search the FAQ first, then answer citing the first hit's URL."""
    results = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
               if b.get("type") == "tool_result"]
    if not results:
        return tool_use("faq_search", {"query": "Shopify 在庫同期 遅延"})
    first = json.loads(results[0]["content"])["items"][0]
    return text(f"連携ログを確認してください。[{first['title']}]({first['url']})",
                         usage={"input_tokens": 300, "output_tokens": 120, "cache_read_input_tokens": 2900,
                                "cache_creation_input_tokens": 1500})
