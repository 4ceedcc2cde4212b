"""The retry strategies: what the server asked for, our backoff, the stops, and why retries end."""

from __future__ import annotations

import pytest

from mcp_lib.errors import GaveUp, Retryable
from mcp_lib.retry import Budget, Policy, asked_by, call, next_wait, server_wait
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
    ({"Retry-After": "Infinity"}, None),  # not a finite number: unreadable, as "soon" is
    ({"Retry-After": "9" * 400}, None),
    ({"retry-after-ms": "nan", "Retry-After": "2"}, 2.0),
    ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1e999"}, None),
    ({"retry-after-ms": "-5", "Retry-After": "2"}, 2.0),  # a wait before now is no wait the server asked for
])
def test_server_wait_reads_what_it_can_and_never_raises(headers: dict[str, object], expected: float | None) -> None:
    wait = server_wait(headers, FakeClock(wall=NOW))
    assert wait == pytest.approx(expected) if expected is not None else wait is None


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    nth = Policy(base_s=2.0, max_backoff_s=10.0).backoff
    assert 1.5 <= nth(1) <= 2.5 and 3.0 <= nth(2) <= 5.0
    assert 7.5 <= nth(5) <= 12.5  # 32 s capped at 10 s, then jittered


def test_the_stops() -> None:
    policy = Policy(attempts=3, max_server_wait_s=30.0)
    clock = FakeClock(start=0.0)
    forever, ten_left = Budget(clock=clock), Budget(10.0, clock)
    assert next_wait(policy, forever, 3, Retryable("503")) is None  # the attempts are spent
    assert next_wait(policy, forever, 1, Retryable("429", 31.0)) is None  # longer than we ever sit out
    assert next_wait(policy, ten_left, 1, Retryable("429", 11.0)) is None  # longer than the time left
    assert next_wait(policy, ten_left, 1, Retryable("429", 9.0)) == 9.0
    assert next_wait(policy, Budget(10.0, clock, min_attempt_s=1.0), 1, Retryable("429", 9.5)) is None


def test_call_retries_what_the_caller_calls_retryable_and_reports_each_wait() -> None:
    clock = FakeClock()
    failures = [ValueError("throttled"), ValueError("throttled")]
    heard: list[tuple[int, float]] = []

    def fn(left: float) -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    result = call(fn, retry=lambda exc: isinstance(exc, ValueError), policy=Policy(), asked=lambda exc: 2.0,
                  budget=Budget(clock=clock), on_retry=lambda n, exc, wait: heard.append((n, wait)))
    assert result == "ok" and clock.sleeps == [2.0, 2.0] and heard == [(1, 2.0), (2, 2.0)]


def test_a_failure_that_is_not_retryable_is_raised_as_it_is() -> None:
    clock = FakeClock()

    def fn(left: float) -> None:
        raise KeyError("rejected")

    with pytest.raises(KeyError):
        call(fn, retry=lambda exc: False, policy=Policy(), budget=Budget(clock=clock))
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
        call(down, retry=lambda exc: True, policy=policy, budget=Budget(deadline, clock))
    assert caught.value.why == why and caught.value.attempts == attempts == len(calls)
    assert isinstance(caught.value.last, ConnectionError) and caught.value.__cause__ is caught.value.last


def test_a_server_wait_that_does_not_fit_ends_the_retries_at_once() -> None:
    clock = FakeClock(start=0.0)

    def limited(left: float) -> None:
        raise Retryable("HTTP 429", asked=20.0)

    with pytest.raises(GaveUp) as caught:
        call(limited, retry=lambda exc: True, policy=Policy(attempts=10), budget=Budget(30.0, clock))
    assert caught.value.why == "server_wait" and caught.value.asked == 20.0 and caught.value.attempts == 2
    assert clock.sleeps == [20.0] and caught.value.left == 10.0


def test_no_attempt_starts_without_the_time_it_needs() -> None:
    clock = FakeClock(start=0.0)
    with pytest.raises(GaveUp) as caught:
        call(lambda left: "never", retry=lambda exc: True, policy=Policy(),
             budget=Budget(0.5, clock, min_attempt_s=1.0))
    assert caught.value.why == "deadline" and caught.value.attempts == 0 and caught.value.last is None


def test_each_failure_is_retried_under_its_own_policy() -> None:
    """E.g. an unreachable endpoint gets one quick retry while throttling gets several."""
    clock = FakeClock(start=0.0)
    quick, patient = Policy(attempts=2, base_s=1.0, max_backoff_s=1.0), Policy(attempts=6, base_s=2.0)

    def refused(left: float) -> None:
        raise ConnectionRefusedError

    with pytest.raises(GaveUp) as caught:
        call(refused, retry=lambda exc: True, budget=Budget(480.0, clock),
             policy=lambda exc: quick if isinstance(exc, ConnectionRefusedError) else patient)
    assert caught.value.why == "attempts" and caught.value.attempts == 2 and clock.sleeps[0] <= 1.25


def test_the_wait_a_failure_carries() -> None:
    assert asked_by(Retryable("429", 3.0)) == 3.0 and asked_by(Retryable("503")) is None
    assert asked_by(ValueError("x")) is None
