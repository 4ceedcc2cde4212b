"""Bench: the hostile inputs that were super-linear (or hung) in the code that reads the model's answer and what
peers send, each timed at a size and at four times it. Linear code grows about 4x, quadratic 16x.

    uv run python bench/hostile_inputs.py [--size 1.0]

Each case runs the production function on the input its unit test uses (the test asserts what comes out, this
bench how long it takes); ``--size`` scales every input (0.05 in tests/bench, a smoke run). Target: growth <= 8
for every case (between linear and quadratic, with room for this machine's noise). Times are also shown in
yardsticks (bench/yardstick.py) measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from agent.core.claude_stream import accumulate
from agent.faq_draft import clean_question
from agent.guard import Guard
from agent.slack.blocks import plain_fallback
from agent.slack.readback import read_answer
from agent.slack.stream import GuardedText
from agent.slack.trigger import parse_event
from mcp_lib.cutting import split_line, split_markdown
from mcp_lib.errors import BadInput
from mcp_lib.platforms.growi import _TAG_RE
from mcp_lib.redact import redact_personal, redact_secrets

TARGET_GROWTH = 8.0


def _deltas(count: int) -> Iterator[dict[str, Any]]:
    yield {"type": "message_start", "message": {"role": "assistant", "content": []}}
    yield {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    for _ in range(count):
        yield {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}}
    yield {"type": "content_block_stop", "index": 0}
    yield {"type": "message_stop"}


def _refused(text: str) -> None:
    try:
        parse_event(text)
    except BadInput:
        return
    raise AssertionError("an event cut inside a string was taken")


def _stream(words: int) -> None:
    stream = GuardedText()
    stream.feed("[")
    for _ in range(words):
        stream.feed("a ")
        stream.take()


# name -> the work for size n (n is about the input's length in characters)
CASES: dict[str, Callable[[int], object]] = {
    "cutting: spaces under a table head": lambda n: split_markdown("|a|b|\n|---" + " " * n + "x", 12_000),
    "cutting: a grapheme wider than its window": lambda n: split_line("a" + "\u0301" * n, 12_000),
    "growi: highlight tags never closed": lambda n: _TAG_RE.sub("", "<em " * (n // 4)),
    "trigger: an event cut inside a string": lambda n: _refused('{"x": "' + '\\"' * (n // 2)),
    "blocks: a fallback of unclosed links": lambda n: plain_fallback("[x](" * (n // 4)),
    "readback: spaces in an unlinked source": lambda n: read_answer([{"text": "答え", "blocks": [
        {"type": "markdown", "text": "答え\n\n**参照元**\n- 手順 " + " " * n + "書"}]}]),
    "stream: an answer that stays open": lambda n: _stream(n // 10),
    "claude_stream: one-character deltas": lambda n: accumulate(_deltas(n * 10), lambda text: None),
    "faq_draft: Slack markup left open": lambda n: clean_question("<http:" * (n // 6)),
    "guard: mentions left open": lambda n: Guard().markdown("<@U1|" * (n // 10) + "<!here|" * (n // 14)),
    "guard: links left open": lambda n: Guard().markdown("[x](" * (n // 4)),
    "guard: labels and Slack links left open": lambda n: Guard().markdown("[" * (n // 2) + "<a:|" * (n // 8)),
    "redact: a run of key characters before =": lambda n: redact_secrets("_" * n + "="),
    "redact: a run of scheme characters": lambda n: redact_secrets("a+" * (n // 2) + "://"),
    "redact: a run of e-mail characters": lambda n: redact_personal("a%" * (n // 2) + "@"),
    "redact: JWT headers glued by dashes": lambda n: redact_secrets("-eyJ" * (n // 4)),
    "redact: key values run on to a (": lambda n: redact_secrets("token=" * (n // 6) + "("),
}


def timed(case: Callable[[int], object], n: int, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        case(n)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=1.0, help="scale of every input (1.0: n = 20,000)")
    args = parser.parse_args(argv)
    from yardstick import Yardstick

    ys = Yardstick()
    n = max(int(20_000 * args.size), 40)
    failed = []
    print(f"n = {n:,} and {4 * n:,}; target: growth <= {TARGET_GROWTH}")
    for name, case in CASES.items():
        ys.sample()
        small, large = timed(case, n), timed(case, 4 * n)
        growth = large / max(small, 1e-6)
        ok = growth <= TARGET_GROWTH
        failed += [] if ok else [name]
        print(f"{'ok ' if ok else 'SLOW'} {name:45} {ys.show(large):>22}  growth {growth:5.1f}x")
    print(ys.line())
    print("all within the target" if not failed else f"over the target: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
