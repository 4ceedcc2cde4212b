"""``helpbot``: one function per subcommand, registered in a table.

To add a subcommand, either write ``def _x_arguments(parser)`` and ``def cmd_x(args) -> int`` here and decorate
the latter with ``@subcommand("x", "help", _x_arguments)``, or keep both in your own module and add one line to
``SUBCOMMANDS`` with ``"module:function"`` strings (see ``register``): that module is then imported only when
its subcommand is used. Heavy SDKs are never imported at module level here: ``helpbot --help`` must start in
well under half a second.

Exit codes: 0 done, 1 the run failed (e.g. the model rejected the request), 2 bad input or configuration
(one line naming the problem), 130 interrupted. Never a traceback (unless HELPBOT_DEBUG=1).
"""

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


def _resolve(target: Callable[..., Any] | str) -> Callable[..., Any]:
    if callable(target):
        return target
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


@dataclass
class Subcommand:
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None] | str  # or "module:function"
    run: Callable[[argparse.Namespace], int] | str  # or "module:function"

    def handler(self) -> Callable[[argparse.Namespace], int]:
        return _resolve(self.run)


SUBCOMMANDS: dict[str, Subcommand] = {}


def register(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None] | str,
             run: Callable[[argparse.Namespace], int] | str) -> None:
    """``register("relay", "Serve the Slack Events relay.", "agent.slack.relay:add_arguments", "…:main")``"""
    SUBCOMMANDS[name] = Subcommand(name, help, arguments, run)


def subcommand(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]
               ) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    def decorate(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        register(name, help, arguments, fn)
        return fn

    return decorate


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
        return _main(parser, args_list)
    except BaseException as exc:
        return _exit(exc)


def _main(parser: argparse.ArgumentParser, args_list: list[str]) -> int:
    from agent import guard  # after --help: the guard's patterns need not load for it
    from agent.errors import sigterm_raises

    with guard.installed(guard.Guard.from_env(os.environ)), guard.logging_installed(os.environ), sigterm_raises():
        args = parser.parse_args(args_list)  # --help exits here, before anything heavy is imported
        command = getattr(args, "_subcommand", None)
        if command is None:
            guard.err(parser.format_help().rstrip())
            return 2
        return command.handler()(args)


def _exit(exc: BaseException) -> int:
    """The one exception -> exit code mapping of ``helpbot`` (:mod:`agent.errors`); one line, no traceback."""
    from agent.errors import HelpbotError, Terminated, debugging, exit_code, exit_line

    expected = isinstance(exc, HelpbotError | KeyboardInterrupt | Terminated)
    if not (expected or isinstance(exc, Exception)) or (not expected and debugging(os.environ)):
        raise exc  # SystemExit and friends; with HELPBOT_DEBUG, a bug's traceback
    from agent import guard

    guard.err(exit_line(exc))
    return exit_code(exc)


# -- helpbot ask -----------------------------------------------------------------------------------------------
def _ask_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the question, as a user would ask it in Slack")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--max-rounds", type=parse_rounds, metavar="N", help="tool rounds (default HELPBOT_MAX_ROUNDS "
                                                                        "or 10)")
    parser.add_argument("--continue", dest="continue_from", metavar="FILE",
                        help="continue the conversation saved in FILE (by --save): its turns are the history")
    parser.add_argument("--save", metavar="FILE", help="save question, answer, sources and earlier turns to FILE")


def _print_progress(progress: Progress) -> None:
    from dataclasses import replace

    from agent import guard

    progress = replace(progress, tools=[guard.current().name(t) for t in progress.tools])  # defined names only
    guard.err(f"helpbot: {progress.line()}")


@subcommand("ask", "Answer a question locally (a dry run of the Slack bot; nothing is posted).", _ask_arguments)
def cmd_ask(args: argparse.Namespace) -> int:
    from agent.errors import UsageError

    question = args.question.strip()
    if not question:
        raise UsageError("helpbot ask: the question is empty")
    from agent.core.model import ModelRequestError
    from agent.errors import TranscriptError
    from agent.saved import load_transcript, save_transcript

    try:
        history = load_transcript(args.continue_from) if args.continue_from else []
    except TranscriptError as exc:
        raise UsageError(f"helpbot ask: --continue: {exc}") from None
    if args.save:
        _check_writable(args.save)  # before the run: its answer is paid for
    from agent import guard
    from agent.build import build_agent
    from mcp_lib import Registry

    registry = Registry(dict(os.environ), server_log=guard.server_err)
    guard.narrow(names=guard.registry_names(registry))
    agent = build_agent(dict(os.environ), max_rounds=args.max_rounds, registry=registry,
                        on_progress=_print_progress)
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


def _check_writable(path: str) -> None:
    """A --save file that cannot be written is one line and exit 2, before anything is asked."""
    from agent import guard
    from agent.errors import UsageError

    if problem := guard.unwritable(path):
        raise UsageError(f"helpbot ask: --save: cannot write {path!r}: {problem}")


register("answer", "Answer a Slack message in its thread (a :help: trigger, a message link, or channel + ts).",
         "agent.slack.front:add_arguments", "agent.slack.front:main")


register("relay", "Serve the Slack Events relay (reaction_added -> repository_dispatch).",
         "agent.slack.relay_server:add_arguments", "agent.slack.relay_server:run_relay_command")
register("eval", "Run eval cases (questions, expected sources and phrases) through the agent and score them.",
         "agent.evals:add_arguments", "agent.evals:cmd_eval")
register("feedback", "Report 👍/👎 reactions, tools, sources and cost of helpbot's answers (optionally post it).",
         "agent.slack.feedback:add_arguments", "agent.slack.feedback:main")
register("doctor", "Check the configuration and every configured platform live (exit 2 when something is wrong).",
         "agent.doctor:add_arguments", "agent.doctor:main")
register("config", "Regenerate (--write) or check (--check) the configuration tables and workflow env blocks.",
         "agent.generate:add_arguments", "agent.generate:main")
register("faq-draft", "Turn helpbot's answers with enough 👍 into draft FAQ entries (print, --out DIR or --pr).",
         "agent.faq_draft:add_arguments", "agent.faq_draft:main")


def console() -> NoReturn:
    """The ``helpbot`` command: :func:`main`, then what a normal exit runs (``atexit``: MCP sessions closed, logging
    flushed; non-daemon threads joined), the streams flushed, and the process ends with main's exit code -- without
    the interpreter's teardown of every module, which after an answer costs about a second of the runner's CPU
    for nothing (``anthropic`` alone is 3,000 modules). An exception out of main (``--help``'s SystemExit, a bug
    under HELPBOT_DEBUG) ends the usual way."""
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
