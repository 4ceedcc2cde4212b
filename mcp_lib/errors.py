"""The errors mcp_lib's entry points turn into one line and an exit code; helpbot's tree (agent/errors.py) is
built on this base, because mcp_lib imports nothing from agent.

    ExitError        1    an error that is explained in one line (no traceback)
    ├── BadInput     2    bad input: the command line, a file, an event
    └── ConfigError  2    bad configuration (:mod:`mcp_lib.config`): names the variable, never its value
"""

from __future__ import annotations

from typing import ClassVar

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class ExitError(Exception):
    """An error with a one-line message and the exit code it means."""

    exit_code: ClassVar[int] = EXIT_FAILED


class BadInput(ExitError):
    """Malformed input (command line, file, event): one line, exit 2, nothing done."""

    exit_code = EXIT_BAD_INPUT


def exit_code(exc: BaseException) -> int:
    """The exit code an exception means: its own for an ExitError, 130 when interrupted, else 1."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    code = getattr(exc, "exit_code", None)  # ExitError, and subclass trees that build on it
    return code if isinstance(code, int) else EXIT_FAILED
