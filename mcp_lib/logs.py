"""The one door for Python logging: every record, ours and every library's (httpx, slack_sdk, botocore, mcp log
what they were handed: URLs, a model's argument), warnings and thread exceptions too, is rendered onto stderr
through an egress policy (helpbot's guard, or mcp-lib's :class:`Masking`)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from .config import ConfigError, env_bool
from .cutting import MASK_MARGIN
from .redact import Masker

LINE_CHARS = 1000  # of one record's line; masked within it and MASK_MARGIN past it (no secret straddles the cut)
LEVEL = logging.WARNING  # library records below it are dropped
WITHHELD = "details withheld"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,79}")  # a logger's name as code spells it; any other: "logger"
_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"})


class Egress(Protocol):
    """What the handler needs of a policy: masking, and whether nothing derived from content may leave."""

    @property
    def private(self) -> bool: ...

    def text(self, text: str) -> str: ...


@dataclass(frozen=True)
class Masking:
    """mcp_lib's policy: secrets, cards, personal data and the exact ``values`` given masked; never private."""

    masker: Masker
    private: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Masking:
        from .external import credential_values

        return cls(Masker(personal=True, cards=True, values=credential_values(env)))

    def text(self, text: str) -> str:
        return self.masker.mask(text)


def debugging(env: Mapping[str, str]) -> bool:
    """``HELPBOT_DEBUG`` set true (empty is unset; a malformed value is no debugging)."""
    try:
        return env_bool(env, "HELPBOT_DEBUG")
    except ConfigError:
        return False


class GuardedHandler(logging.Handler):
    """Renders each record through the policy ``egress()`` returns at that moment (a run may narrow it) onto
    ``stream()`` (looked up per record: a redirected stderr is honoured)."""

    def __init__(self, egress: Callable[[], Egress], *, withheld: str = WITHHELD, debug: bool = False,
                 stream: Callable[[], object] = lambda: sys.stderr) -> None:
        super().__init__(LEVEL)  # also for a library that lowered its own logger's level
        self._egress, self._withheld, self._debug, self._stream = egress, withheld, debug, stream
        self._private = False  # once a run was private, so is every later record (a server's late shutdown line)
        self._withheld_for: set[str] = set()  # in a private run, one line per logger and level: a count is a channel

    def render(self, record: logging.LogRecord) -> str | None:
        """``name LEVEL: message`` masked; in a private run the withheld phrase, once per logger and level."""
        policy = self._egress()
        name = record.name if _NAME.fullmatch(record.name or "") else "logger"
        head = f"{name} {record.levelname if record.levelname in _LEVELS else 'LOG'}: "
        self._private = self._private or policy.private
        if self._private:
            if head in self._withheld_for:
                return None
            self._withheld_for.add(head)
            return head + self._withheld
        try:
            message = record.getMessage()
        except Exception:  # a library's bad format arguments: its words are not worth a traceback
            message = str(record.msg)
        # only what may be kept is masked: a megabyte message (a server echoing a model's argument) costs a line's
        line = " ⏎ ".join(policy.text((head + message)[: LINE_CHARS + MASK_MARGIN]).splitlines())[:LINE_CHARS]
        if not self._debug:
            return line
        trace = "".join(traceback.format_exception(*record.exc_info)) if record.exc_info else ""
        extra = [text for text in (trace, record.stack_info) if text]
        return "\n".join([line, *(policy.text(text).rstrip("\n") for text in extra)])

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # not logging's handleError: it prints the record unguarded
            line = self.render(record)
            if line is not None:
                stream = self._stream()
                stream.write(line + "\n")  # type: ignore[attr-defined]
                stream.flush()  # type: ignore[attr-defined]


def _thread_exception(hook: threading.ExceptHookArgs) -> None:
    if hook.exc_type is not SystemExit:
        logging.getLogger("threading").error("uncaught exception in a thread: %s", hook.exc_type.__name__,
                                             exc_info=hook.exc_value)


def _unraisable(hook: object) -> None:
    exc = getattr(hook, "exc_value", None)
    logging.getLogger("unraisable").error("unraisable exception: %s", type(exc).__name__,
                                          exc_info=exc if isinstance(exc, BaseException) else None)


@contextlib.contextmanager
def installed(egress: Callable[[], Egress], *, withheld: str = WITHHELD, env: Mapping[str, str] | None = None,
              stream: Callable[[], object] = lambda: sys.stderr) -> Iterator[GuardedHandler]:
    """The root logger's one handler for the block (library loggers' own handlers removed, warnings and thread
    exceptions routed to it); what was there before is restored after."""
    handler = GuardedHandler(egress, withheld=withheld, debug=debugging(os.environ if env is None else env),
                             stream=stream)
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, threading.excepthook, sys.unraisablehook)
    removed = [(logger, own) for logger in list(logging.Logger.manager.loggerDict.values())
               if isinstance(logger, logging.Logger) for own in logger.handlers
               if not isinstance(own, logging.NullHandler)]  # e.g. boto3.set_stream_logger's: writes around us
    for logger, own in removed:
        logger.removeHandler(own)
    root.handlers = [handler]
    root.setLevel(LEVEL)
    threading.excepthook, sys.unraisablehook = _thread_exception, _unraisable
    with warnings.catch_warnings():
        logging.captureWarnings(True)
        try:
            yield handler
        finally:
            logging.captureWarnings(False)
            root.handlers, threading.excepthook, sys.unraisablehook = saved[0], saved[2], saved[3]
            root.setLevel(saved[1])
            for logger, own in removed:
                logger.addHandler(own)
