"""How a ``helpbot answer`` run ends, told the same way every time: the log line, the trace event, the job
summary, what an answer prints, and the exit code (0 answered or ignored, 1 failed, 2 rejected or misconfigured,
130 cancelled). Everyone with the repository reads the records, so a private channel's run keeps its question,
answer and channel name out of them (and, through :mod:`agent.guard`, everything the model chose).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from agent import errors, guard
from agent.report import Trace, failure_line, print_answer, summary_markdown, write_summary
from agent.slack.post import log
from mcp_lib.cutting import squash_whitespace

if TYPE_CHECKING:
    from agent.core.run import Answer
    from agent.slack.handle import Slack
    from agent.slack.reply import ThreadReply


@dataclass
class Target:
    """Where the answer goes, and who may read what of it."""

    where: str  # for the summary (no name for a private channel)
    slack: Slack | None = None  # None: a free question answered without Slack (printed)
    reply: ThreadReply | None = None  # helpbot's messages in the thread; None: nothing is posted
    public: bool = True  # may the question and the answer appear in summary, log and trace?
    dry_run: bool = False


class Outcomes:
    def __init__(self, env: Mapping[str, str], trace: Trace, *, json_output: bool):
        self.env, self.trace, self.json_output = env, trace, json_output

    def rejected(self, why: str) -> int:
        log(why)
        return self._ended("rejected", "rejected the trigger (nothing posted)", errors.EXIT_BAD_INPUT, why, reason=why)

    def ignored(self, why: str, where: str | None = None) -> int:
        log(f"ignored: {why}")
        return self._ended("ignored", "ignored (nothing posted)", errors.EXIT_OK, why, where, reason=why)

    def config_error(self, exc: errors.ConfigError) -> int:
        guard.err(errors.exit_line(exc))
        return self._ended("config_error", "configuration error", errors.exit_code(exc), str(exc), error=str(exc))

    def interrupted(self) -> int:
        log("interrupted")
        return self._ended("interrupted", "interrupted (nothing posted)", errors.exit_code(errors.Terminated()))

    def failed_before_reply(self, what: str, where: str | None) -> int:
        log(what)
        return self._ended("error", "failed (nothing posted)", errors.EXIT_FAILED, what, where, error=what)

    def _ended(self, event: str, status: str, code: int, detail: str | None = None, where: str | None = None,
               **fields: str) -> int:
        self.trace.front(event, **fields)
        write_summary(self.env, summary_markdown(status=status, question=None, where=where, detail=detail))
        return code

    def failed(self, exc: BaseException, what: str, target: Target, asked: str | None) -> None:
        """A run that met ``exc`` after its thread was known (the notice is the reply's)."""
        question = asked if target.public else None
        write_summary(self.env, summary_markdown(status="failed", question=question, where=target.where, detail=what))
        if isinstance(exc, errors.ConfigError):
            guard.err(errors.exit_line(exc))
        elif isinstance(exc, errors.Terminated | KeyboardInterrupt):
            log("interrupted")
        else:
            log(failure_line(what))  # no error text in a private run

    def answered(self, answer: Answer, link: str | None, target: Target, asked: str | None, show_answer: bool) -> int:
        self.trace.front("done", rounds=answer.rounds, degraded=answer.degraded, stop=answer.stop, link=link)
        status = "answered" if target.reply is not None else "answered (not posted)"
        shown = target.public and (show_answer or target.reply is None)
        write_summary(self.env, summary_markdown(status=status, question=asked if target.public else None,
                                                 where=target.where, answer=answer, link=link, show_answer=shown))
        self._print(answer, link, target)
        return errors.EXIT_OK

    def _print(self, answer: Answer, link: str | None, target: Target) -> None:
        """The answer on stdout (with --json, or when it was not posted); never a private channel's in Actions."""
        wanted = self.json_output or link is None
        if wanted and not target.public and self.env.get("GITHUB_ACTIONS") == "true":
            log("dry run: answer withheld (private channel)" if target.dry_run
                else "answer withheld from the log (private channel)")
        elif self.json_output:
            guard.out(json.dumps(guard.current().metadata({**answer.to_json(), "permalink": link}),
                                 ensure_ascii=False, indent=2))
        elif link is None:
            print_answer(answer)
        if link:
            log(f"answered: {link}")
        elif target.dry_run:
            log("dry run: nothing was posted")


class Failure(NamedTuple):
    """What a failure means for the thread and the process."""

    what: str  # for people, in one line (the notice in the thread, the log)
    code: int  # the exit code
    reraise: bool  # after the notice: SystemExit and friends, and bugs under HELPBOT_DEBUG


def classify(exc: BaseException, *, debug: bool = False) -> Failure:
    code = errors.exit_code(exc)
    if isinstance(exc, errors.ConfigError):
        return Failure(f"設定エラー: {exc}", code, False)
    if isinstance(exc, errors.Terminated | KeyboardInterrupt):
        return Failure("実行が中断されました", code, False)
    if isinstance(exc, errors.ModelRequestError):
        return Failure(squash_whitespace(f"AI モデルがリクエストを受け付けませんでした: {exc}"), code, debug)
    if isinstance(exc, Exception):
        return Failure(errors.describe_error(exc), code, debug)
    return Failure(type(exc).__name__, code, True)
