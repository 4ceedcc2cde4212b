"""Every exception of helpbot, and the exit code each one means (mapped once per entry point: ``helpbot`` in
:func:`agent.cli.main`, ``mcp-lib`` in :func:`mcp_lib.cli.main`; the relay's Lambda answers HTTP statuses).

    ExitError (mcp_lib.errors)      1    explained in one line, never a traceback
    ├── BadInput (mcp_lib.errors)   2    malformed input: an event file, a trigger, a value
    │   ├── UsageError              2    the command line (argparse and option checks)
    │   └── TranscriptError         2    a saved conversation (``--continue``/``--save``)
    ├── ConfigError (mcp_lib.errors) 2   bad configuration: names the variable, never its value
    └── RunFailed                   1    the run could not finish (Slack unreachable, ...)
        └── DispatchError           1    the relay: GitHub did not accept repository_dispatch
    ModelError                           the model could not give a response
    ├── ModelUnavailable                 throttled, overloaded or unreachable: the run degrades
    └── ModelRequestError                the request was rejected: retrying cannot help
    StatusError                          the model's service refused one attempt (status, type, message)
    Truncated                            a streamed response ended before message_stop
    Unreadable                           a file helpbot does not read (the reason, for the context)
    Terminated (BaseException)    130    SIGTERM (a cancelled Actions job), like Ctrl-C

mcp_lib cannot import agent, so the root and the exit-2 classes are mcp_lib's (with the tools' errors)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator, Mapping
from typing import Any

from mcp_lib.cutting import squash_whitespace
from mcp_lib.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, BadInput, ConfigError, ExitError, exit_code

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "BadInput", "ConfigError", "DispatchError",
           "ExitError", "ModelError", "ModelRequestError", "ModelUnavailable", "RunFailed", "StatusError", "Terminated",
           "TranscriptError", "Truncated", "Unreadable", "UsageError", "describe_error", "exit_code", "exit_line",
           "sigterm_raises", "slack_error_code"]

EXIT_OK = 0


class UsageError(BadInput):
    """Bad input on the command line: one line, exit 2."""


class TranscriptError(BadInput):
    """A saved conversation that cannot be read or written."""


class RunFailed(ExitError):
    """A failure helpbot can explain in one line (exit 1)."""


class DispatchError(RunFailed):
    """GitHub did not accept the repository_dispatch; ``retryable``: trying again may help (5xx, 429, timeouts),
    after ``asked`` seconds when GitHub said how long."""

    def __init__(self, message: str, *, retryable: bool = False, asked: float | None = None):
        super().__init__(message)
        self.retryable, self.asked = retryable, asked


class ModelError(Exception):
    """The model could not give a response."""


class ModelUnavailable(ModelError):
    """Throttled, overloaded or unreachable even after retries: the run degrades instead of failing.
    ``out_of_time``: the deadline, not the attempts, ended the retries (the final answer still gets its time)."""

    def __init__(self, message: str, out_of_time: bool = False):
        super().__init__(message)
        self.out_of_time = out_of_time


class ModelRequestError(ModelError):
    """The request was rejected (bad request, credentials, permissions): retrying cannot help."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class Unreadable(Exception):
    """A file helpbot does not read; the message is the reason, in the context's language."""


class Terminated(BaseException):
    """SIGTERM (a cancelled or timed-out Actions job): still leave a notice in the thread. A BaseException, so
    that no ``except Exception`` on the way swallows it."""

    exit_code = EXIT_INTERRUPTED


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` once (a second one, while the notice is posted, is ignored): the run
    ends through its ``finally`` blocks and ``atexit``, so nothing it started outlives it."""
    fired = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal fired
        if not fired:
            fired = True
            raise Terminated("the run was cancelled (SIGTERM)")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def slack_error_code(exc: BaseException) -> str:
    """The ``error`` of a Slack API error's response (``msg_too_long``), else "unknown error"."""
    data = getattr(getattr(exc, "response", None), "data", None)
    return str(data.get("error") or "unknown error") if isinstance(data, dict) else "unknown error"


def describe_error(exc: BaseException) -> str:
    """An exception in one line for a log or a person: a Slack API error by its code (its text is several lines
    with the API URL), any other by its type and message, whitespace squashed."""
    from slack_sdk.errors import SlackApiError

    if isinstance(exc, SlackApiError):
        return f"Slack API エラー（{slack_error_code(exc)}）"
    return f"{type(exc).__name__}: {squash_whitespace(str(exc))}"


def exit_line(exc: BaseException) -> str:
    """The one line ``helpbot`` leaves on stderr for a failure that ends it."""
    if isinstance(exc, KeyboardInterrupt | Terminated):
        return "helpbot: interrupted"
    if isinstance(exc, ConfigError):
        return f"helpbot: configuration error: {exc}"
    if isinstance(exc, ExitError):
        return str(exc)
    return f"helpbot: failed: {describe_error(exc)}"


class StatusError(Exception):
    """The service refused: the HTTP status (or the one a stream's error stands for), error type, message, headers."""

    def __init__(self, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(f"HTTP {status} {kind}: {message}")
        self.status, self.kind, self.message, self.headers = status, kind, message, headers or {}


class Truncated(Exception):
    """The stream ended before ``message_stop`` (a reset, a proxy cutting it): what arrived is not the message."""
