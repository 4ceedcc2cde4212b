"""Retries on tenacity's loop: what is retryable is the caller's; how long and how often, a :class:`Policy`'s
within the call's :class:`Budget`, whose :class:`~mcp_lib.clock.Clock` the waits are slept on (tests never wait)."""

from __future__ import annotations

import email.utils
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import tenacity

from .clock import SYSTEM_CLOCK, Clock
from .errors import GaveUp, Why
from .payload import number

T = TypeVar("T")
Asked = Callable[[BaseException], float | None]  # the wait the server asked for, read from a failure


def asked_by(exc: BaseException) -> float | None:
    """The wait a failure carries as ``asked`` (:class:`Retryable`, the relay's DispatchError), if any."""
    asked = getattr(exc, "asked", None)
    return float(asked) if isinstance(asked, int | float) else None


@dataclass(frozen=True)
class Budget:
    """Until when retries may go on (a ``clock.monotonic()`` value; None: no limit of its own), the clock they
    read and sleep on, and the time an attempt needs at least (one with less left is not started)."""

    deadline: float | None = None
    clock: Clock = SYSTEM_CLOCK
    min_attempt_s: float = 0.0

    def left(self) -> float:
        return math.inf if self.deadline is None else self.deadline - self.clock.monotonic()


def tool_budget(ctx: Any, budget_s: float = math.inf) -> Budget:
    """A tool call's retry budget: ``ctx.deadline``, and at most ``budget_s`` from now, on its clock."""
    end = ctx.clock.monotonic() + budget_s
    return Budget(end if ctx.deadline is None else min(ctx.deadline, end), ctx.clock)


@dataclass(frozen=True)
class Policy:
    """How often and how long one kind of failure is retried."""

    attempts: int = 4  # in all, the first included
    base_s: float = 0.5
    max_backoff_s: float = 30.0
    max_server_wait_s: float = 30.0  # a longer server-stated wait is not sat out
    server_jitter_s: float = 0.0  # added to a server-stated wait, so that clients do not stampede

    def backoff(self, attempt: int) -> float:
        """``base_s * 2^(attempt-1)`` capped at ``max_backoff_s``, +-25 % jitter."""
        return min(self.base_s * 2 ** (attempt - 1), self.max_backoff_s) * random.uniform(0.75, 1.25)

    def wait(self, attempt: int, asked: float | None) -> float:
        return self.backoff(attempt) if asked is None else asked + random.uniform(0, self.server_jitter_s)

    def stop(self, budget: Budget, attempt: int, asked: float | None, wait: float) -> Why | None:
        """Why no retry follows the ``attempt``-th failure (waiting ``wait``), or None."""
        if attempt >= self.attempts:
            return "attempts"
        if asked is not None and (asked > self.max_server_wait_s or asked > budget.left()):
            return "server_wait"  # an earlier retry would only be refused again
        if budget.left() - wait <= budget.min_attempt_s:
            return "deadline"
        return None


def call(fn: Callable[[float], T], *, retry: Callable[[BaseException], bool],
         policy: Policy | Callable[[BaseException], Policy], budget: Budget, asked: Asked = asked_by,
         on_retry: Callable[[int, BaseException, float], None] | None = None) -> T:
    """``fn(seconds_left)`` until it succeeds. A failure ``retry`` refuses is raised as it is; one that outlasts its
    policy (which may depend on the failure) or the budget raises :class:`GaveUp` from it. ``on_retry(attempt,
    failure, wait)`` hears of each wait, e.g. for a trace."""

    def failed(state: tenacity.RetryCallState) -> tuple[BaseException, Policy, float | None]:
        exc = state.outcome.exception() if state.outcome is not None else None
        assert isinstance(exc, BaseException)  # asked only after a failure
        return exc, policy if isinstance(policy, Policy) else policy(exc), asked(exc)

    def wait(state: tenacity.RetryCallState) -> float:
        _, chosen, seconds = failed(state)
        return chosen.wait(state.attempt_number, seconds)

    def stop(state: tenacity.RetryCallState) -> bool:
        _, chosen, seconds = failed(state)
        return chosen.stop(budget, state.attempt_number, seconds, state.upcoming_sleep) is not None

    def before(state: tenacity.RetryCallState) -> None:
        left = budget.left()
        if left <= 0 or left < budget.min_attempt_s:
            raise GaveUp("deadline", state.attempt_number - 1, None, None, left)

    def gave_up(state: tenacity.RetryCallState) -> NoReturn:
        exc, chosen, seconds = failed(state)
        why = chosen.stop(budget, state.attempt_number, seconds, state.upcoming_sleep) or "deadline"  # time moved
        raise GaveUp(why, state.attempt_number, exc, seconds, budget.left()) from exc

    def waited(state: tenacity.RetryCallState) -> None:
        if on_retry is not None:
            on_retry(state.attempt_number, failed(state)[0], state.upcoming_sleep)

    retrying = tenacity.Retrying(retry=tenacity.retry_if_exception(retry), wait=wait, stop=stop,
                                 sleep=budget.clock.sleep, before=before, before_sleep=waited,
                                 retry_error_callback=gave_up)
    return retrying(lambda: fn(budget.left()))


def next_wait(policy: Policy, budget: Budget, attempt: int, failed: BaseException) -> float | None:
    """For a loop another library runs (slack-sdk's): the wait after the ``attempt``-th attempt failed with
    ``failed``, or None when the retries end."""
    seconds = asked_by(failed)
    wait = policy.wait(attempt, seconds)
    return None if policy.stop(budget, attempt, seconds, wait) else wait


def header(headers: Mapping[str, Any], name: str) -> str | None:
    """A header by name in any case; slack-sdk hands a list of values."""
    for key, value in headers.items():
        if key.lower() == name:
            value = value[0] if isinstance(value, list) and value else value
            return str(value).strip() if value is not None else None
    return None


def server_wait(headers: Mapping[str, Any], clock: Clock) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` in seconds or as an HTTP date,
    ``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is 0, on the clock's wall); None when it did not say, or
    said something unreadable (``Retry-After: soon``)."""
    if (millis := number(header(headers, "retry-after-ms"))) is not None:
        return millis / 1000
    retry_after = header(headers, "retry-after")
    if retry_after:
        if (seconds := number(retry_after)) is not None:
            return seconds
        try:
            return max(0.0, email.utils.parsedate_to_datetime(retry_after).timestamp() - clock.wall())
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    reset = number(header(headers, "x-ratelimit-reset"))
    if header(headers, "x-ratelimit-remaining") == "0" and reset is not None:
        return max(0.0, reset - clock.wall())
    return None

