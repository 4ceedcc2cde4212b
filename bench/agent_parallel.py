"""Bench: one round of three CPU-heavy tools takes <= 1.3x the round of one (issue "Honest benches").

Each tool is the real ``growi_getPage`` (mcp_lib: the HTTP client, JSON decoding, the platform's cut, masking,
the limits) reading a different 5 MB page (Japanese text with a secret every ~2 KB) over HTTP from the fake
Growi, which answers after ``--tool-latency`` seconds; the model is the real Bedrock client over HTTP to the
stub (``--latency`` per request). The round is timed from the loop's "tools" progress to the next "thinking"
(the tools' wall time, the agent's own work on the results included, no model request). The fake's answers are
rendered once beforehand, so the server side of this process spends no CPU on JSON while the round runs.

The same rounds are also timed with no tool latency: then the ratio is the CPU alone, which the GIL serializes
across the round's threads -- what is left to make small. Because the latency is fixed in seconds while the CPU
part moves with the machine's speed, the ratio with latency depends on the machine: every time is printed beside
the yardstick (``yardstick.py``, sampled before each run), and the ratio at the yardstick's reference speed is
derived from the CPU-alone rounds scaled to it (latency + CPU part at the reference, three against one).
The process keeps freed memory as ``build_agent`` sets it (:func:`agent.build.hold_freed_memory`);
``--glibc-defaults`` measures the allocator as it was before.

    uv run python bench/agent_parallel.py [--latency 1.0] [--tool-latency 0.3] [--runs 3] [--glibc-defaults]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import httpx2
from agent_http import BillingStub, calls, delayed, forced, main_rounds
from mask_large_result import TEXT
from yardstick import Yardstick

from agent.build import hold_freed_memory
from agent.core.loop import Agent
from agent.core.run import Progress
from agent.core.tools import RegistryTools
from mcp_lib.registry import Registry
from tests.fakes.github import serve
from tests.fakes.growi import FakeGrowi


def rendered(handler: Any) -> Any:
    """The fake's answers, each rendered once (the bench times the client side, not the fake's JSON)."""
    done: dict[str, tuple[int, bytes, list[tuple[str, str]]]] = {}

    def answer(request: httpx2.Request) -> httpx2.Response:
        key = str(request.url)
        if key not in done:
            response = handler(request)
            done[key] = (response.status_code, response.read(), [(k, v) for k, v in response.headers.items()
                                                                 if k.lower() != "content-length"])
        status, content, headers = done[key]
        return httpx2.Response(status, content=content, headers=headers)

    return answer


def round_seconds(registry: Registry, stub: BillingStub, page_ids: list[str]) -> float:
    marks: dict[str, float] = {}

    def progress(p: Progress) -> None:
        marks.setdefault(f"{p.phase}{p.round}", time.perf_counter())

    answer = Agent(stub.model(), RegistryTools(registry), on_progress=progress).run(f"在庫 {len(page_ids)}")
    assert answer.rounds == 1 and not any(c.is_error for c in answer.tool_calls), answer.tool_calls
    return marks["thinking2"] - marks["tools1"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per model request (stub)")
    parser.add_argument("--tool-latency", type=float, default=0.3, help="seconds per Growi answer")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--glibc-defaults", action="store_true", help="leave the allocator as glibc starts it")
    args = parser.parse_args()
    if not args.glibc_defaults:
        hold_freed_memory()
    growi = FakeGrowi(token="bench-growi-token")
    page_ids = [growi.add_page(f"/ログ/巨大/{n}", TEXT) for n in range(3)]
    wanted: list[list[str]] = []

    def script(model_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        if forced(body) or main_rounds(body) > 1:
            return [{"type": "text", "text": "結論: ログの通りです。"}]
        return calls(1, [("growi_getPage", {"pageId": pid}) for pid in wanted[-1]])

    print(f"growi_getPage of a {len(TEXT):,}-character page, over HTTP; model latency {args.latency} s; "
          f"median of {args.runs} runs; allocator: {'glibc defaults' if args.glibc_defaults else 'as build_agent'}")
    ys = Yardstick()
    alone: dict[int, float] = {}
    for latency in (args.tool_latency, 0.0):
        times: dict[int, float] = {}
        with BillingStub(script, args.latency) as stub, serve(delayed(rendered(growi.handler), latency)) as url:
            env = {"GROWI_URL": url, "GROWI_ACCESS_TOKEN": growi.token}
            registry = Registry(env=env, platforms={"growi": Registry(env=env).builtin_platforms()["growi"]})
            for pid in page_ids:  # render the answers, warm the client and the imports
                registry.call("growi_getPage", {"pageId": pid})
            for n in (1, 3):
                samples = []
                for _ in range(args.runs):
                    ys.sample()
                    wanted.append(page_ids[:n])
                    samples.append(round_seconds(registry, stub, page_ids[:n]))
                times[n] = statistics.median(samples)
        ratio = times[3] / times[1]
        if not latency:
            alone = times
        print(f"  tool latency {latency:.2f} s: one tool {ys.show(times[1])}, three tools {ys.show(times[3])} = "
              f"{ratio:.2f}x one{'' if latency else ' (CPU alone)'}")
    at_ref = {n: args.tool_latency + ys.at_reference(t) for n, t in alone.items()}
    ratio = at_ref[3] / at_ref[1]
    print(f"  at the reference speed (derived: {args.tool_latency:.2f} s + the CPU-alone round scaled): one "
          f"{at_ref[1]:.3f} s, three {at_ref[3]:.3f} s = {ratio:.2f}x one -> target <= 1.3x: "
          f"{'PASS' if ratio <= 1.3 else 'FAIL'}")
    print(ys.line())


if __name__ == "__main__":
    main()
