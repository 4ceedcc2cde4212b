"""The exception tree's one line and exit code per failure; one line for any exception; HELPBOT_DEBUG a boolean."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from agent.errors import (
    BadInput,
    ConfigError,
    RunFailed,
    Terminated,
    TranscriptError,
    UsageError,
    describe_error,
    exit_code,
    exit_line,
)
from mcp_lib.logs import debugging


@pytest.mark.parametrize("exc,code,line", [
    (ConfigError("HELPBOT_MAX_ROUNDS", "must be at least 1, got 0"), 2,
     "helpbot: configuration error: HELPBOT_MAX_ROUNDS: must be at least 1, got 0"),
    (UsageError("helpbot: --ts goes with --channel"), 2, "helpbot: --ts goes with --channel"),
    (TranscriptError("helpbot: cannot read x.json"), 2, "helpbot: cannot read x.json"),
    (BadInput("helpbot: bad event"), 2, "helpbot: bad event"),
    (RunFailed("helpbot: Slack is unreachable"), 1, "helpbot: Slack is unreachable"),
    (Terminated("SIGTERM"), 130, "helpbot: interrupted"),
    (KeyboardInterrupt(), 130, "helpbot: interrupted"),
    (ValueError("bad\n  value"), 1, "helpbot: failed: ValueError: bad value"),
])
def test_each_failure_has_one_line_and_one_exit_code(exc: BaseException, code: int, line: str) -> None:
    assert exit_code(exc) == code
    assert exit_line(exc) == line
    assert "\n" not in exit_line(exc)


def test_an_unexpected_error_is_its_type_and_message_on_one_line() -> None:
    assert describe_error(OSError("connection\nreset")) == "OSError: connection reset"


def test_a_slack_api_error_is_its_code_not_its_lines_with_the_url() -> None:
    response = SlackResponse(client=None, http_verb="POST", api_url="https://slack.com/api/chat.postMessage",
                             req_args={}, data={"ok": False, "error": "msg_too_long"}, headers={}, status_code=200)
    exc = SlackApiError("The request to the Slack API failed.\n(url: https://slack.com/api/chat.postMessage)",
                        response)
    assert describe_error(exc) == "Slack API エラー（msg_too_long）"
    assert exit_line(exc) == "helpbot: failed: Slack API エラー（msg_too_long）"


@pytest.mark.parametrize("value,expected", [(None, False), ("", False), ("1", True), ("true", True),
                                            ("0", False), ("false", False), ("maybe", False)])
def test_helpbot_debug_is_a_boolean_and_empty_or_zero_is_off(value: str | None, expected: bool) -> None:
    assert debugging({} if value is None else {"HELPBOT_DEBUG": value}) is expected
