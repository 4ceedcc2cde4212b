"""What a run leaves behind for people: the terminal output, the Actions job summary and the trace file.

``helpbot ask`` and ``helpbot answer`` print the same way; the trace (JSON lines, secrets masked) and the job
summary are written as the run goes, so a killed run still leaves what it had.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agent.slack.blocks import guard_public
from agent.slack.split import cut
from mcp_lib.config import env_str
from mcp_lib.redact import redact_deep

if TYPE_CHECKING:
    from agent.core.run import Answer

SUMMARY_QUESTION_CHARS = 300


def footer(answer: Answer) -> str:
    """One line: rounds, tools used, tags, tokens, estimated cost, seconds."""
    u = answer.usage
    tokens = (f"tokens in {u.input_tokens:,} (cache read {u.cache_read_input_tokens:,}, write "
              f"{u.cache_creation_input_tokens:,}) out {u.output_tokens:,}")
    head = "degraded: not AI-generated · " if answer.degraded else ""
    tags = f"tags {', '.join(answer.tags)} · " if answer.tags else ""
    return (f"{head}rounds {answer.rounds} · tools {len(answer.tool_calls)} ({tools_line(answer)}) · {tags}{tokens} · "
            f"est. ${answer.cost_usd:.4f} · {answer.seconds:.1f} s")


def print_answer(answer: Answer) -> None:
    """The answer, its sources, why the run degraded (if it did) and the footer, as a person reads them."""
    print(answer.text)
    if answer.sources:
        print("\nSources:")
        for number, source in enumerate(answer.sources, 1):
            print(f"  {number}. {source['title']}\n     {source['url']}")
    print()
    if answer.degraded and answer.error:
        print(f"— why not AI-generated: {' '.join(answer.error.split())}")
    print(f"— {footer(answer)}")


class Trace:
    """JSON lines to ``HELPBOT_TRACE_FILE`` as they happen (a killed run keeps what it had); secrets masked."""

    def __init__(self, path: str | None, clock: Callable[[], float]):
        self.path = path
        self.clock = clock
        self.started = clock()
        self._file: Any = None
        self._broken = False

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def front(self, kind: str, **data: Any) -> None:
        self.write({"t": round(self.clock() - self.started, 3), "event": f"front.{kind}", **data})

    def write(self, event: Mapping[str, Any]) -> None:
        if not self.path or self._broken:
            return
        try:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 -- held for the whole run
            self._file.write(json.dumps(redact_deep(dict(event)), ensure_ascii=False, default=str) + "\n")
            self._file.flush()
        except OSError as exc:
            self._broken = True
            print(f"helpbot: cannot write the trace to {self.path}: {exc.strerror or exc}", file=sys.stderr)


def _md_quote(text: str, limit: int) -> str:
    return cut(" ".join(text.split()), limit).replace("|", "\\|") or "(empty)"


def write_summary(env: Mapping[str, str], markdown: str) -> None:
    """Append to the Actions job summary (``$GITHUB_STEP_SUMMARY``), when there is one."""
    path = env_str(env, "GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(markdown.rstrip() + "\n")
    except OSError as exc:
        print(f"helpbot: cannot write the job summary to {path}: {exc.strerror or exc}", file=sys.stderr)


def tools_line(answer: Answer) -> str:
    used = Counter(call.name for call in answer.tool_calls)
    return ", ".join(f"{name}×{n}" if n > 1 else name for name, n in used.items()) or "none"


def summary_markdown(*, status: str, question: str | None, where: str | None, answer: Answer | None = None,
                     link: str | None = None, detail: str | None = None, show_answer: bool = False) -> str:
    """The job summary: what was asked, what happened, and what it took."""
    lines = [f"## helpbot: {status}", ""]
    if where:
        lines.append(f"- **Where:** {where}")
    if question is not None:
        lines.append(f"- **Question:** {_md_quote(guard_public(question), SUMMARY_QUESTION_CHARS)}")
    if detail:
        lines.append(f"- **Detail:** {_md_quote(guard_public(detail), 500)}")
    if answer is not None:
        u = answer.usage
        lines += [
            f"- **Rounds:** {answer.rounds} · **Tools:** {len(answer.tool_calls)} ({tools_line(answer)})"
            + (f" · **Tags:** {', '.join(answer.tags)}" if answer.tags else "")
            + (" · **degraded** (not AI-generated)" if answer.degraded else ""),
            f"- **Tokens:** in {u.input_tokens:,} · out {u.output_tokens:,} · cache read "
            f"{u.cache_read_input_tokens:,} · cache write {u.cache_creation_input_tokens:,}",
            f"- **Est. cost:** ${answer.cost_usd:.4f} · {answer.seconds:.1f} s · stop: {answer.stop}",
        ]
    if link:
        lines.append(f"- **Answer:** [{link}]({link})")
    if show_answer and answer is not None:
        lines += ["", "### Answer", "", guard_public(answer.text)]
        if answer.sources:
            lines += ["", "Sources:"] + [f"- [{s['title']}]({s['url']})" for s in answer.sources]
    return "\n".join(lines)
