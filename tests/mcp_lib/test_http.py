"""The shared retry policy and answer helpers of mcp_lib.http, on their own."""

from __future__ import annotations

import httpx
import pytest

from mcp_lib.core import ToolError
from mcp_lib.http import RetryableError, call_with_retries, error_detail, retrying
from tests.fakes.github import Clock

NOW = 1_800_000_000.0


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


def test_backoff_of_our_own_never_sleeps_into_the_deadline() -> None:
    clock = Clock(start=NOW)

    def down() -> None:
        raise RetryableError("HTTP 503")

    policy = retrying(sleep=clock.sleep, clock=clock.time, attempts=10, base_s=4, deadline=NOW + 5)
    with pytest.raises(ToolError, match="unavailable after retries"):
        call_with_retries(down, policy, "Service")
    # 4 s +-25 %, then the second backoff (8 s +-25 %) would leave no time for an attempt: stop instead of waiting
    assert len(clock.sleeps) == 1 and 3.0 <= clock.sleeps[0] < 5.0


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
