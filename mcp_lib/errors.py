"""Every exception of mcp_lib, and the exit code an entry point gives each; helpbot's tree (agent/errors.py)
builds on :class:`ExitError`, because mcp_lib imports nothing from agent.

    ExitError              1    an error that is explained in one line (no traceback)
    ├── BadInput           2    bad input: the command line, a file, an event
    └── ConfigError        2    bad configuration (:mod:`mcp_lib.config`): names the variable, never its value
    ToolError                   a failure the model hears about: a tool's ``status: "error"`` result
    ├── CredentialsError        the service rejected our credentials (the CLI exits 2 on it)
    ├── Refused                 a credential would go to an origin its door does not allow; nothing was sent
    ├── NotFound                Redmine answered 404 (or the key's user may not see the thing)
    ├── Redirected              Redmine redirected to another path (a moved wiki page), ``path``
    ├── ChannelNotFound         Slack does not know the channel (or will not say)
    └── RateLimited             Slack still answered 429 after the retries, asking to wait ``retry_after`` s
    ArgumentError               arguments that do not fit a tool's schema
    UnknownTool (KeyError)      no such platform or tool
    Retryable                   a failure worth another try, after ``asked`` seconds (:mod:`mcp_lib.retry`)
    GaveUp                      the retries ended without success (:mod:`mcp_lib.retry`)
"""

from __future__ import annotations

from typing import ClassVar, Literal

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

Why = Literal["attempts", "server_wait", "deadline"]  # why the retries ended


class ExitError(Exception):
    exit_code: ClassVar[int] = EXIT_FAILED


class BadInput(ExitError):
    exit_code = EXIT_BAD_INPUT


class ConfigError(ExitError):
    exit_code = EXIT_BAD_INPUT

    def __init__(self, variable: str, problem: str):
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


class ToolError(Exception):
    """A failure the model should hear about (not found, rate limited, forbidden by a rule)."""


class CredentialsError(ToolError):
    """The service rejected our credentials: a configuration problem (the CLI exits 2 on it)."""


class Refused(ToolError):
    """A request that would carry a credential to an origin its door does not allow; it was not sent."""


class NotFound(ToolError):
    """Redmine answered 404 (or the key's user may not see the thing)."""


class Redirected(ToolError):
    def __init__(self, path: str):
        super().__init__(f"Redmine redirected the request to {path}")
        self.path = path


class ChannelNotFound(ToolError):
    """Slack does not know the channel (or will not say): answered like a channel the rules refuse."""


class RateLimited(ToolError):
    def __init__(self, message: str, retry_after: float | None):
        super().__init__(message)
        self.retry_after = retry_after


class ArgumentError(Exception):
    """Arguments that do not fit the tool's schema."""


class UnknownTool(KeyError):
    def __str__(self) -> str:  # the message (listing what exists), not KeyError's repr of it
        return str(self.args[0])


class Retryable(Exception):
    def __init__(self, message: str, asked: float | None = None):
        super().__init__(message)
        self.asked = asked


class GaveUp(Exception):
    """The retries ended without success: ``why``, after ``attempts`` attempts; ``last`` is the last failure
    (None when the budget left no time for the next attempt), ``asked`` the server's wait, ``left`` the time left."""

    def __init__(self, why: Why, attempts: int, last: BaseException | None, asked: float | None, left: float):
        super().__init__(f"{why}: {last}" if last else why)
        self.why, self.attempts, self.last, self.asked, self.left = why, attempts, last, asked, left


def exit_code(exc: BaseException) -> int:
    """The exit code an exception means: its own for an ExitError, 130 when interrupted, else 1."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    code = getattr(exc, "exit_code", None)  # ExitError, and subclass trees that build on it
    return code if isinstance(code, int) else EXIT_FAILED
