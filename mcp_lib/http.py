"""HTTP for the platforms without retry handlers of their own (GitHub, Growi, Redmine): what is retryable, and
shared answer handling.

Retried (with :mod:`mcp_lib.retry`): timeouts, connection failures, 429, 5xx and GitHub's rate-limit 403s, waiting
what the server asks. One budget for all requests of one tool call (``ToolContext.deadline``), so three requests
cannot take three budgets. Sleep and clock are injected so tests never really wait.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .core import ToolContext, ToolError
from .retry import Budget, GaveUp, Policy, Retry, call, header, server_wait

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# The longest server-requested wait we sit out; GitHub's hourly reset can be far away, and then we say so.
MAX_SERVER_WAIT_S = 30.0


class RetryableError(Exception):
    """A response or failure worth another try; ``wait`` is what the server asked for, if anything."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


def is_rate_limited(status: int, headers: Mapping[str, str]) -> bool:
    """GitHub answers 403 (not only 429) when the rate limit is exhausted."""
    return status == 429 or (status == 403 and (header(headers, "x-ratelimit-remaining") == "0"
                                                 or header(headers, "retry-after") is not None))


def check_retryable(what: str, status: int, headers: Mapping[str, str], now: float, detail: str = "",
                    max_wait_s: float = MAX_SERVER_WAIT_S) -> None:
    """Raise RetryableError for an answer worth another try (429, 5xx, a rate-limit 403), with the wait the
    server asked for (``now``: wall-clock seconds); a ToolError at once when that wait is longer than
    ``max_wait_s``. Else return."""
    if status not in RETRYABLE_STATUS and not is_rate_limited(status, headers):
        return
    wait = server_wait(headers, now)
    reason = f"HTTP {status}{detail}"
    if wait is not None and wait > max_wait_s:
        raise ToolError(f"{what} is rate limited ({reason}); it asks to wait {math.ceil(wait)} s, "
                        f"more than the {max_wait_s:.0f} s we wait; try later or another source")
    raise RetryableError(reason, wait=wait)


@dataclass(frozen=True)
class Retrying:
    """The retry policy of one tool call: how to retry, until when, and how to sleep."""

    policy: Policy
    budget: Budget
    sleep: Callable[[float], None]


def retrying(
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    attempts: int = 4,
    budget_s: float = 60.0,
    deadline: float | None = None,
    base_s: float = 0.5,
    max_wait_s: float = MAX_SERVER_WAIT_S,
) -> Retrying:
    """Retries of RetryableError: time ends at ``budget_s`` from now or at ``deadline`` (a ``clock()`` value),
    whichever comes first."""
    started = clock()
    end = started + budget_s if deadline is None else min(deadline, started + budget_s)
    return Retrying(Policy(attempts=attempts, base_s=base_s, max_backoff_s=max_wait_s, max_server_wait_s=max_wait_s),
                    Budget(end, clock), sleep)


def call_with_retries(fn: Callable[[], Any], policy: Retrying, what: str) -> Any:
    """Run ``fn`` under the policy; a platform that stays down becomes a ToolError naming ``what``."""
    def retryable(exc: BaseException) -> Retry | None:
        return Retry(policy.policy, exc.wait) if isinstance(exc, RetryableError) else None

    try:
        return call(lambda left: fn(), retryable=retryable, budget=policy.budget, sleep=policy.sleep)
    except GaveUp as exc:
        if exc.why == "server_wait" and exc.asked is not None:
            raise ToolError(f"{what} is rate limited ({exc.last}); it asks to wait {math.ceil(exc.asked)} s, more "
                            f"than the {exc.left:.0f} s left for this call; try later or another source") from None
        if exc.last is None:
            raise ToolError(f"{what} is unavailable: no time left for another attempt") from None
        raise ToolError(f"{what} is unavailable after retries: {exc.last}") from None


def policy_for(ctx: ToolContext, budget_s: float = 60.0) -> Retrying:
    """The retry policy of one tool call: the injected sleep and clock, bounded by the call's deadline."""
    return retrying(sleep=ctx.sleep, clock=ctx.clock, budget_s=budget_s, deadline=ctx.deadline)


def send(ctx: ToolContext, what: str, method: str, url: str, *, max_wait_s: float = MAX_SERVER_WAIT_S,
         **kwargs: Any) -> httpx.Response:
    """One HTTP call on ``ctx.client`` (an ``httpx.Client``) with retries; the caller interprets the response.

    Retried (sleeping with ``ctx.sleep``): timeouts, connection failures, 429, 5xx and rate-limit 403s,
    waiting what the server asks (Retry-After, ``x-ratelimit-reset``), within the call's deadline. A wait longer
    than ``max_wait_s`` is not sat out: it becomes a ToolError at once. A service that stays down becomes a
    ToolError naming ``what``.
    """
    client: httpx.Client = ctx.client

    def attempt() -> httpx.Response:
        try:
            response = client.request(method, url, **kwargs)
        except httpx.TimeoutException as exc:
            raise RetryableError(f"timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise RetryableError(f"could not connect ({type(exc).__name__}: {exc})") from exc
        check_retryable(what, response.status_code, response.headers, ctx.clock(), error_detail(response),
                        max_wait_s)
        return response

    return call_with_retries(attempt, policy_for(ctx), what)


def refuse_writes(request: httpx.Request) -> None:
    """An httpx request hook: the tools are read-only, so anything but GET is refused before it is sent."""
    if request.method != "GET":
        raise ToolError(f"refused: the tools are read-only (attempted {request.method} {request.url.path})")


def read_only_client(**kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` that can only send GET requests."""
    return httpx.Client(event_hooks={"request": [refuse_writes]}, **kwargs)


def json_answer(response: httpx.Response, service: str, what: str, url_variable: str) -> Any:
    """The JSON of a successful answer, or a ToolError saying it is not JSON (usually a wrong base URL)."""
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("content-type", "unknown content")
        raise ToolError(f"{service} answered {what} with {kind}, not JSON: check {url_variable}") from None


def error_detail(response: httpx.Response) -> str:
    """`` (message; ...)`` from a JSON error body -- ``{message}``, ``{error}``, ``{errors: [...]}`` (GitHub,
    Growi) -- or nothing; for error texts."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    messages = [str(body[key]) for key in ("message", "error") if isinstance(body.get(key), str | int) and body[key]]
    errors = body.get("errors")
    if isinstance(errors, list):
        for error in errors:
            text = (error.get("message") or error.get("code")) if isinstance(error, dict) else error
            if text and str(text) not in messages:
                messages.append(str(text))
    return f" ({'; '.join(messages)[:300]})" if messages else ""
