"""Bench: the time our own code spends per round (the loop, the token economy's estimates, clearing and cache marks,
tool dispatch in threads, result blocks, sources, trace), on production's path. Target: < 20 ms per round.

The real Agent with the real Bedrock client over HTTP to the stub (no latency) and the real mcp_lib Growi and
GitHub tools over HTTP to the fakes (``agent_http``). What is subtracted: the time inside the model client's
``create`` (the client, HTTP and the stub) and the wall time during which at least one tool call was running (the
tools' own HTTP, decoding, cut, masking and limits: mcp_lib's time, measured by ``mask_large_result.py`` and
``agent_parallel.py``). Beside it, the CPU the loop's own thread used outside the model client (``thread_time``:
no other thread's work and no wait in it, so it moves with the core's speed, not with the load). Two plans: the
token bench's 10 rounds of 21 calls with 20 KB bodies, and 10 rounds of 16 different calls each on 20 KB bodies
(160 results; the heavy case of issue 14).

Each figure is printed beside the yardstick (``yardstick.py``, sampled before every run) as a ratio to it, and the
target is judged at the yardstick's reference speed.

    uv run python bench/agent_overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

from agent_http import MAIN, REPO, BillingStub, Knowledge, calls, forced, main_rounds, real_tools
from agent_tokens import QUESTION, plan
from yardstick import Yardstick

from agent.core.loop import Agent
from agent.core.model import ModelResponse, Request
from agent.core.tools import ToolOutcome

Plan = list[list[tuple[str, dict[str, Any]]]]


class Timed:
    """Wraps the injected model and tool executor and records where their time went."""

    def __init__(self, model: Any, tools: Any):
        self.model, self.tools = model, tools
        self.model_s = 0.0
        self.model_cpu_s = 0.0  # this thread's CPU inside create (the client's encoding and decoding)
        self.intervals: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def create(self, request: Request) -> ModelResponse:
        began, cpu = time.perf_counter(), time.thread_time()
        try:
            return self.model.create(request)
        finally:
            self.model_s += time.perf_counter() - began
            self.model_cpu_s += time.thread_time() - cpu

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        began = time.perf_counter()
        try:
            return self.tools.call(name, arguments)
        finally:
            with self.lock:
                self.intervals.append((began, time.perf_counter()))

    def __getattr__(self, name: str) -> Any:  # schemas, guide, is_read_only, search_calls: the tools' own
        return getattr(self.tools, name)

    def tools_s(self) -> float:
        """The wall time during which at least one tool call ran (the union of the calls' intervals)."""
        total, end = 0.0, float("-inf")
        for began, ended in sorted(self.intervals):
            if ended > end:
                total += ended - max(began, end)
                end = ended
        return total


def heavy_plan(k: Knowledge) -> Plan:
    """10 rounds of 16 different reads: 8 issues and 8 pages per round."""
    return [[("github_getIssue", {"repo": REPO, "number": 8 * n + i + 1}) for i in range(8)]
            + [("growi_getPage", {"pageId": k.page_ids[8 * n + i]}) for i in range(8)] for n in range(10)]


def one_run(k: Knowledge, rounds: Plan) -> tuple[float, float, int]:
    """Our wall time and our CPU (the loop's thread, outside the model client) per request, and the rounds."""
    def script(model_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        n = main_rounds(body)
        if model_id != MAIN or forced(body) or n > len(rounds):
            return [{"type": "text", "text": "結論: 429 のレート制限による再実行待ちです。"}]
        return calls(n, rounds[n - 1])

    with BillingStub(script, 0.0) as stub, real_tools(k, 0.0) as tools:
        timed = Timed(stub.model(), tools)
        agent = Agent(timed, timed)
        began, cpu = time.perf_counter(), time.thread_time()
        answer = agent.run(QUESTION)
        ours = time.perf_counter() - began - timed.model_s - timed.tools_s()
        ours_cpu = time.thread_time() - cpu - timed.model_cpu_s
    assert answer.rounds == len(rounds) and not any(c.is_error for c in answer.tool_calls), answer.tool_calls
    return ours / (answer.rounds + 1), ours_cpu / (answer.rounds + 1), answer.rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    ys = Yardstick()
    failed = False
    for name, knowledge, make in (("21 calls, 20 KB bodies", Knowledge(chars=20_000), plan),
                                  ("16 calls per round, 20 KB bodies", Knowledge(chars=20_000, pages=80, issues=80),
                                   heavy_plan)):
        rounds = make(knowledge)
        one_run(knowledge, rounds)  # warm up imports and the fakes
        samples, cpu = [], []
        for _ in range(args.runs):
            ys.sample()
            wall, used, _ = one_run(knowledge, rounds)
            samples.append(wall)
            cpu.append(used)
        median = statistics.median(samples)
        late = ys.at_reference(max(samples)) >= 0.020
        failed |= late
        print(f"{name}: our time per round over {len(rounds)} tool rounds + the answer ({args.runs} runs): "
              f"median {ys.show(median)} ({ys.at_reference(median) * 1000:.1f} ms at the reference speed), "
              f"max {ys.show(max(samples))} -> target < 20 ms: {'FAIL' if late else 'PASS'}; the loop thread's "
              f"CPU outside the model client: median {statistics.median(cpu) * 1000:.1f} ms")
    print(ys.line())
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
