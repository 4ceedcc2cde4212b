"""The Events relay: Slack's ``reaction_added``, ``app_mention`` and button clicks in, ``repository_dispatch`` out.
Only signed requests count; each event is dispatched once per process; ``helpbot answer`` re-checks it all. The
server acks at once and dispatches on a worker (Slack's 3 s never wait on GitHub); Lambda, which freezes the
process after the answer, dispatches first, and a failure is a 502 that Slack retries."""

from __future__ import annotations

import base64
import functools
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import anyio
import httpx2
from slack_sdk.signature import Clock as SignatureClock
from slack_sdk.signature import SignatureVerifier

from agent.config import DECLARED
from agent.errors import BadInput, DispatchError, describe_error
from agent.slack import vote
from agent.slack.admission import Decision, TriggerSettings, check_ignore
from agent.slack.trigger import DISPATCH_EVENT_TYPE, TRIGGER_EVENTS, parse_event_data
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.config import ConfigError, env_str, env_url
from mcp_lib.doors import door
from mcp_lib.errors import Refused, ToolError
from mcp_lib.http import door_async_client, json_answer
from mcp_lib.retry import server_wait

MAX_BODY_BYTES = 256 * 1024  # Slack events are a few KB
DISPATCH_DEADLINE_S = 2.0  # the whole POST /dispatches: Slack wants our ack within 3 s
SEEN_EVENTS = 10_000  # accepted event ids remembered (Slack retries within minutes)
DISPATCH_ATTEMPTS = 3  # the server's worker: GitHub 5xx and timeouts are tried again
WORKER_DEADLINE_S = 10.0  # one dispatch attempt on the worker (nobody is waiting for it)
RETRY_ALREADY_DELIVERED = "http_timeout"  # the only retry reason after which the first delivery surely arrived

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
        if not repository:
            raise ConfigError("GITHUB_REPOSITORY", "not set; owner/name of the repository to dispatch to")
        if repository.count("/") != 1 or not all(repository.split("/")):
            raise ConfigError("GITHUB_REPOSITORY", f"{repository!r} is not owner/name of the repo to dispatch to")
        token = env_str(env, "HELPBOT_DISPATCH_TOKEN") or env_str(env, "GITHUB_TOKEN")
        if not token:
            raise ConfigError("HELPBOT_DISPATCH_TOKEN",
                              "not set (nor GITHUB_TOKEN); a token with contents:write on the repository")
        return cls(signing_secret=secret, api_url=env_url(env, "GITHUB_API_URL") or DECLARED["GITHUB_API_URL"].default,
                   repository=repository, token=token, settings=TriggerSettings.from_env(env))


def github_dispatcher(config: RelayConfig, *, transport: httpx2.AsyncBaseTransport | None = None,
                      deadline: float = DISPATCH_DEADLINE_S, clock: Clock = SYSTEM_CLOCK) -> Dispatch:
    """``POST /repos/{repo}/dispatches`` (204 expected), all of it within ``deadline`` s (not a timeout per phase)."""
    headers = {"Authorization": f"Bearer {config.token}", "Accept": "application/vnd.github+json",
               "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "helpbot-relay"}  # as github_client's
    url = f"/repos/{config.repository}/dispatches"

    async def post(body: dict[str, Any]) -> httpx2.Response:
        with anyio.fail_after(deadline):
            async with door_async_client(door("HELPBOT_DISPATCH_TOKEN", config.api_url, config.token),
                                         base_url=config.api_url, transport=transport, timeout=deadline,
                                         headers=headers) as client:
                return await client.post(url, json=body)

    def dispatch(client_payload: dict[str, str]) -> None:
        event_type = vote.VOTE_EVENT_TYPE if "vote" in client_payload else DISPATCH_EVENT_TYPE
        body = {"event_type": event_type, "client_payload": client_payload}
        try:
            response = anyio.run(post, body)
        except TimeoutError:
            raise DispatchError(f"GitHub did not answer within {deadline:g} s", retryable=True) from None
        except httpx2.HTTPError as exc:
            raise DispatchError(f"{type(exc).__name__}: {exc}", retryable=True) from None
        except Refused as exc:
            raise DispatchError(str(exc), retryable=False) from None
        if response.status_code != 204:
            retryable = response.status_code >= 500 or response.status_code == 429
            hint = "" if retryable else f"; HELPBOT_DISPATCH_TOKEN needs {NEEDS.format(repository=config.repository)}"
            raise DispatchError(f"GitHub answered {response.status_code}: {response.text[:200]}{hint}",
                                retryable=retryable, asked=server_wait(response.headers, clock))

    return dispatch


NEEDS = "contents: write on {repository} (what repository_dispatch needs)"


def check_dispatch_token(config: RelayConfig, transport: httpx2.BaseTransport | None = None) -> str:
    """At the start: the dispatch token may push to GITHUB_REPOSITORY, so a refused token shows now, not at the first
    :help: (nobody could be told). ConfigError when GitHub refuses it; a line when GitHub cannot be asked."""
    from mcp_lib.platforms.github.api import github_client  # the server's start only: Lambda never imports it

    repository = config.repository
    with github_client("HELPBOT_DISPATCH_TOKEN", config.api_url, config.token, "helpbot-relay", transport=transport,
                       timeout=10.0) as client:
        try:
            response = client.get(f"/repos/{repository}")
        except (httpx2.HTTPError, Refused) as exc:
            return f"could not check HELPBOT_DISPATCH_TOKEN with GitHub ({type(exc).__name__}); serving anyway"
    if response.status_code == 401:
        raise ConfigError("HELPBOT_DISPATCH_TOKEN", "GitHub rejected the token (HTTP 401): it is wrong or expired")
    if response.status_code in (403, 404):
        raise ConfigError("HELPBOT_DISPATCH_TOKEN", f"the token cannot see {repository} (HTTP {response.status_code}):"
                                                    " check GITHUB_REPOSITORY and the token's repository access")
    if response.status_code != 200:
        return f"GitHub answered {response.status_code} to the token check; serving anyway"
    try:
        answer = json_answer(response, "GitHub", "the token check", "GITHUB_API_URL")
    except ToolError as exc:
        return f"{exc}; serving anyway"
    if not isinstance(answer, dict) or not isinstance(answer.get("permissions", {}), dict):  # GET /repos/{o}/{r}
        return "GitHub answered the token check with no repository object; serving anyway"
    if "permissions" in answer and not answer["permissions"].get("push"):
        raise ConfigError("HELPBOT_DISPATCH_TOKEN", f"may not dispatch to {repository}: it needs "
                                                    f"{NEEDS.format(repository=repository)}")
    return f"HELPBOT_DISPATCH_TOKEN may dispatch to {repository}"


class Seen:
    """The event ids this process accepted: bounded (oldest forgotten first), safe across threads."""

    def __init__(self, size: int = SEEN_EVENTS):
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, event_id: str) -> bool:
        """Remember ``event_id``; False when it was already there."""
        with self._lock:
            if event_id in self._ids:
                return False
            self._ids[event_id] = None
            while len(self._ids) > self.size:
                self._ids.popitem(last=False)
            return True

    def forget(self, event_id: str) -> None:
        with self._lock:
            self._ids.pop(event_id, None)

    def __contains__(self, event_id: object) -> bool:
        with self._lock:
            return event_id in self._ids


class _Wall(SignatureClock):
    """slack-sdk's signature clock: our clock's wall."""

    def __init__(self, clock: Clock):
        self.clock = clock

    def now(self) -> float:
        return self.clock.wall()


NOT_POST: Response = (405, {"Content-Type": "text/plain", "Allow": "POST"}, b"POST Slack events here")


def reply(status: int, body: str | dict[str, Any]) -> Response:
    if isinstance(body, dict):
        return status, {"Content-Type": "application/json"}, json.dumps(body).encode()
    return status, {"Content-Type": "text/plain; charset=utf-8"}, body.encode()


def log(message: str) -> None:
    from agent import guard

    guard.err(f"helpbot relay: {message}")


class Relay:
    """The relay of one process (or Lambda container); a ``worker`` (the server's) dispatches after the answer."""

    def __init__(self, config: RelayConfig, dispatch: Dispatch | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 worker: Callable[..., Any] | None = None):
        self.config = config
        self.dispatch = dispatch or github_dispatcher(
            config, clock=clock, deadline=WORKER_DEADLINE_S if worker is not None else DISPATCH_DEADLINE_S)
        self.verifier = SignatureVerifier(config.signing_secret, clock=_Wall(clock))
        self.seen = Seen()
        self.worker = worker(self.dispatch, clock=clock) if worker is not None else None

    def __call__(self, headers: Mapping[str, str], raw_body: bytes) -> Response:
        try:
            return self._handle({str(k).lower(): str(v) for k, v in headers.items()}, raw_body)
        except Exception as exc:  # a bug must be one log line and a 500 (Slack retries), never a traceback
            log(f"internal error: {describe_error(exc)[:200]}")
            return reply(500, "internal error")

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close(timeout=WORKER_DEADLINE_S * DISPATCH_ATTEMPTS)

    def _handle(self, headers: Mapping[str, str], raw_body: bytes) -> Response:
        """One Slack request (``headers`` lower-cased) -> (status, headers, body); only a signed one counts."""
        if len(raw_body) > MAX_BODY_BYTES:
            return reply(413, "too large")
        try:
            # hmac.compare_digest raises TypeError on a non-ASCII signature; int() ValueError on a bad timestamp
            valid = self.verifier.is_valid_request(raw_body, headers)
        except (ValueError, TypeError, UnicodeError, OverflowError):
            valid = False
        if not valid:
            log("rejected a request with a missing, invalid or stale Slack signature")
            return reply(401, "invalid signature")
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type == "application/x-www-form-urlencoded":  # an interaction (``payload=``); events are JSON
            return self._interaction(raw_body)
        try:
            envelope = json.loads(raw_body)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            return reply(400, "body is not JSON")
        if not isinstance(envelope, dict):
            return reply(400, "body is not a JSON object")
        if envelope.get("type") == "url_verification":
            return reply(200, {"challenge": str(envelope.get("challenge", ""))})
        retry = headers.get("x-slack-retry-num")
        event_id = envelope.get("event_id") if isinstance(envelope.get("event_id"), str) else None
        if event_id and event_id in self.seen:
            log(f"ignored {'Slack retry ' + retry if retry else 'a replay'} of {event_id} (already accepted)")
            return reply(200, "ignored: retry" if retry else "ignored: duplicate")
        if retry and headers.get("x-slack-retry-reason") == RETRY_ALREADY_DELIVERED:
            log(f"ignored Slack retry {retry} ({RETRY_ALREADY_DELIVERED}: the first delivery arrived)")
            return reply(200, "ignored: retry")
        event = envelope.get("event")
        if (envelope.get("type") != "event_callback" or not isinstance(event, dict)
                or event.get("type") not in TRIGGER_EVENTS):
            return reply(200, "ignored: not a reaction_added or app_mention event")
        try:
            trigger = parse_event_data(envelope)
            ignore = check_ignore(trigger, self.config.settings)
        except BadInput as exc:
            ignore = Decision("ignore", str(exc))
        if ignore:
            log(f"ignored: {ignore.reason}")
            return reply(200, f"ignored: {ignore.reason}")
        fields = {"channel": trigger.channel, "ts": trigger.ts, "thread_ts": trigger.thread_ts, "user": trigger.user,
                  "reaction": trigger.reaction, "item_user": trigger.item_user, "event_id": trigger.event_id,
                  "mention": "true" if trigger.mention else None}
        by = f"{'mention' if trigger.mention else 'reaction'} by {trigger.user}"
        return self._dispatch_once({k: v for k, v in fields.items() if v}, trigger.event_id,
                                   f"{trigger.channel}/{trigger.ts}", by, "ok")

    def _interaction(self, raw_body: bytes) -> Response:
        """A signed interaction -> a ``slack-vote`` dispatched once per click, acked with an empty 200."""
        found = vote.click_vote(raw_body, self.config.settings)
        if isinstance(found, str):
            log(f"ignored an interaction: {found}")
            return reply(200, "")
        click, action_ts = found
        return self._dispatch_once(asdict(click), f"vote-{click.user}-{action_ts}",
                                   f"the vote on {click.channel}/{click.ts}", f"by {click.user}", "")

    def _dispatch_once(self, payload: dict[str, str], key: str | None, what: str, by: str, ok: str) -> Response:
        """Dispatch ``payload`` once per ``key``: now, or after the answer (the worker); a key whose dispatch was not
        accepted is forgotten, so Slack's retry (or the next click) may dispatch it."""
        if key and not self.seen.add(key):  # a concurrent copy won the race
            return reply(200, "ignored: duplicate" if ok else "")
        if self.worker is not None:
            if self.worker.submit(payload):
                return reply(200, ok)
            failed = reply(503, "busy")  # Slack retries later
        else:
            try:
                self.dispatch(payload)
            except DispatchError as exc:
                log(f"dispatch failed for {what}: {exc}")
                failed = reply(502, "dispatch failed")
            else:
                log(f"dispatched {what} ({by})")
                return reply(200, ok)
        if key:
            self.seen.forget(key)
        return failed


@functools.cache  # one relay a Lambda container: its seen event ids outlive a request
def _lambda_relay() -> Relay:
    return Relay(RelayConfig.from_env(os.environ))


def lambda_handler(event: Mapping[str, Any], context: Any = None, *, relay: Relay | None = None) -> dict[str, Any]:
    """AWS Lambda entry point (function URL / API Gateway v2): ``agent.slack.relay.lambda_handler``."""
    from agent import guard

    with guard.logging_installed(os.environ):  # the runtime's own root handler would print libraries' records
        relay = relay or _lambda_relay()
        method = ((event.get("requestContext") or {}).get("http") or {}).get("method", "POST")
        raw = event.get("body") or ""
        try:
            body = base64.b64decode(raw, validate=True) if event.get("isBase64Encoded") else str(raw).encode()
        except ValueError:  # binascii.Error is one
            body = None
        status, headers, out = (NOT_POST if method != "POST" else reply(400, "body is not base64") if body is None
                                else relay(event.get("headers") or {}, body))
    return {"statusCode": status, "headers": headers, "body": out.decode("utf-8"), "isBase64Encoded": False}
