"""Retry policy for the HTTP platforms that have no retry handlers of their own (GitHub, Growi, Redmine).

Same shape as slack-sdk's handlers, built on tenacity: retry 429/5xx/timeouts, wait what the server asks
(``Retry-After`` seconds or date, GitHub's ``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is 0), else
exponential backoff with jitter; stop after a few attempts or when the time budget is spent. Sleep and clock
are injected so tests never really wait.
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
    """A response or failure worth another try; ``wait`` is what the server asked for, if anything."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


def server_wait(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asked us to wait, from Retry-After or GitHub's rate-limit headers."""
    lower = {k.lower(): v for k, v in headers.items()}
    retry_after = lower.get("retry-after")
    if retry_after:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(retry_after)
            if parsed is not None:
                return max(0.0, parsed.timestamp() - now)
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


def retrying(
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    attempts: int = 4,
    budget_s: float = 60.0,
    base_s: float = 0.5,
    max_wait_s: float = 30.0,
) -> tenacity.Retrying:
    """A tenacity policy: retries RetryableError, waits as the server asked (capped), bounded in time."""
    started = clock()

    def wait(state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = exc.wait if isinstance(exc, RetryableError) else None
        backoff = base_s * 2 ** (state.attempt_number - 1) + random.uniform(0, base_s)
        chosen = asked if asked is not None else backoff
        remaining = budget_s - (clock() - started)
        return max(0.0, min(chosen, max_wait_s, remaining))

    def stop(state: tenacity.RetryCallState) -> bool:
        return state.attempt_number >= attempts or clock() - started >= budget_s

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
        raise ToolError(f"{what} is unavailable after retries: {exc}") from None


def send(ctx: ToolContext, what: str, method: str, url: str, *, max_wait_s: float = MAX_SERVER_WAIT_S,
         **kwargs: Any) -> httpx.Response:
    """One HTTP call on ``ctx.client`` (an ``httpx.Client``) with retries; the caller interprets the response.

    Retried (tenacity, sleeping with ``ctx.sleep``): timeouts, connection failures, 429, 5xx and rate-limit 403s,
    waiting what the server asks (Retry-After, ``x-ratelimit-reset``). A wait longer than ``max_wait_s`` is not
    sat out: it becomes a ToolError at once. A service that stays down becomes a ToolError naming ``what``.
    """
    client: httpx.Client = ctx.client

    def attempt() -> httpx.Response:
        try:
            response = client.request(method, url, **kwargs)
        except httpx.TimeoutException as exc:
            raise RetryableError(f"timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise RetryableError(f"could not connect ({type(exc).__name__}: {exc})") from exc
        status = response.status_code
        if status in RETRYABLE_STATUS or is_rate_limited(status, response.headers):
            wait = server_wait(response.headers, ctx.clock())
            reason = f"HTTP {status}{brief_error(response)}"
            if wait is not None and wait > max_wait_s:
                raise ToolError(f"{what} is rate limited ({reason}); it asks to wait {math.ceil(wait)} s, "
                                f"more than the {max_wait_s:.0f} s we wait; try later or another source")
            raise RetryableError(reason, wait=wait)
        return response

    return call_with_retries(attempt, retrying(sleep=ctx.sleep, clock=ctx.clock), what)


def brief_error(response: httpx.Response) -> str:
    """`` (message)`` from a JSON error body, or nothing; for error texts."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if isinstance(body, dict):
        message = body.get("message") or body.get("error")
        if not message and isinstance(body.get("errors"), list) and body["errors"]:
            first = body["errors"][0]
            message = first.get("message") if isinstance(first, dict) else str(first)
        if message:
            return f" ({str(message)[:200]})"
    return ""
