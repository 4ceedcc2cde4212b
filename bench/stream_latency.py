"""Streamed answers vs today's placeholder: from the model's first answer token to the first answer text in Slack.

Production's path end to end: ``helpbot answer`` (agent.slack.front.run, the real model client,
agent.core.claude) over HTTP to the Bedrock stub, which serves ``invoke-with-response-stream`` in AWS event-stream
frames at a token rate (``--chars`` per delta every ``--delay`` seconds, after ``--latency``), and to the fake
Slack, once with text streaming (chat.startStream/appendStream/stopStream) and once refusing it (today's
placeholder, updated with the whole answer; the model is then asked for whole messages, ``invoke``, which the
stub answers when the whole answer would have been generated). Figures come from the fakes' logs: when the final
response's first text delta is (or would be) sent, and the fake Slack's arrival time of the first call carrying
answer text.

    uv run python bench/stream_latency.py [--latency 1.0 --chars 4 --delay 0.05 --answer-chars 1200 --runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.slack.front import Options, run  # noqa: E402
from tests.fakes import bedrock as stub_lib  # noqa: E402
from tests.fakes.bedrock import BedrockStub  # noqa: E402
from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack, sample_workspace  # noqa: E402

FAQ_BASE = "https://github.com/acme/helpbot/blob/HEAD/faq"
SENTENCE = "在庫同期が遅れるときは、まず連携ログを確認してください。"


def responder(stub: BedrockStub, latency: float, answer_chars: int, first_tokens: list[float]) -> Any:
    """A FAQ search, then a long answer citing the first hit. Streamed, the first delta follows ``latency`` (and
    the frames before it); unstreamed (today's path asks for the whole message), the answer comes when all of it
    would have been generated. ``first_tokens``: when each response's first text delta is (or would be) sent."""

    def reply(model_id: str, body: dict[str, Any]) -> stub_lib.Reply:
        last = body["messages"][-1]["content"]
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
        if not results:
            answer = stub_lib.tool_use("faq_search", {"query": "在庫同期 遅延"}, tool_id=f"toolu_{time.time_ns()}")
        else:
            first = json.loads(results[0]["content"])["items"][0]
            text = (SENTENCE * (answer_chars // len(SENTENCE) + 1))[:answer_chars]
            answer = stub_lib.text(f"{text}\n\n[{first['title']}]({first['url']})")
        streamed = stub.requests[-1].path.endswith("invoke-with-response-stream")
        frames = stub_lib.bedrock_stream(answer[2], stub.delta_chars)
        first_tokens.append(time.monotonic() + latency + 3 * stub.delta_delay_s)  # message_start, block start, delta
        time.sleep(latency if streamed else latency + len(frames) * stub.delta_delay_s)
        return answer

    return reply


def one_run(streaming: bool, args: argparse.Namespace) -> dict[str, float]:
    ws = sample_workspace()
    ws.refuse_streaming = None if streaming else "unknown_method"
    with FakeSlack(ws) as fake, BedrockStub() as stub:
        stub.delta_chars, stub.delta_delay_s = args.chars, args.delay
        first_tokens: list[float] = []
        stub.responder = responder(stub, args.latency, args.answer_chars, first_tokens)
        env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_USER_TOKEN": USER_TOKEN, "SLACK_API_URL": fake.url,
               "HELPBOT_FAQ_BASE_URL": FAQ_BASE, "AWS_BEARER_TOKEN_BEDROCK": "bench-key",
               "ANTHROPIC_BEDROCK_BASE_URL": stub.url}
        question = ws.history("C0ECSUP")[0]
        began = time.monotonic()
        code = run(Options(channel="C0ECSUP", ts=question.ts), {**os.environ, **env})
        assert code == 0, code
        first_token = first_tokens[-1]
        if streaming:
            shown = next(r.at for r in fake.calls("chat.appendStream")
                         if any(c.get("type") == "markdown_text" for c in r.params.get("chunks", [])))
        else:
            shown = next(r.at for r in fake.calls("chat.update") if "helpbot_answer" in json.dumps(r.params))
        writes = [r for r in fake.requests if r.method.startswith(("chat.", "reactions."))]
        return {"to_first_text_s": shown - first_token, "run_s": time.monotonic() - began,
                "slack_calls": len(fake.requests), "slack_writes": len(writes)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds before the model's first token")
    parser.add_argument("--chars", type=int, default=4, help="characters per text delta")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds between deltas")
    parser.add_argument("--answer-chars", type=int, default=1200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; model: {args.latency} s to the first token, "
          f"{args.chars / args.delay:.0f} characters/s, a {args.answer_chars}-character answer")
    one_run(False, argparse.Namespace(**{**vars(args), "latency": 0.0, "delay": 0.0}))  # warm: imports, encoder
    for streaming in (True, False):
        runs = [one_run(streaming, args) for _ in range(args.runs)]
        label = "streamed" if streaming else "today (placeholder)"
        figures = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(f"{label:20s} first answer token -> first answer text in Slack: {figures['to_first_text_s']:.2f} s"
              f" (median of {args.runs}); run {figures['run_s']:.1f} s; Slack calls {figures['slack_calls']:.0f}"
              f" ({figures['slack_writes']:.0f} chat/reactions)")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
