"""One retry engine for every outbound client: the model, the HTTP platforms and Slack's retry handlers.

A caller says only what is retryable, under which :class:`Policy`, and what the server asked for
(:func:`server_wait` reads ``retry-after-ms``, ``Retry-After`` in seconds or as an HTTP date, and
``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is 0). The rest is decided here, the same way everywhere:
wait what the server asked, else exponential backoff with jitter; never past the :class:`Budget`'s deadline; a
server wait longer than the time left (or than ``max_server_wait_s``) ends the retries at once, since retrying
early would only be refused again. Clock and sleep are injected, so tests never really wait.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

if TYPE_CHECKING:
    import tenacity

T = TypeVar("T")
Why = Literal["attempts", "deadline", "server_wait"]  # why the retries ended


@dataclass(frozen=True)
class Budget:
    """When the work must be over (a ``clock()`` value; None: no limit of its own), on the clock it is read by,
    and how much time an attempt needs at least (one with less left is not started)."""

    deadline: float | None = None
    clock: Callable[[], float] = time.monotonic
    min_attempt_s: float = 0.0

    def left(self) -> float:
        return math.inf if self.deadline is None else self.deadline - self.clock()


@dataclass(frozen=True)
class Policy:
    """How often and how long to retry one kind of failure."""

    attempts: int = 4  # in all, the first included
    base_s: float = 0.5  # our own backoff: base * 2^(n-1), +-25 % jitter, capped at max_backoff_s
    max_backoff_s: float = 30.0
    max_server_wait_s: float = 30.0  # a longer server-stated wait is not sat out
    server_jitter_s: float = 0.0  # added to a server-stated wait (slack-sdk's habit, so clients do not stampede)

    def backoff(self, attempt: int) -> float:
        return min(self.base_s * 2 ** (attempt - 1), self.max_backoff_s) * random.uniform(0.75, 1.25)

    def next_wait(self, attempt: int, asked: float | None, budget: Budget) -> float | Why:
        """After the ``attempt``-th failure: the seconds to wait before the next attempt, or why to stop."""
        left = budget.left()
        if attempt >= self.attempts:
            return "attempts"
        if asked is not None:
            if asked > self.max_server_wait_s or asked > left:
                return "server_wait"
            wait = min(asked + random.uniform(0, self.server_jitter_s), left)
        else:
            wait = min(self.backoff(attempt), max(0.0, left))
        if left - wait <= budget.min_attempt_s:  # no time would be left for the attempt: do not wait for it
            return "deadline"
        return wait


class Retry(NamedTuple):
    """A failure worth another try: under ``policy``, after the wait the server ``asked`` for, if any."""

    policy: Policy
    asked: float | None = None


class GaveUp(Exception):
    """The retries ended without success: ``why``, after ``attempts`` attempts; ``last`` is the last failure
    (None when the budget left no time for a first attempt), ``asked`` the server's wait, ``left`` the time left."""

    def __init__(self, why: Why, attempts: int, last: BaseException | None, asked: float | None, left: float):
        super().__init__(f"{why}: {last}" if last else why)
        self.why, self.attempts, self.last, self.asked, self.left = why, attempts, last, asked, left


class _NoTime(Exception):
    pass


def call(fn: Callable[[float], T], *, retryable: Callable[[BaseException], Retry | None], budget: Budget,
         sleep: Callable[[float], None] = time.sleep,
         on_retry: Callable[[int, BaseException, float], None] | None = None) -> T:
    """``fn(seconds_left)`` until it succeeds. A failure ``retryable`` returns None for is raised as it is; one
    that outlasts its policy, or the budget, raises :class:`GaveUp` (from it). ``on_retry(attempt, failure,
    wait)`` hears of each wait, e.g. for a trace."""
    import tenacity  # here: server_wait serves the Lambda relay, whose package has no tenacity
    verdicts: dict[int, tuple[float | Why, Retry | None]] = {}  # attempt number -> (wait or why, how)

    def verdict(state: tenacity.RetryCallState) -> tuple[float | Why, Retry | None]:
        if state.attempt_number not in verdicts:
            exc = state.outcome.exception() if state.outcome else None
            how = retryable(exc) if exc is not None and not isinstance(exc, _NoTime) else None
            decided = "attempts" if how is None else how.policy.next_wait(state.attempt_number, how.asked, budget)
            verdicts[state.attempt_number] = (decided, how)
        return verdicts[state.attempt_number]

    def attempt() -> T:
        left = budget.left()
        if left <= 0 or left < budget.min_attempt_s:
            raise _NoTime
        return fn(left)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        decided = verdict(state)[0]
        failure = state.outcome.exception() if state.outcome else None
        if on_retry is not None and failure is not None and not isinstance(decided, str):
            on_retry(state.attempt_number, failure, decided)

    def wait(state: tenacity.RetryCallState) -> float:
        decided = verdict(state)[0]
        return 0.0 if isinstance(decided, str) else decided

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(lambda exc: not isinstance(exc, _NoTime) and retryable(exc) is not None),
        stop=lambda state: isinstance(verdict(state)[0], str), wait=wait, sleep=sleep, before_sleep=before_sleep,
        reraise=True)
    try:
        return retrying(attempt)
    except _NoTime:
        failures = max(verdicts, default=0)
        how = verdicts[failures][1] if failures else None
        raise GaveUp("deadline", failures, None, how.asked if how else None, budget.left()) from None
    except Exception as exc:
        if retryable(exc) is None:
            raise
        attempts = max(verdicts, default=1)
        decided, how = verdicts.get(attempts, ("attempts", None))
        why: Why = decided if isinstance(decided, str) else "attempts"
        raise GaveUp(why, attempts, exc, how.asked if how else None, budget.left()) from exc


# -- what the server asked for ---------------------------------------------------------------------------------
def header(headers: Mapping[str, Any], name: str) -> str | None:
    """A header by name in any case; slack-sdk hands a list of values."""
    for key, value in headers.items():
        if key.lower() == name:
            value = value[0] if isinstance(value, list) and value else value
            return str(value).strip() if value is not None else None
    return None


def server_wait(headers: Mapping[str, Any], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait; None when it did not say, or said something unreadable
    (``Retry-After: soon``). ``now``: wall-clock epoch seconds, for HTTP dates and ``x-ratelimit-reset``."""
    wall = time.time() if now is None else now
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
            return max(0.0, email.utils.parsedate_to_datetime(retry_after).timestamp() - wall)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    reset = header(headers, "x-ratelimit-reset")
    if header(headers, "x-ratelimit-remaining") == "0" and reset:
        try:
            return max(0.0, float(reset) - wall)
        except ValueError:
            return None
    return None
