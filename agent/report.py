"""What a run leaves behind for people -- the terminal output, the Actions job summary and the trace file (written as
the run goes, so a killed run keeps what it had) -- all through the egress guard (:mod:`agent.guard`). A private run
leaves no detail the model chose, only where and how it ended (:data:`agent.guard.PRIVATE_RUN`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agent import guard
from mcp_lib.config import env_str
from mcp_lib.cutting import shorten_at_word, squash_whitespace

if TYPE_CHECKING:
    from agent.core.run import Answer, Progress
    from mcp_lib.clock import Clock

def print_answer(answer: Answer) -> None:
    """The answer, its sources, why the run degraded (if it did) and the footer (rounds, tools, tags, tokens,
    estimated cost, seconds), as a person reads them."""
    lines = [answer.text]
    if answer.sources:
        lines.append("\nSources:")
        lines += [f"  {number}. {source['title']}\n     {source['url']}"
                  for number, source in enumerate(answer.sources, 1)]
    lines.append("")
    if answer.degraded and answer.error:
        lines.append(f"— why not AI-generated: {squash_whitespace(answer.error)}")
    u = answer.usage
    tokens = (f"tokens in {u.input_tokens:,} (cache read {u.cache_read_input_tokens:,}, write "
              f"{u.cache_creation_input_tokens:,}) out {u.output_tokens:,}")
    head = "— degraded: not AI-generated · " if answer.degraded else "— "
    tags = f"tags {', '.join(answer.tags)} · " if answer.tags else ""
    lines.append(f"{head}rounds {answer.rounds} · tools {len(answer.tool_calls)} ({tools_line(answer)}) · {tags}"
                 f"{tokens} · est. ${answer.cost_usd:.4f} · {answer.seconds:.1f} s")
    guard.out("\n".join(lines))


def progress_line(progress: Progress) -> str | None:
    """A step in the log: the round and the registered tool names; nothing in a private run (the model's choice
    of rounds and tools is a channel it could write bits into)."""
    g = guard.current()
    return None if g.private else replace(progress, tools=[g.name(t) for t in progress.tools]).line()


def failure_line(what: str) -> str:
    """A failed run in the log: why, but not in a private run (a tool's or the endpoint's text may echo it)."""
    return f"failed ({guard.PRIVATE_RUN})" if guard.current().private else f"failed: {what}"


class Trace:
    """JSON lines to ``HELPBOT_TRACE_FILE`` as they happen, each through :meth:`agent.guard.Guard.event` (in a
    private run one ``withheld`` event, then only how it ended)."""

    def __init__(self, path: str | None, clock: Clock):
        self.path, self.clock, self.started = path, clock, clock.monotonic()
        self._broken = self._withheld = False

    def front(self, kind: str, **data: Any) -> None:
        self.write({"t": round(self.clock.monotonic() - self.started, 3), "event": f"front.{kind}", **data})

    def write(self, event: Mapping[str, Any]) -> None:
        if not self.path or self._broken:
            return
        kept = guard.current().event(event)
        if kept is None:
            if self._withheld:
                return
            self._withheld = True
            kept = {"event": "withheld", "detail": guard.PRIVATE_RUN}
        try:
            guard.append(self.path, json.dumps(kept, ensure_ascii=False, default=str) + "\n")
        except OSError as exc:
            self._broken = True
            guard.err(f"helpbot: cannot write the trace to {self.path}: {exc.strerror or exc}")


def _md_quote(text: str, limit: int) -> str:
    return shorten_at_word(squash_whitespace(text), limit).replace("|", "\\|") or "(empty)"


def write_summary(env: Mapping[str, str], markdown: str) -> None:
    """Append to the Actions job summary (``$GITHUB_STEP_SUMMARY``), when there is one."""
    path = env_str(env, "GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        guard.append(path, markdown.rstrip() + "\n", rendered=True)
    except OSError as exc:
        guard.err(f"helpbot: cannot write the job summary to {path}: {exc.strerror or exc}")


def tools_line(answer: Answer) -> str:
    used = Counter(guard.current().name(call.name) for call in answer.tool_calls)  # names helpbot defined only
    return ", ".join(f"{name}×{n}" if n > 1 else name for name, n in used.items()) or "none"


def summary_markdown(*, status: str, question: str | None, where: str | None, answer: Answer | None = None,
                     link: str | None = None, detail: str | None = None, show_answer: bool = False) -> str:
    """The job summary: what was asked, what happened and what it took; for a private run where and how it ended."""
    lines = [f"## helpbot: {status}", ""]
    if where:
        lines.append(f"- **Where:** {where}")
    if guard.current().private:
        question = detail = answer = None
        lines.append(f"- **Details:** {guard.PRIVATE_RUN}")
    if question is not None:
        lines.append(f"- **Question:** {_md_quote(guard.markdown(question), 300)}")
    if detail:
        lines.append(f"- **Detail:** {_md_quote(guard.markdown(detail), 500)}")
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
        lines += ["", "### Answer", "", answer.text]  # rendered: the door guards it
        if answer.sources:
            lines += ["", "Sources:"] + [f"- [{s['title']}]({s['url']})" for s in answer.sources]
    return "\n".join(lines)
