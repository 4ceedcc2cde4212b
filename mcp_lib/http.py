"""Retry policy and shared answer handling for the platforms without retry handlers of their own (GitHub, Growi,
Redmine).

Same shape as slack-sdk's handlers, built on tenacity: retry 429/5xx/timeouts, wait what the server asks
(``Retry-After`` seconds or date, GitHub's ``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is 0), else
exponential backoff with jitter; stop after a few attempts, when the time budget is spent, or when the server asks
for a longer wait than the call has left (``ToolContext.deadline``: one budget for all requests of one tool call,
so three requests cannot take three budgets). Sleep and clock are injected so tests never really wait.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import tenacity

from .core import ToolContext, ToolError

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# The longest server-requested wait we sit out; GitHub's hourly reset can be far away, and then we say so.
MAX_SERVER_WAIT_S = 30.0


class RetryableError(Exception):
    """A response or failure worth another try; ``wait`` is what the server asked for, if anything.
    ``left_s`` is set when the policy stopped because that wait was longer than the time left."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait
        self.left_s: float | None = None


def server_wait(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asked us to wait, from Retry-After or GitHub's rate-limit headers; None when it did
    not say, or said something unreadable (``Retry-After: soon``)."""
    lower = {k.lower(): v for k, v in headers.items()}
    retry_after = (lower.get("retry-after") or "").strip()
    if retry_after:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            pass
        try:
            parsed = email.utils.parsedate_to_datetime(retry_after)
            return max(0.0, parsed.timestamp() - now)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if lower.get("x-ratelimit-remaining") == "0" and lower.get("x-ratelimit-reset"):
        try:
            return max(0.0, float(lower["x-ratelimit-reset"]) - now)
        except ValueError:
            return None
    return None


def is_rate_limited(status: int, headers: Mapping[str, str]) -> bool:
    """GitHub answers 403 (not only 429) when the rate limit is exhausted."""
    lower = {k.lower(): v for k, v in headers.items()}
    return status == 429 or (status == 403 and (lower.get("x-ratelimit-remaining") == "0"
                                                 or "retry-after" in lower))


def check_retryable(what: str, status: int, headers: Mapping[str, str], now: float, detail: str = "",
                    max_wait_s: float = MAX_SERVER_WAIT_S) -> None:
    """Raise RetryableError for an answer worth another try (429, 5xx, a rate-limit 403), with the wait the
    server asked for; a ToolError at once when that wait is longer than ``max_wait_s``. Else return."""
    if status not in RETRYABLE_STATUS and not is_rate_limited(status, headers):
        return
    wait = server_wait(headers, now)
    reason = f"HTTP {status}{detail}"
    if wait is not None and wait > max_wait_s:
        raise ToolError(f"{what} is rate limited ({reason}); it asks to wait {math.ceil(wait)} s, "
                        f"more than the {max_wait_s:.0f} s we wait; try later or another source")
    raise RetryableError(reason, wait=wait)


def retrying(
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    attempts: int = 4,
    budget_s: float = 60.0,
    deadline: float | None = None,
    base_s: float = 0.5,
    max_wait_s: float = MAX_SERVER_WAIT_S,
) -> tenacity.Retrying:
    """A tenacity policy: retries RetryableError, waits as the server asked (capped), bounded in time.

    Time ends at ``budget_s`` from now or at ``deadline`` (a ``clock()`` value), whichever comes first. A server
    wait that does not fit in the time left stops the retries (retrying early would only be refused again);
    a backoff of our own is shortened to the time left.
    """
    started = clock()
    end = started + budget_s if deadline is None else min(deadline, started + budget_s)

    def asked(state: tenacity.RetryCallState) -> float | None:
        exc = state.outcome.exception() if state.outcome else None
        return exc.wait if isinstance(exc, RetryableError) else None

    def wait(state: tenacity.RetryCallState) -> float:
        wanted = asked(state)
        backoff = base_s * 2 ** (state.attempt_number - 1) + random.uniform(0, base_s)
        chosen = wanted if wanted is not None else backoff
        return max(0.0, min(chosen, max_wait_s, end - clock()))

    def stop(state: tenacity.RetryCallState) -> bool:
        left = end - clock()
        if state.attempt_number >= attempts or left <= 0:
            return True
        wanted = asked(state)
        if wanted is not None and wanted > left:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, RetryableError):
                exc.left_s = left
            return True
        return False

    return tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(RetryableError),
        wait=wait,
        stop=stop,
        sleep=sleep,
        reraise=True,
    )


def call_with_retries(fn: Callable[[], Any], policy: tenacity.Retrying, what: str) -> Any:
    """Run ``fn`` under the policy; a platform that stays down becomes a ToolError naming ``what``."""
    try:
        return policy(fn)
    except RetryableError as exc:
        if exc.left_s is not None and exc.wait is not None:
            raise ToolError(f"{what} is rate limited ({exc}); it asks to wait {math.ceil(exc.wait)} s, more than "
                            f"the {exc.left_s:.0f} s left for this call; try later or another source") from None
        raise ToolError(f"{what} is unavailable after retries: {exc}") from None


def policy_for(ctx: ToolContext, budget_s: float = 60.0) -> tenacity.Retrying:
    """The retry policy of one tool call: the injected sleep and clock, bounded by the call's deadline."""
    return retrying(sleep=ctx.sleep, clock=ctx.clock, budget_s=budget_s, deadline=ctx.deadline)


def send(ctx: ToolContext, what: str, method: str, url: str, *, max_wait_s: float = MAX_SERVER_WAIT_S,
         **kwargs: Any) -> httpx.Response:
    """One HTTP call on ``ctx.client`` (an ``httpx.Client``) with retries; the caller interprets the response.

    Retried (tenacity, sleeping with ``ctx.sleep``): timeouts, connection failures, 429, 5xx and rate-limit 403s,
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
