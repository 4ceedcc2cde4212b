"""Slack's Web API as the slack tools use it: configuration, the bot and user clients with their retry handler
(:mod:`mcp_lib.retry`'s strategies in slack-sdk's loop), and one call with its errors explained."""

from __future__ import annotations

import io
import itertools
import math
import re
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import partial
from http.client import HTTPException
from json import JSONDecodeError
from typing import Any, Literal, NamedTuple
from urllib.error import HTTPError, URLError
from urllib.request import HTTPSHandler, ProxyHandler, Request, build_opener
from zoneinfo import ZoneInfo

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web import SlackResponse

from ... import ids
from ...clock import Clock
from ...config import DECLARED, ConfigError, env_str, env_timezone, env_url
from ...core import CredentialsError, ToolContext, ToolError
from ...doors import Door, slack_door
from ...errors import ChannelNotFound, RateLimited, Retryable
from ...http import read_capped
from ...retry import Budget, Policy, header, next_wait, server_wait, tool_budget
from ...slack_scopes import token_scopes

DEFAULT_API_URL = DECLARED["SLACK_API_URL"].default
DEFAULT_TIMEZONE = DECLARED["HELPBOT_TIMEZONE"].default

_TOKEN = re.compile(r"(?:xoxe\.)?(xox[a-z]-)[A-Za-z0-9-]+")  # xoxb-: a bot's, xoxp-: a person's


# -- configuration ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlackConfig:
    api_url: str
    bot_token: str | None = field(default=None, repr=False)
    user_token: str | None = field(default=None, repr=False)
    timezone: str = DEFAULT_TIMEZONE
    timeout_s: int = 20
    max_retries: int = 2

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


_WRONG_KIND = {
    "xoxp-": "holds a user token (xoxp-); put it in SLACK_USER_TOKEN and give SLACK_BOT_TOKEN the bot token (xoxb-)",
    "xoxb-": "holds a bot token (xoxb-); search.messages needs a user token (xoxp-, scope search:read)",
}


def _token(env: Mapping[str, str], kind: Literal["bot", "user"]) -> str | None:
    """The bot's or the user's token, refused before the first call if it cannot work (naming its variable only)."""
    variable, prefix = ("SLACK_BOT_TOKEN", "xoxb-") if kind == "bot" else ("SLACK_USER_TOKEN", "xoxp-")
    value = env_str(env, variable)
    found = _TOKEN.fullmatch(value or "")
    if value is None or (found and found[1] == prefix):
        return value
    if found:
        raise ConfigError(variable, _WRONG_KIND.get(found[1], f"is a Slack token of the wrong kind; expected a "
                                                               f"{kind} token ({prefix}...)"))
    raise ConfigError(variable, f"does not look like a Slack {kind} token (expected {prefix}...; check for "
                                "quotes or spaces)")


def load_config(env: Mapping[str, str]) -> SlackConfig | None:
    """Enabled when a bot or a user token is set; a malformed token, URL or time zone is a ConfigError."""
    bot, user = _token(env, "bot"), _token(env, "user")
    if bot is None and user is None:
        return None
    return SlackConfig(api_url=f"{env_url(env, 'SLACK_API_URL', DEFAULT_API_URL)}/", bot_token=bot, user_token=user,
                       timezone=env_timezone(env, "HELPBOT_TIMEZONE"))


# -- retries: slack-sdk runs the loop and builds its handlers once per client, so the budget of the tool call in
# progress (its deadline and clock) reaches them through a context variable, set by ``request``.
_BUDGET: ContextVar[Budget | None] = ContextVar("slack_call_budget", default=None)


class Retries(RetryHandler):
    """slack-sdk's own handlers say what is retryable, each under its policy; the wait and the stop are
    :mod:`mcp_lib.retry`'s, within the call's budget, and the wait is slept on its clock."""

    def __init__(self, kinds: list[tuple[RetryHandler, Policy]]):
        super().__init__()
        self.kinds = kinds

    def can_retry(self, *, state: RetryState, request: HttpRequest, response: HttpResponse | None = None,
                  error: Exception | None = None) -> bool:
        policy = next((policy for judge, policy in self.kinds
                       if judge.can_retry(state=state, request=request, response=response, error=error)), None)
        if policy is None:
            return False
        budget = _BUDGET.get() or Budget()
        asked = server_wait(response.headers, budget.clock) if response is not None else None
        failed = Retryable(str(error or f"HTTP {response.status_code if response else '?'}"), asked)
        state.custom_values = {"wait": next_wait(policy, budget, state.current_attempt + 1, failed)}
        return state.custom_values["wait"] is not None

    def prepare_for_next_attempt(self, *, state: RetryState, request: HttpRequest,
                                 response: HttpResponse | None = None, error: Exception | None = None) -> None:
        state.next_attempt_requested = True
        (_BUDGET.get() or Budget()).clock.sleep((state.custom_values or {}).get("wait") or 0.0)
        state.increment_current_attempt()


# -- the client ---------------------------------------------------------------------------------------------
class Token(NamedTuple):
    """A client and the variable its token came from (named in a configuration error)."""

    client: WebClient
    variable: str


@dataclass
class SlackClients:
    """The bot and user WebClients plus per-client caches (channel privacy, people, who the reader is)."""

    config: SlackConfig
    bot: WebClient | None
    user: WebClient | None
    channel_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)  # users.info's, by id (reading.user_info)
    unknown_users: set[str] = field(default_factory=set)  # lookups that failed: not asked again
    names_pending: dict[str, Future[None]] = field(default_factory=dict)  # lookups started ahead (names_ahead)
    user_lookups_paused_until: float = 0.0  # users.info was rate limited: no lookups until then
    name_lookups: Iterator[int] = field(default_factory=itertools.count)  # names asked (MAX_NAME_LOOKUPS) until:
    name_lookups_until: float = float("-inf")
    channel_ids: dict[str, str] = field(default_factory=dict)
    auth: dict[str, Any] | None = None  # auth.test of the reading token (reading.whoami)

    def names_again(self, until: float) -> None:
        """MAX_NAME_LOOKUPS more names (reading.person) until ``until``, a ``clock.monotonic()`` time."""
        self.name_lookups, self.name_lookups_until = itertools.count(), until

    def reader(self) -> Token:
        """Reads go through the bot token when there is one (narrower access than a person's token)."""
        if self.bot is not None:
            return Token(self.bot, "SLACK_BOT_TOKEN")
        if self.user is not None:
            return Token(self.user, "SLACK_USER_TOKEN")
        raise ToolError("Slack is not configured: set SLACK_BOT_TOKEN and/or SLACK_USER_TOKEN")

    def searcher(self) -> Token:
        if self.user is None:
            raise ToolError("searchMessages needs a Slack user token: set SLACK_USER_TOKEN (xoxp-, scope "
                            "search:read); a bot token cannot search. Meanwhile use getConversationHistory or "
                            "getThreadMessages on a known channel.")
        return Token(self.user, "SLACK_USER_TOKEN")


class DoorWebClient(WebClient):
    """slack-sdk's client with each request through the Slack tokens' door; the token is urllib's unredirected
    header, so a redirect hop (urllib follows 301/302/303) carries none. Each answer is :func:`read_capped`."""

    def __init__(self, *, door: Door, **kwargs: Any):
        super().__init__(**kwargs)
        self.door = door

    def _perform_urllib_http_request_internal(self, url: str, req: Request) -> dict[str, Any]:
        # slack-sdk's own reads each answer whole (its caller an error's), and no public seam reaches that read: this
        # is it with the reads bounded, less admin.analytics' gzip branch (never called here); its http-only check is
        # the door's (every request carries the token, so a URL off Slack's origin is refused).
        self.door.guard(url, req.header_items())
        token = req.headers.pop("Authorization", None)
        if token is not None:
            req.add_unredirected_header("Authorization", token)
        proxy = [ProxyHandler({"http": self.proxy, "https": self.proxy})] if self.proxy else []
        try:
            answer = build_opener(*proxy, HTTPSHandler(context=self.ssl)).open(req, timeout=self.timeout)
        except HTTPError as exc:
            with exc:
                body = read_capped(iter(partial(exc.read, 2**16), b""), "Slack")
            raise HTTPError(url, exc.code, exc.msg, exc.headers, io.BytesIO(body)) from None
        with answer:
            body = read_capped(iter(partial(answer.read, 2**16), b""), "Slack")
        return {"status": answer.status, "headers": answer.headers, "body": body.decode("utf-8", "replace")}


def web_client(config: SlackConfig, token: str, **kwargs: Any) -> WebClient:
    """The one way to build a WebClient for one of the configured tokens (the platform's, the front's writer)."""
    door = slack_door(config.api_url, config.bot_token, config.user_token)
    return DoorWebClient(door=door, token=token, base_url=config.api_url, timeout=config.timeout_s, **kwargs)


def make_client(config: SlackConfig) -> SlackClients:
    """Both clients retry 429 (Retry-After, plus up to 0.5 s as slack-sdk does), 500/503, and a connection that
    failed or was reset."""
    attempts = config.max_retries + 1
    handlers: list[RetryHandler] = [Retries([
        (RateLimitErrorRetryHandler(attempts), Policy(attempts, base_s=1.0, server_jitter_s=0.5)),
        (ServerErrorRetryHandler(attempts), Policy(attempts)),
        (ConnectionErrorRetryHandler(1), Policy(2)),
    ])]
    bot, user = (web_client(config, token, retry_handlers=handlers) if token else None
                 for token in (config.bot_token, config.user_token))
    return SlackClients(config=config, bot=bot, user=user)


# Slack rejected the token itself: a configuration problem, not a failed lookup (the front exits 2 on these).
AUTH_ERRORS = {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
_HINTS = {
    "channel_not_found": "no such channel, or the bot is not a member of it",
    "not_in_channel": "the bot is not a member of this channel; invite it with /invite",
    "thread_not_found": "no message with that ts in this channel",
    "message_not_found": "no message with that ts in this channel",
    "user_not_found": "no such user",
    "invalid_cursor": "the pagination cursor is stale",
}


def _failure(exc: SlackApiError, api: str, variable: str, clock: Clock) -> ToolError:
    """A failed call as the error of its kind (:func:`call`), in one line that says what to do."""
    response = exc.response
    data = response.data if isinstance(response.data, dict) else {}
    error = str(data.get("error") or "")
    kind = ChannelNotFound if error == "channel_not_found" else CredentialsError if error in AUTH_ERRORS else ToolError
    if response.status_code == 429:
        wait = server_wait(response.headers, clock)
        asked = f" (Slack asks to wait {math.ceil(wait)} s)" if wait is not None else ""
        return RateLimited(f"Slack rate limit on {api}: still limited after retries{asked}; try again later", wait)
    if response.status_code >= 500:
        return kind(f"Slack is unavailable ({api} answered HTTP {response.status_code} after retries); try later")
    if error in AUTH_ERRORS:
        return kind(f"Slack rejected the token in {variable} ({error}): check that it is valid and not revoked")
    if error == "not_allowed_token_type":
        return kind(f"{api} does not accept the token in {variable} (not_allowed_token_type): search needs a user "
                    "token (xoxp-, scope search:read) in SLACK_USER_TOKEN")
    if error == "missing_scope":
        return kind(f"the token in {variable} lacks the scope {data.get('needed')!r} needed by {api} (missing_scope)")
    hint = _HINTS.get(error)
    return kind(f"Slack {api} failed: {error or 'unknown error'}" + (f" ({hint})" if hint else ""))


def call(ctx: ToolContext, api: str, *, search: bool = False, patient: bool = True, **params: Any) -> dict[str, Any]:
    """One Web API call; every failure a ToolError that says what to do (CredentialsError: the token rejected;
    RateLimited: a 429 that outlasted the retries). Retries end at ``ctx.deadline``, at once when not ``patient``."""
    clients: SlackClients = ctx.client
    data = request(ctx, clients.searcher() if search else clients.reader(), api, patient=patient, **params).data
    if not isinstance(data, dict) or not data.get("ok"):  # validate() already raised; belt and braces
        raise ToolError(f"Slack {api} returned no usable answer")
    if api == "search.messages":  # {"messages": {"matches": [...], "paging": {...}}}
        found = _object(data, "messages")
        data["messages"] = {**found, "matches": _messages(found.get("matches")), "paging": _object(found, "paging")}
    elif "messages" in data:
        data["messages"] = _messages(data["messages"])
    if "message" in data and not _messages([data["message"]]):
        del data["message"]
    if "channels" in data:
        data["channels"] = [c for c in data["channels"] if isinstance(c, dict)] if isinstance(
            data["channels"], list) else []
    meta = data["response_metadata"] = _object(data, "response_metadata")
    if not isinstance(meta.get("next_cursor", ""), str):
        meta["next_cursor"] = ""  # the last page
    return data


def _object(data: dict[str, Any], key: str) -> dict[str, Any]:
    """``data[key]`` where Slack documents an object there (``response_metadata``, search's ``messages`` and
    ``paging``), else empty."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _messages(found: Any) -> list[dict[str, Any]]:
    """The messages Slack's API documents: objects whose ``ts`` (and ``thread_ts``, ``latest_reply``) is a Slack
    timestamp, ``subtype`` a string, ``files``, ``reply_users`` and ``reactions`` lists, each reaction an object
    with a list of ``users``. Any other (a proxy's, a fake's; Slack sends none) is left out here, once, for every
    reader."""
    return [m for m in found if isinstance(m, dict) and all(
        isinstance(m.get(key), str) and ids.is_ts(m[key]) for key in ("ts", "thread_ts", "latest_reply")
        if key == "ts" or key in m) and isinstance(m.get("subtype", ""), str)
        and all(isinstance(m.get(key, []), list) for key in ("files", "reply_users", "reactions"))
        and all(isinstance(r, dict) and isinstance(r.get("users", []), list) for r in m.get("reactions", []))
    ] if isinstance(found, list) else []


def request(ctx: ToolContext, token: Token, api: str, *, patient: bool = True, **params: Any) -> SlackResponse:
    """:func:`call` with the token chosen, answering the whole response (headers too: ``x-oauth-scopes``)."""
    clients: SlackClients = ctx.client
    web, variable = token
    method = getattr(web, api.replace(".", "_"))
    budget = tool_budget(ctx)
    reset = _BUDGET.set(budget if patient else replace(budget, deadline=budget.clock.monotonic()))
    try:
        return method(**{k: v for k, v in params.items() if v is not None})
    except SlackApiError as exc:
        raise _failure(exc, api, variable, budget.clock) from None
    except TimeoutError:
        raise ToolError(f"Slack did not answer {api} within {clients.config.timeout_s} s; try again later") from None
    except (URLError, OSError, HTTPException) as exc:  # HTTPException: a chunk cut short, a header line of 64 KB
        reason = getattr(exc, "reason", exc)
        raise ToolError(f"cannot reach Slack at {clients.config.api_url} ({api}): {reason}") from None
    except JSONDecodeError as exc:  # a body that begins with "{", cut short: slack-sdk's retry handlers parse it
        raise ToolError(f"Slack answered {api} with broken JSON ({exc}); try again later") from None
    finally:
        _BUDGET.reset(reset)


def check(ctx: ToolContext) -> list[str]:
    """``helpbot doctor``: each token Slack accepts (auth.test), with every scope helpbot's calls need (Slack
    lists a token's scopes in the ``x-oauth-scopes`` header of each Web API answer)."""
    clients: SlackClients = ctx.client
    found = []
    for web, variable, kind in ((clients.bot, "SLACK_BOT_TOKEN", "bot"), (clients.user, "SLACK_USER_TOKEN", "user")):
        if web is None:
            continue
        response = request(ctx, Token(web, variable), "auth.test")
        granted = {s.strip() for s in (header(response.headers, "x-oauth-scopes") or "").split(",") if s.strip()}
        missing = sorted(token_scopes(kind) - granted)  # type: ignore[arg-type]
        if missing:
            raise ToolError(f"the token in {variable} lacks {', '.join(missing)}: add them under OAuth & Permissions "
                            "(docs/slack-app-manifest.yml lists them) and reinstall the app")
        found.append(f"{variable} accepted (team {response.get('team_id')}), with every scope helpbot needs")
    return found


