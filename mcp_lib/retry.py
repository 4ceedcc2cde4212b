"""Retries as tenacity strategies, kept apart: what is retryable (``retry=``, the caller's), how long to wait
(``wait=``: what the server asked, else exponential backoff with jitter) and when to stop (``stop=``: the attempts,
a server wait not worth sitting out, the call's :class:`Budget`). :func:`call` composes them with tenacity's
operators; each transport has one adapter (mcp_lib.http, the Slack handler, the Redmine engine, the relay's worker,
the model client). Waits are slept on the budget's :class:`~mcp_lib.clock.Clock`, so tests never wait.
"""

from __future__ import annotations

import email.utils
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import tenacity
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from .clock import SYSTEM_CLOCK, Clock
from .errors import GaveUp, Why

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


def failure(state: tenacity.RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome is not None and state.outcome.failed else None


# -- wait ------------------------------------------------------------------------------------------------------
@dataclass
class wait_backoff(wait_base):
    """Our own wait: ``base_s * 2^(n-1)`` capped at ``max_s``, +-25 % jitter."""

    base_s: float
    max_s: float

    def __call__(self, state: tenacity.RetryCallState) -> float:
        return min(self.base_s * 2 ** (state.attempt_number - 1), self.max_s) * random.uniform(0.75, 1.25)


@dataclass
class wait_server(wait_base):
    """The wait the server asked for (plus up to ``jitter_s``, so that clients do not stampede), else ``fallback``."""

    asked: Asked
    fallback: wait_base
    jitter_s: float = 0.0

    def __call__(self, state: tenacity.RetryCallState) -> float:
        seconds = _asked(self.asked, state)
        return self.fallback(state) if seconds is None else seconds + random.uniform(0, self.jitter_s)


# -- stop ------------------------------------------------------------------------------------------------------
@dataclass
class stop_server_wait(stop_base):
    """A server wait longer than ``max_s`` or than the time left: an earlier retry would only be refused again."""

    asked: Asked
    max_s: float
    budget: Budget

    def __call__(self, state: tenacity.RetryCallState) -> bool:
        seconds = _asked(self.asked, state)
        return seconds is not None and (seconds > self.max_s or seconds > self.budget.left())


@dataclass
class stop_at_deadline(stop_base):
    """No wait after which the budget would leave the next attempt less than its ``min_attempt_s``."""

    budget: Budget

    def __call__(self, state: tenacity.RetryCallState) -> bool:
        return self.budget.left() - state.upcoming_sleep <= self.budget.min_attempt_s


def _asked(asked: Asked, state: tenacity.RetryCallState) -> float | None:
    exc = failure(state)
    return asked(exc) if exc is not None else None


@dataclass(frozen=True)
class Policy:
    """How often and how long one kind of failure is retried."""

    attempts: int = 4  # in all, the first included
    base_s: float = 0.5
    max_backoff_s: float = 30.0
    max_server_wait_s: float = 30.0  # a longer server-stated wait is not sat out
    server_jitter_s: float = 0.0

    def wait(self, asked: Asked) -> wait_base:
        return wait_server(asked, wait_backoff(self.base_s, self.max_backoff_s), self.server_jitter_s)

    def stops(self, budget: Budget, asked: Asked) -> dict[Why, stop_base]:
        return {"attempts": tenacity.stop_after_attempt(self.attempts),
                "server_wait": stop_server_wait(asked, self.max_server_wait_s, budget),
                "deadline": stop_at_deadline(budget)}

    def stop(self, budget: Budget, asked: Asked) -> stop_base:
        attempts, server_wait, deadline = self.stops(budget, asked).values()
        return attempts | server_wait | deadline


def call(fn: Callable[[float], T], *, retry: Callable[[BaseException], bool],
         policy: Policy | Callable[[BaseException], Policy], budget: Budget, asked: Asked = asked_by,
         on_retry: Callable[[int, BaseException, float], None] | None = None) -> T:
    """``fn(seconds_left)`` until it succeeds. A failure ``retry`` refuses is raised as it is; one that outlasts its
    policy (which may depend on the failure) or the budget raises :class:`GaveUp` from it. ``on_retry(attempt,
    failure, wait)`` hears of each wait, e.g. for a trace."""

    def policy_of(state: tenacity.RetryCallState) -> Policy:
        if isinstance(policy, Policy):
            return policy
        exc = failure(state)
        assert exc is not None  # asked only after a failure
        return policy(exc)

    def before(state: tenacity.RetryCallState) -> None:
        left = budget.left()
        if left <= 0 or left < budget.min_attempt_s:
            raise GaveUp("deadline", state.attempt_number - 1, None, None, left)

    def gave_up(state: tenacity.RetryCallState) -> NoReturn:
        exc = failure(state)
        assert exc is not None
        fired: list[Why] = [why for why, stop in policy_of(state).stops(budget, asked).items() if stop(state)]
        why = fired[0] if fired else "deadline"  # the clock may have moved since the stop fired
        raise GaveUp(why, state.attempt_number, exc, asked(exc), budget.left()) from exc

    def waited(state: tenacity.RetryCallState) -> None:
        exc = failure(state)
        if on_retry is not None and exc is not None:
            on_retry(state.attempt_number, exc, state.upcoming_sleep)

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(retry), wait=lambda state: policy_of(state).wait(asked)(state),
        stop=lambda state: policy_of(state).stop(budget, asked)(state), sleep=budget.clock.sleep, before=before,
        before_sleep=waited, retry_error_callback=gave_up)
    return retrying(lambda: fn(budget.left()))


def next_wait(policy: Policy, budget: Budget, attempt: int, failed: BaseException,
              asked: Asked = asked_by) -> float | None:
    """For a loop another library runs (slack-sdk's): the wait after the ``attempt``-th attempt failed with
    ``failed``, or None when the retries end."""
    state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
    state.attempt_number = attempt
    state.set_exception((type(failed), failed, failed.__traceback__))
    state.upcoming_sleep = policy.wait(asked)(state)
    return None if policy.stop(budget, asked)(state) else state.upcoming_sleep


# -- what the server asked for ---------------------------------------------------------------------------------
def header(headers: Mapping[str, Any], name: str) -> str | None:
    """A header by name in any case; slack-sdk hands a list of values."""
    for key, value in headers.items():
        if key.lower() == name:
            value = value[0] if isinstance(value, list) and value else value
            return str(value).strip() if value is not None else None
    return None


def server_wait(headers: Mapping[str, Any], clock: Clock = SYSTEM_CLOCK) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` in seconds or as an HTTP date,
    ``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is 0, on the clock's wall); None when it did not say, or
    said something unreadable (``Retry-After: soon``)."""
    millis = header(headers, "retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    retry_after = header(headers, "retry-after")
    if retry_after:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            pass
        try:
            return max(0.0, email.utils.parsedate_to_datetime(retry_after).timestamp() - clock.wall())
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    reset = header(headers, "x-ratelimit-reset")
    if header(headers, "x-ratelimit-remaining") == "0" and reset:
        try:
            return max(0.0, float(reset) - clock.wall())
        except ValueError:
            return None
    return None
