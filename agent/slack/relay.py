"""The Events relay: Slack's ``reaction_added`` and ``app_mention`` in, GitHub ``repository_dispatch`` out (for teams
without Zapier).

One pure core, :func:`handle`, is shared by ``helpbot relay`` (a small stdlib HTTP server, :func:`serve`) and
:func:`lambda_handler` (AWS Lambda function URL or API Gateway HTTP API, payload format 2.0).

Decisions worth knowing:

- Every request must carry a valid Slack signature (``slack_sdk.signature.SignatureVerifier``, which also
  rejects timestamps more than 5 minutes off): otherwise 401 and nothing is dispatched. That includes
  ``url_verification``, whose challenge is echoed only once the signature checks out.
- The dispatch happens *before* the response, within an overall deadline of 2 s (connect, send and read
  together: httpx's own timeouts apply per phase and could add up past Slack's 3 s) and no retries. A
  background thread would ack sooner, but Lambda freezes the process as soon as the handler returns, so the
  thread might never run; one code path for both hosts is worth the wait. ``POST /dispatches`` usually takes
  well under a second.
- Slack retries (``X-Slack-Retry-Num``) are dispatched like first deliveries, except ``X-Slack-Retry-Reason:
  http_timeout``: only then did the first delivery certainly arrive (and get dispatched; our ack was just
  late). After ``connection_failed``, ``ssl_error``, ``too_many_redirects``, ``unknown_error`` or our own error
  status (``http_error``) it may never have been dispatched. A duplicate run is harmless: the workflow's
  concurrency group per message and the "already answered" check stop it.
- Nothing a client sends can crash it: bodies are bounded (``MAX_BODY_BYTES``), the Content-Length must be a
  plain number, the local server drops a connection that stalls (``SOCKET_TIMEOUT_S``), and whatever the signed
  JSON holds is checked before use.
- Other reactions, reactions on non-messages, bot users (``HELPBOT_BOT_USER_ID``, and messages that user
  wrote, mentions included: helpbot's answers may quote one) and channels outside ``HELPBOT_CHANNELS`` are
  acknowledged with 200 and ignored, so an Actions run is never spent on them.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
from slack_sdk.signature import Clock, SignatureVerifier

from agent.errors import BadInput, DispatchError
from agent.slack.trigger import DISPATCH_EVENT_TYPE, EVENT_TYPES, TriggerSettings, check_ignore, parse_event_data
from mcp_lib.config import ConfigError, env_str, env_url

MAX_BODY_BYTES = 256 * 1024  # Slack events are a few KB
DISPATCH_DEADLINE_S = 2.0  # the whole POST /dispatches: Slack wants our ack within 3 s
SOCKET_TIMEOUT_S = 10.0  # helpbot relay: a client that stops sending is dropped
RETRY_ALREADY_DELIVERED = "http_timeout"  # the only retry reason after which the first delivery surely arrived
DEFAULT_GITHUB_API_URL = "https://api.github.com"

Response = tuple[int, dict[str, str], bytes]
Dispatch = Callable[[dict[str, str]], None]


@dataclass(frozen=True)
class RelayConfig:
    """Everything the relay needs, from the environment; missing pieces are ConfigError (one line, exit 2)."""

    signing_secret: str
    api_url: str
    repository: str
    token: str
    settings: TriggerSettings

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RelayConfig:
        secret = env_str(env, "SLACK_SIGNING_SECRET")
        if not secret:
            raise ConfigError("SLACK_SIGNING_SECRET", "not set; copy it from the Slack app's Basic Information")
        repository = env_str(env, "GITHUB_REPOSITORY")
        if not repository or repository.count("/") != 1 or not all(repository.split("/")):
            raise ConfigError("GITHUB_REPOSITORY", f"{repository!r} is not owner/name of the repo to dispatch to")
        token = env_str(env, "HELPBOT_DISPATCH_TOKEN") or env_str(env, "GITHUB_TOKEN")
        if not token:
            raise ConfigError("HELPBOT_DISPATCH_TOKEN",
                              "not set (nor GITHUB_TOKEN); a token with contents:write on the repository")
        api_url = env_url(env, "GITHUB_API_URL", DEFAULT_GITHUB_API_URL)
        assert api_url is not None
        return cls(signing_secret=secret, api_url=api_url, repository=repository, token=token,
                   settings=TriggerSettings.from_env(env))


def github_dispatcher(config: RelayConfig, *, transport: httpx.AsyncBaseTransport | None = None,
                      deadline: float = DISPATCH_DEADLINE_S) -> Dispatch:
    """``POST {GITHUB_API_URL}/repos/{repo}/dispatches`` with ``event_type: slack-help`` (204 expected), all of it
    within ``deadline`` seconds (a cancel scope around the whole request, not a timeout per phase)."""
    headers = {"Authorization": f"Bearer {config.token}", "Accept": "application/vnd.github+json",
               "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "helpbot-relay"}
    url = f"/repos/{config.repository}/dispatches"

    async def post(body: dict[str, Any]) -> httpx.Response:
        with anyio.fail_after(deadline):
            async with httpx.AsyncClient(base_url=config.api_url, transport=transport, timeout=deadline,
                                         headers=headers) as client:
                return await client.post(url, json=body)

    def dispatch(client_payload: dict[str, str]) -> None:
        body = {"event_type": DISPATCH_EVENT_TYPE, "client_payload": client_payload}
        try:
            response = anyio.run(post, body)
        except TimeoutError:
            raise DispatchError(f"GitHub did not answer within {deadline:g} s") from None
        except httpx.HTTPError as exc:
            raise DispatchError(f"{type(exc).__name__}: {exc}") from None
        if response.status_code != 204:
            raise DispatchError(f"GitHub answered {response.status_code}: {response.text[:200]}")

    return dispatch


class _InjectedClock(Clock):
    def __init__(self, now: Callable[[], float]):
        self._now = now

    def now(self) -> float:
        return self._now()


def _reply(status: int, body: str | dict[str, Any]) -> Response:
    if isinstance(body, dict):
        return status, {"Content-Type": "application/json"}, json.dumps(body).encode()
    return status, {"Content-Type": "text/plain; charset=utf-8"}, body.encode()


def _log(message: str) -> None:
    from agent import guard

    guard.err(f"helpbot relay: {message}")


def handle(headers: Mapping[str, str], raw_body: bytes, *, signing_secret: str, dispatch: Dispatch,
           now: Callable[[], float] = time.time, settings: TriggerSettings | None = None) -> Response:
    """One Slack Events API request -> (status, headers, body). Dispatches at most once, only when signed."""
    settings = settings or TriggerSettings()
    if len(raw_body) > MAX_BODY_BYTES:
        return _reply(413, "too large")
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    verifier = SignatureVerifier(signing_secret, clock=_InjectedClock(now))
    try:
        # hmac.compare_digest raises TypeError on a non-ASCII signature; int() ValueError on a bad timestamp
        valid = verifier.is_valid_request(raw_body, lower)
    except (ValueError, TypeError, UnicodeError, OverflowError):
        valid = False
    if not valid:
        _log("rejected a request with a missing, invalid or stale Slack signature")
        return _reply(401, "invalid signature")
    try:
        envelope = json.loads(raw_body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _reply(400, "body is not JSON")
    if not isinstance(envelope, dict):
        return _reply(400, "body is not a JSON object")
    if envelope.get("type") == "url_verification":
        return _reply(200, {"challenge": str(envelope.get("challenge", ""))})
    retry = lower.get("x-slack-retry-num")
    if retry and lower.get("x-slack-retry-reason") == RETRY_ALREADY_DELIVERED:
        _log(f"ignored Slack retry {retry} ({RETRY_ALREADY_DELIVERED}: the first delivery was dispatched)")
        return _reply(200, "ignored: retry")
    event = envelope.get("event")
    if envelope.get("type") != "event_callback" or not isinstance(event, dict) or event.get("type") not in EVENT_TYPES:
        return _reply(200, "ignored: not a reaction_added or app_mention event")
    try:
        trigger = parse_event_data(envelope)
    except BadInput as exc:
        _log(f"ignored: {exc}")
        return _reply(200, f"ignored: {exc}")
    ignore = check_ignore(trigger, settings)
    if ignore:
        _log(f"ignored: {ignore.reason}")
        return _reply(200, f"ignored: {ignore.reason}")
    fields = {"channel": trigger.channel, "ts": trigger.ts, "thread_ts": trigger.thread_ts, "user": trigger.user,
              "reaction": trigger.reaction, "item_user": trigger.item_user, "event_id": trigger.event_id,
              "mention": "true" if trigger.mention else None}
    payload = {k: v for k, v in fields.items() if v}
    try:
        dispatch(payload)
    except DispatchError as exc:
        _log(f"dispatch failed for {trigger.channel}/{trigger.ts}: {exc}")
        return _reply(502, "dispatch failed")
    _log(f"dispatched {trigger.channel}/{trigger.ts} ({'mention' if trigger.mention else 'reaction'} by "
         f"{trigger.user})")
    return _reply(200, "ok")


# -- hosts --------------------------------------------------------------------------------------------------------
class Relay:
    """Configuration plus dispatcher, built once per process (or Lambda container)."""

    def __init__(self, config: RelayConfig, dispatch: Dispatch | None = None,
                 now: Callable[[], float] = time.time):
        self.config = config
        self.dispatch = dispatch or github_dispatcher(config)
        self.now = now

    def __call__(self, headers: Mapping[str, str], raw_body: bytes) -> Response:
        try:
            return handle(headers, raw_body, signing_secret=self.config.signing_secret, dispatch=self.dispatch,
                          now=self.now, settings=self.config.settings)
        except Exception as exc:  # a bug must be one log line and a 500 (Slack retries), never a traceback
            _log(f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
            return _reply(500, "internal error")


def make_server(host: str, port: int, relay: Relay, *, timeout: float = SOCKET_TIMEOUT_S) -> ThreadingHTTPServer:
    """A stdlib HTTP server answering POSTs (any path) with the relay; port 0 picks a free port. A client that
    sends nothing for ``timeout`` seconds is dropped."""

    socket_timeout = timeout

    class Handler(BaseHTTPRequestHandler):
        server_version = "helpbot-relay"
        timeout = socket_timeout  # StreamRequestHandler puts it on the socket

        def do_POST(self) -> None:
            raw_length = self.headers.get("Content-Length")
            if raw_length is None:
                self._send(_reply(411, "Content-Length required"))
                return
            if not raw_length.isascii() or not raw_length.isdigit():  # -1, +5, 1e3: never rfile.read(-1)
                self._send(_reply(400, "bad Content-Length"))
                return
            length = int(raw_length)
            if length > MAX_BODY_BYTES:
                self._send(_reply(413, "too large"))
                return
            body = self.rfile.read(length)
            if len(body) < length:  # the client closed early
                self._send(_reply(400, "incomplete body"))
                return
            self._send(relay(dict(self.headers.items()), body))

        def do_GET(self) -> None:
            self._send((405, {"Content-Type": "text/plain", "Allow": "POST"}, b"POST Slack events here"))

        def _send(self, response: Response) -> None:
            status, headers, body = response
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            _log(format % args)

    return ThreadingHTTPServer((host, port), Handler)


def serve(host: str = "127.0.0.1", port: int = 3000, *, env: Mapping[str, str] | None = None) -> None:
    """``helpbot relay``: serve until interrupted."""
    relay = Relay(RelayConfig.from_env(os.environ if env is None else env))
    server = make_server(host, port, relay)
    _log(f"listening on http://{host}:{server.server_address[1]}/ (dispatching to {relay.config.repository})")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


_LAMBDA_RELAY: Relay | None = None


def lambda_handler(event: Mapping[str, Any], context: Any = None, *, relay: Relay | None = None) -> dict[str, Any]:
    """AWS Lambda entry point (function URL / API Gateway v2): ``agent.slack.relay.lambda_handler``."""
    global _LAMBDA_RELAY
    if relay is None:
        if _LAMBDA_RELAY is None:
            _LAMBDA_RELAY = Relay(RelayConfig.from_env(os.environ))
        relay = _LAMBDA_RELAY
    method = ((event.get("requestContext") or {}).get("http") or {}).get("method", "POST")
    if method != "POST":
        return {"statusCode": 405, "headers": {"Allow": "POST"}, "body": "POST Slack events here"}
    raw = event.get("body") or ""
    try:
        body = base64.b64decode(raw, validate=True) if event.get("isBase64Encoded") else str(raw).encode()
    except (binascii.Error, ValueError):
        return {"statusCode": 400, "headers": {"Content-Type": "text/plain"}, "body": "body is not base64"}
    if len(body) > MAX_BODY_BYTES:
        return {"statusCode": 413, "headers": {"Content-Type": "text/plain"}, "body": "too large"}
    status, headers, out = relay(event.get("headers") or {}, body)
    return {"statusCode": status, "headers": headers, "body": out.decode("utf-8"), "isBase64Encoded": False}


# -- CLI wiring -----------------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``helpbot relay [--host] [--port]``; needs SLACK_SIGNING_SECRET, GITHUB_REPOSITORY and
    HELPBOT_DISPATCH_TOKEN (or GITHUB_TOKEN)."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=3000, help="port to listen on (default 3000; 0 = any)")


def run_relay_command(args: argparse.Namespace) -> int:
    """0 when stopped; bad configuration and an address it cannot listen on are exit 2 (:mod:`agent.errors`)."""
    try:
        serve(args.host, args.port)
    except OSError as exc:
        raise BadInput(f"helpbot relay: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    return 0
