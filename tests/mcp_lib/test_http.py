"""The shared retry policy and answer helpers of mcp_lib.http, on their own."""

from __future__ import annotations

import httpx
import pytest

from mcp_lib.core import ToolError
from mcp_lib.http import RetryableError, call_with_retries, error_detail, retrying, server_wait
from tests.fakes.github import Clock

NOW = 1_800_000_000.0


@pytest.mark.parametrize(("headers", "expected"), [
    ({"Retry-After": "7"}, 7.0),
    ({"retry-after": "Thu, 15 Jan 2027 08:00:10 GMT"}, 1_800_000_010.0 - NOW + 0.0),
    ({"Retry-After": "soon"}, None),
    ({"Retry-After": "Mon, 99 Foo 2025 99:99:99 GMT"}, None),
    ({"Retry-After": "   "}, None),
    ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 12)}, 12.0),
    ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "later"}, None),
    ({}, None),
])
def test_server_wait_reads_what_it_can_and_never_raises(headers: dict[str, str], expected: float | None) -> None:
    wait = server_wait(headers, NOW)
    assert wait == pytest.approx(expected) if expected is not None else wait is None


def test_a_wait_longer_than_the_time_left_stops_instead_of_retrying_early() -> None:
    clock = Clock(start=NOW)
    attempts = []

    def limited() -> None:
        attempts.append(clock.now)
        raise RetryableError("HTTP 429", wait=20.0)

    policy = retrying(sleep=clock.sleep, clock=clock.time, attempts=10, budget_s=600, deadline=NOW + 30)
    with pytest.raises(ToolError, match="asks to wait 20 s, more than the 10 s left"):
        call_with_retries(limited, policy, "Service")
    assert clock.sleeps == [20.0] and len(attempts) == 2


def test_backoff_of_our_own_is_shortened_to_the_time_left() -> None:
    clock = Clock(start=NOW)

    def down() -> None:
        raise RetryableError("HTTP 503")

    policy = retrying(sleep=clock.sleep, clock=clock.time, attempts=10, base_s=4, deadline=NOW + 5)
    with pytest.raises(ToolError, match="unavailable after retries"):
        call_with_retries(down, policy, "Service")
    assert sum(clock.sleeps) == pytest.approx(5.0)


@pytest.mark.parametrize(("body", "expected"), [
    ({"message": "Validation Failed", "errors": [{"message": "cannot be searched", "code": "invalid"}]},
     " (Validation Failed; cannot be searched)"),
    ({"ok": False, "error": "SearchService is not reachable."}, " (SearchService is not reachable.)"),
    ({"errors": ["Page is not found"]}, " (Page is not found)"),
    ({"errors": [{"code": "missing_field"}]}, " (missing_field)"),
    (["a list"], ""),
])
def test_error_detail_reads_github_growi_and_redmine_bodies(body: object, expected: str) -> None:
    assert error_detail(httpx.Response(400, json=body)) == expected
    assert error_detail(httpx.Response(502, text="<html>bad gateway</html>")) == ""
