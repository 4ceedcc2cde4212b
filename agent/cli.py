"""``helpbot``: the subcommand table (:data:`SUBCOMMANDS`) and ``helpbot ask``. A subcommand names its functions as
``"module:function"`` strings, so a module is imported only when its subcommand runs (``helpbot --help`` imports no
SDK). Exit codes are :mod:`agent.errors`'; a traceback only with HELPBOT_DEBUG=1."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from agent.build import parse_rounds

if TYPE_CHECKING:
    from agent.core.run import Progress


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (and still exit 2)."""

    def error(self, message: str) -> NoReturn:
        from agent.errors import UsageError

        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _resolve(target: str) -> Callable[..., Any]:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    arguments: str  # "module:function" adding its arguments to the parser
    run: str  # "module:function" taking the parsed arguments, returning the exit code


SUBCOMMANDS = {c.name: c for c in (
    Subcommand("ask", "Answer a question locally (a dry run of the Slack bot; nothing is posted).",
               "agent.cli:_ask_arguments", "agent.cli:cmd_ask"),
    Subcommand("answer", "Answer a Slack message in its thread (a :help: trigger, a message link, or channel + ts).",
               "agent.slack.front:add_arguments", "agent.slack.front:main"),
    Subcommand("relay", "Serve the Slack Events relay (reaction_added -> repository_dispatch).",
               "agent.slack.relay_server:add_arguments", "agent.slack.relay_server:run_relay_command"),
    Subcommand("eval", "Run eval cases (questions, expected sources and phrases) through the agent and score them.",
               "agent.evals:add_arguments", "agent.evals:cmd_eval"),
    Subcommand("feedback", "Report 👍/👎 reactions, tools, sources and cost of helpbot's answers (optionally post it).",
               "agent.slack.feedback:add_arguments", "agent.slack.feedback:main"),
    Subcommand("doctor", "Check the configuration and every configured platform live (exit 2 when something is "
               "wrong).", "agent.doctor:add_arguments", "agent.doctor:main"),
    Subcommand("config", "Regenerate (--write) or check (--check) the configuration tables and workflow env blocks.",
               "agent.generate:add_arguments", "agent.generate:main"),
    Subcommand("faq-draft", "Turn helpbot's answers with enough 👍 into draft FAQ entries (print, --out DIR or --pr).",
               "agent.faq_draft:add_arguments", "agent.faq_draft:main"),
    Subcommand("vote", "Keep one click of an answer's 👍/👎 buttons in the answer (vote.yml runs it).",
               "agent.slack.vote:add_arguments", "agent.slack.vote:main"),
)}


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the ``selected`` subcommand's arguments are built, so no other module is imported."""
    parser = _Parser(prog="helpbot", description="Slack help bot: answers questions with sources from the "
                                                 "team's Slack, Redmine, GitHub, Growi and FAQ.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in SUBCOMMANDS.values():
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        if command.name == selected:
            _resolve(command.arguments)(sub)
        sub.set_defaults(_subcommand=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    parser = build_parser(next((a for a in args_list if not a.startswith("-")), None))
    try:
        from agent import guard  # after --help: the guard's patterns need not load for it
        from agent.errors import sigterm_raises

        with guard.installed(guard.Guard.from_env(os.environ)), guard.logging_installed(os.environ), sigterm_raises():
            args = parser.parse_args(args_list)  # --help exits here, before anything heavy is imported
            command = getattr(args, "_subcommand", None)
            if command is None:
                guard.err(parser.format_help().rstrip())
                return 2
            return _resolve(command.run)(args)
    except BaseException as exc:
        return _exit(exc)


def _exit(exc: BaseException) -> int:
    """The one exception -> exit code mapping of ``helpbot`` (:mod:`agent.errors`); one line, no traceback."""
    from agent.errors import ExitError, Terminated, exit_code, exit_line
    from mcp_lib.logs import debugging

    expected = isinstance(exc, ExitError | KeyboardInterrupt | Terminated)
    if not (expected or isinstance(exc, Exception)) or (not expected and debugging(os.environ)):
        raise exc  # SystemExit and friends; with HELPBOT_DEBUG, a bug's traceback
    from agent import guard

    guard.err(exit_line(exc))
    return exit_code(exc)


# -- helpbot ask -----------------------------------------------------------------------------------------------
def _ask_arguments(parser: argparse.ArgumentParser) -> None:
    from agent.config import DECLARED

    parser.add_argument("question", help="the question, as a user would ask it in Slack")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--max-rounds", type=parse_rounds, metavar="N",
                        help=f"tool rounds (default HELPBOT_MAX_ROUNDS or {DECLARED['HELPBOT_MAX_ROUNDS'].default})")
    parser.add_argument("--continue", dest="continue_from", metavar="FILE",
                        help="continue the conversation saved in FILE (by --save): its turns are the history")
    parser.add_argument("--save", metavar="FILE", help="save question, answer, sources and earlier turns to FILE")


def _print_progress(progress: Progress) -> None:
    from agent import guard
    from agent.report import progress_line

    if line := progress_line(progress):  # the one form of a step: defined names only, nothing in a private run
        guard.err(f"helpbot: {line}")


def cmd_ask(args: argparse.Namespace) -> int:
    from agent import guard
    from agent.build import build_agent
    from agent.errors import ModelRequestError, TranscriptError, UsageError
    from agent.saved import load_transcript, save_transcript
    from mcp_lib import Registry

    question = args.question.strip()
    if not question:
        raise UsageError("helpbot ask: the question is empty")
    try:
        history = load_transcript(args.continue_from) if args.continue_from else []
    except TranscriptError as exc:
        raise UsageError(f"helpbot ask: --continue: {exc}") from None
    if args.save and (problem := guard.unwritable(args.save)):  # before the run: its answer is paid for
        raise UsageError(f"helpbot ask: --save: cannot write {args.save!r}: {problem}")
    registry = Registry(dict(os.environ), server_log=guard.server_err)
    guard.narrow(names=guard.registry_names(registry))
    agent = build_agent(dict(os.environ), max_rounds=args.max_rounds, registry=registry, on_progress=_print_progress)
    try:
        answer = agent.run(question, history)
    except ModelRequestError as exc:
        guard.err(f"helpbot: {exc}")
        return 1
    guard.narrow(hosts=[h for s in answer.consulted if (h := guard.host_of(str(s.get("url") or "")))])
    if args.json:
        guard.out(json.dumps(guard.current().metadata(answer.to_json()), ensure_ascii=False, indent=2))
    else:
        from agent.report import print_answer

        print_answer(answer)
    if args.save:  # after printing: a file that became unwritable meanwhile costs the file, not the answer
        try:
            save_transcript(args.save, question, answer, history)
        except TranscriptError as exc:
            raise UsageError(f"helpbot ask: --save: {exc}") from None
    return 0


def console() -> NoReturn:
    """The ``helpbot`` command: :func:`main`, then what a normal exit runs (threads joined, ``atexit``, streams
    flushed) and ``os._exit`` -- skipping the interpreter's teardown of every module, about a second of CPU after
    an answer. An exception out of main ends the usual way."""
    code = main()
    import atexit
    import threading

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: as the interpreter does when it cannot flush at exit
            code = code or 120
    os._exit(code)


if __name__ == "__main__":
    console()
