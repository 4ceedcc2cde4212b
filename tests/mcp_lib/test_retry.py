"""The one retry engine: what the server asked for, our backoff, the deadline, and why retries end."""

from __future__ import annotations

import pytest

from mcp_lib.retry import Budget, GaveUp, Policy, Retry, call, server_wait
from tests.fakes.clock import FakeClock

NOW = 1_800_000_000.0  # wall-clock epoch seconds, for HTTP dates and x-ratelimit-reset


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after-ms": "1500"}, 1.5),
    ({"retry-after-ms": "soon", "Retry-After": "3"}, 3.0),
    ({"Retry-After": "7"}, 7.0),
    ({"Retry-After": ["4"]}, 4.0),  # slack-sdk hands lists
    ({"retry-after": "Thu, 15 Jan 2027 08:00:10 GMT"}, 10.0),
    ({"Retry-After": "soon"}, None),
    ({"Retry-After": "Mon, 99 Foo 2025 99:99:99 GMT"}, None),
    ({"Retry-After": "   "}, None),
    ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 12)}, 12.0),
    ({"x-ratelimit-remaining": "5", "x-ratelimit-reset": str(int(NOW) + 12)}, None),
    ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "later"}, None),
    ({}, None),
])
def test_server_wait_reads_what_it_can_and_never_raises(headers: dict[str, object], expected: float | None) -> None:
    wait = server_wait(headers, NOW)
    assert wait == pytest.approx(expected) if expected is not None else wait is None


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    policy = Policy(attempts=10, base_s=2.0, max_backoff_s=10.0)
    assert 1.5 <= policy.backoff(1) <= 2.5 and 3.0 <= policy.backoff(2) <= 5.0
    assert 7.5 <= policy.backoff(5) <= 12.5  # 32 s capped at 10 s, then jittered


def test_the_verdicts() -> None:
    policy = Policy(attempts=3, max_server_wait_s=30.0)
    forever, ten_left = Budget(), Budget(10.0, lambda: 0.0)
    assert policy.next_wait(3, None, forever) == "attempts"
    assert policy.next_wait(1, 31.0, forever) == "server_wait"  # longer than we ever sit out
    assert policy.next_wait(1, 11.0, ten_left) == "server_wait"  # longer than the time left
    assert policy.next_wait(1, 9.0, ten_left) == 9.0
    assert policy.next_wait(1, 9.5, Budget(10.0, lambda: 0.0, min_attempt_s=1.0)) == "deadline"


def test_call_retries_what_the_caller_calls_retryable_and_reports_each_wait() -> None:
    clock = FakeClock(start=0.0)
    failures = [ValueError("throttled"), ValueError("throttled")]
    heard: list[tuple[int, float]] = []

    def fn(left: float) -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    result = call(fn, retryable=lambda exc: Retry(Policy(), 2.0) if isinstance(exc, ValueError) else None,
                  budget=Budget(None, clock.monotonic), sleep=clock.sleep,
                  on_retry=lambda n, exc, wait: heard.append((n, wait)))
    assert result == "ok" and clock.sleeps == [2.0, 2.0] and heard == [(1, 2.0), (2, 2.0)]


def test_a_failure_that_is_not_retryable_is_raised_as_it_is() -> None:
    clock = FakeClock(start=0.0)

    def fn(left: float) -> None:
        raise KeyError("rejected")

    with pytest.raises(KeyError):
        call(fn, retryable=lambda exc: None, budget=Budget(None, clock.monotonic), sleep=clock.sleep)
    assert clock.sleeps == []


@pytest.mark.parametrize(("policy", "deadline", "why", "attempts"), [
    (Policy(attempts=3), None, "attempts", 3),
    (Policy(attempts=9, base_s=4.0), 5.0, "deadline", 2),  # 4 s +-25 %, then 8 s would leave no time
])
def test_why_the_retries_ended(policy: Policy, deadline: float | None, why: str, attempts: int) -> None:
    clock = FakeClock(start=0.0)
    calls: list[float] = []

    def down(left: float) -> None:
        calls.append(left)
        raise ConnectionError("down")

    with pytest.raises(GaveUp) as caught:
        call(down, retryable=lambda exc: Retry(policy), budget=Budget(deadline, clock.monotonic), sleep=clock.sleep)
    assert caught.value.why == why and caught.value.attempts == attempts == len(calls)
    assert isinstance(caught.value.last, ConnectionError) and caught.value.__cause__ is caught.value.last


def test_no_attempt_starts_without_the_time_it_needs() -> None:
    clock = FakeClock(start=0.0)
    with pytest.raises(GaveUp) as caught:
        call(lambda left: "never", retryable=lambda exc: Retry(Policy()), sleep=clock.sleep,
             budget=Budget(0.5, clock.monotonic, min_attempt_s=1.0))
    assert caught.value.why == "deadline" and caught.value.attempts == 0 and caught.value.last is None


def test_each_failure_is_retried_under_its_own_policy() -> None:
    """E.g. an unreachable endpoint gets one quick retry while throttling gets several."""
    clock = FakeClock(start=0.0)
    quick, patient = Policy(attempts=2, base_s=1.0, max_backoff_s=1.0), Policy(attempts=6, base_s=2.0)

    def refused(left: float) -> None:
        raise ConnectionRefusedError

    def retryable(exc: BaseException) -> Retry:
        return Retry(quick if isinstance(exc, ConnectionRefusedError) else patient)

    with pytest.raises(GaveUp) as caught:
        call(refused, retryable=retryable, budget=Budget(480.0, clock.monotonic), sleep=clock.sleep)
    assert caught.value.why == "attempts" and caught.value.attempts == 2 and clock.sleeps[0] <= 1.25
