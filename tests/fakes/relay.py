"""Builders for the Events relay: signed Slack event envelopes, the relay wired to a stand-in dispatches API, and
its stdlib server on a free port."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx2

from agent.slack.relay import (
    Relay,
    RelayConfig,
    github_dispatcher,
)
from agent.slack.relay_server import make_server
from tests.fakes.clock import FakeClock

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_700_000_100
ENV = {"SLACK_SIGNING_SECRET": SECRET, "GITHUB_REPOSITORY": "acme/helpbot", "HELPBOT_DISPATCH_TOKEN": "tok-123"}


def envelope(**event_overrides: object) -> dict[str, object]:
    event: dict[str, object] = {
        "type": "reaction_added", "user": "U0REACTOR", "reaction": "help", "item_user": "U0AUTHOR",
        "item": {"type": "message", "channel": "C0123ABCD", "ts": "1700000000.123456"},
        "event_ts": "1700000100.000200"}
    event.update(event_overrides)
    return {"token": "legacy", "team_id": "T0TEAM", "api_app_id": "A0APP", "event": event,
            "type": "event_callback", "event_id": "Ev0ABCDEF", "event_time": NOW, "authorizations": []}


def signed(body: bytes, *, timestamp: int = NOW, secret: str = SECRET,
           extra: dict[str, str] | None = None) -> dict[str, str]:
    base = f"v0:{timestamp}:".encode() + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": signature,
            "Content-Type": "application/json", **(extra or {})}


class GitHub:
    """An httpx2.MockTransport standing in for the dispatches API; records what it was sent."""

    def __init__(self, status: int = 204, error: Exception | None = None, headers: dict[str, str] | None = None):
        self.requests: list[httpx2.Request] = []
        self.status = status
        self.error = error
        self.headers = headers or {}
        self.transport = httpx2.MockTransport(self.handler)

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if self.error:
            raise self.error
        if self.status == 204:
            return httpx2.Response(204)
        return httpx2.Response(self.status, headers=self.headers, json={"message": "Not Found",
                                                 "documentation_url": "https://docs.github.com/rest"})

    @property
    def payloads(self) -> list[dict[str, object]]:
        return [json.loads(r.content) for r in self.requests]


def relay_for(github: GitHub, env: dict[str, str] | None = None) -> Relay:
    config = RelayConfig.from_env({**ENV, **(env or {})})
    return Relay(config, github_dispatcher(config, transport=github.transport), clock=FakeClock(wall=NOW))


def post(relay: Relay, body: object, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, _, out = relay(headers if headers is not None else signed(raw), raw)
    return status, out


BODY = json.dumps(envelope()).encode()


@contextlib.contextmanager
def serving(github: GitHub, **limits: float) -> Iterator[str]:
    """The relay's stdlib server on a port the kernel picks (no free-port race); yields its URL. On the way out it
    waits for the request handlers too (daemon threads the server does not join), so a line one of them logs
    late is this test's, not the next one's."""
    before = set(threading.enumerate())
    server = make_server("127.0.0.1", 0, relay_for(github), **limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        for handler in set(threading.enumerate()) - before:
            handler.join(10)


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def mention_envelope(channel: str, ts: str, text: str, *, user: str = "U0TANAKA", thread_ts: str | None = None,
                     **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": channel,
                             "event_ts": ts, **extra}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return {"token": "legacy", "team_id": "T0HELPBOT", "api_app_id": "A0HELPBOT", "event": event,
            "type": "event_callback", "event_id": "Ev0MENTION1", "event_time": NOW, "authorizations": []}
