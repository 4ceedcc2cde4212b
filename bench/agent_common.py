"""Shared pieces of the agent benches: realistic tool results, a scripted investigation, and a model stand-in
that bills like Bedrock's prompt cache (reads at 0.1x, writes at 1.25x, entries written at breakpoints, a hit
found at a breakpoint or up to 20 blocks before it, nothing cached below 1,024 tokens)."""

from __future__ import annotations

import functools
import hashlib
import json
import random
from typing import Any

from agent.core.messages import estimate_tokens
from agent.core.model import ModelResponse, Usage
from agent.core.scripted import Request, calls, text
from agent.core.tools import ToolOutcome
from mcp_lib.core import Limits, Result, apply_limits

WORDS = ("在庫同期", "注文取込", "楽天", "Shopify", "Yahoo!ショッピング", "API", "レート制限", "429", "CSV",
         "ジョブ", "再実行", "連携ログ", "SKU", "倉庫", "差分", "タイムアウト", "webhook", "バッチ", "設定",
         "確認しました", "原因は", "対応として", "再発防止", "お客様から", "問い合わせ", "本番環境", "ステージング")


def prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    length = 0
    while length < chars:
        out.append(rng.choice(WORDS) + rng.choice(("の", "が", "を", "で", "、", "。", " ")))
        length += len(out[-1])
    return "".join(out)[:chars]


def sized_result(name: str, arguments: dict[str, Any], rng: random.Random, chars: int) -> Result:
    """A result of about ``chars`` characters before mcp_lib's limits: 20 hits for a search, one body for a get."""
    n = int(arguments.get("n", 1))
    if "search" in name:
        items = [{"title": f"{name} hit {n}-{i}: " + prose(rng, 30), "url": f"https://example.test/{name}/{n}/{i}",
                  "snippet": prose(rng, max(50, chars // 20))} for i in range(20)]
        return Result(tool=name, items=items, total=len(items))
    return Result(tool=name, item={"title": f"{name} {n}", "url": f"https://example.test/{name}/{n}",
                                   "body": prose(rng, chars)})


def raw_result(name: str, arguments: dict[str, Any], rng: random.Random) -> Result:
    """What a platform returns before mcp_lib's limits: several KB, like the real APIs."""
    n = int(arguments.get("n", 1))
    if name.endswith("search") or name.endswith("searchMessages") or name.endswith("searchPages"):
        items = [{"title": f"{name} hit {n}-{i}: " + prose(rng, 30), "url": f"https://example.test/{name}/{n}/{i}",
                  "snippet": prose(rng, rng.randint(200, 450)), "author": "tanaka", "time": "2026-11-10 14:03"}
                 for i in range(rng.randint(15, 25))]
        return Result(tool=name, items=items, total=len(items))
    if name == "redmine_getIssue":
        journals = [{"user": f"user{j}", "created_on": f"2026-10-{j + 1:02d}",
                     "notes": prose(rng, rng.randint(150, 600))} for j in range(rng.randint(8, 16))]
        journals[2]["notes"] += "\nTraceback (most recent call last):\n" + "  at sync.worker.run\n" * 150
        return Result(tool=name, item={"id": 1000 + n, "title": f"#{1000 + n} " + prose(rng, 30),
                                       "url": f"https://redmine.example/issues/{1000 + n}",
                                       "description": prose(rng, 2500), "journals": journals})
    return Result(tool=name, item={"title": f"page {n}", "url": f"https://growi.example/page/{n}",
                                   "body": prose(rng, rng.randint(8000, 14000))})


# One realistic investigation: a few searches, then reading issues and pages, round after round.
PLAN: list[list[tuple[str, dict[str, Any]]]] = [
    [("faq_search", {"query": "在庫同期 遅延"}), ("slack_searchMessages", {"query": "在庫同期 遅い"}),
     ("redmine_search", {"query": "在庫同期"})],
    [("redmine_getIssue", {"n": 1}), ("growi_searchPages", {"query": "在庫同期 手順"})],
    [("redmine_getIssue", {"n": 2}), ("growi_getPage", {"n": 1})],
    [("github_searchCode", {"query": "stock_sync"}), ("redmine_getIssue", {"n": 3})],
    [("slack_searchMessages", {"query": "楽天 在庫 429"}), ("growi_getPage", {"n": 2})],
    [("redmine_getIssue", {"n": 4}), ("redmine_getIssue", {"n": 5})],
    [("github_searchIssues", {"query": "rate limit"}), ("growi_getPage", {"n": 3})],
    [("redmine_getIssue", {"n": 6}), ("slack_searchMessages", {"query": "stock-sync 詰まり"})],
    [("redmine_search", {"query": "再実行 手順"}), ("growi_getPage", {"n": 4})],
    [("redmine_getIssue", {"n": 7}), ("faq_search", {"query": "ジョブ 再実行"})],
]
TOOL_NAMES = sorted({name for round_ in PLAN for name, _ in round_} | {"faq_getEntry", "github_getFileContent"})


@functools.cache
def tool_overrides(wire_name: str) -> dict[str, int]:
    """The limits the real declaration of this tool sets (e.g. growi_getPage allows 20,000-character fields)."""
    from mcp_lib import Registry

    platform, _, function = wire_name.partition("_")
    tool = Registry(env={}).platforms()[platform].tools.get(function)
    return dict(tool.limit_overrides) if tool else {}


class BenchTools:
    """Tools whose results are the raw results above, passed through mcp_lib's default limits and the real
    tool's own overrides (as Tool.invoke does) -- or not (the naive approach)."""

    def __init__(self, limited: bool = True, seed: int = 7, chars: int | None = None):
        self.limited = limited
        self.seed = seed
        self.chars = chars  # every result about this many characters before the limits; None: realistic mixes

    def result_json(self, name: str, arguments: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
        rng = random.Random(f"{self.seed}{name}{json.dumps(arguments, sort_keys=True)}")
        result = raw_result(name, arguments, rng) if self.chars is None else sized_result(name, arguments, rng,
                                                                                              self.chars)
        if self.limited:
            result = apply_limits(result, Limits().merged(**tool_overrides(name)))
        return result.to_json(), result.sources()

    def schemas(self) -> list[dict[str, Any]]:
        return [{"name": name, "description": f"{name}: " + "検索して、結果を返します。" * 12
                 + " Use it when the question is about this source; read hits in full with the get tools.",
                 "input_schema": {"type": "object", "properties": {
                     "query": {"type": "string", "description": "What to look for."},
                     "n": {"type": "integer", "description": "Which one."}}}}
                for name in TOOL_NAMES]

    def guide(self) -> str:
        return "\n\n".join(f"## {p}\n概要: {p} の情報\n使用場面:\n- " + "\n- ".join(["過去の対応を確認する場合"] * 4)
                           + "\nセキュリティルール:\n- 読み取り専用" for p in ("faq", "slack", "redmine", "github",
                                                                                "growi"))

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        content, sources = self.result_json(name, arguments)
        return ToolOutcome(content, sources=sources)

    def is_read_only(self, name: str) -> bool:
        return True  # like every mcp_lib tool

    def search_calls(self, question: str) -> list[tuple[str, dict[str, Any]]]:
        return [("faq_search", {"query": question})]


def investigation(request: Request) -> ModelResponse:
    """The scripted model: follow PLAN, then answer; as the summary model, write a compact summary."""
    if request.model.endswith("summary"):
        source = request.messages[0]["content"][0]["text"]
        urls = sorted(set(part.split('"')[0] for part in source.split('"url":"')[1:]))
        url_lines = "\n".join(f"- {u}" for u in urls[:20])
        budget = int(request.max_tokens * 0.9) - len(url_lines) // 3  # a real model stops at max_tokens
        return text("- " + prose(random.Random(len(source)), min(budget, len(source) // 12)) + "\n" + url_lines)
    if request.forced or request.round > len(PLAN):
        return text("結論: " + prose(random.Random(1), 800))
    return calls(*PLAN[request.round - 1], thought="次を確認します。")


class CachingBedrock:
    """Wraps a script; reports usage the way Bedrock's prompt cache would bill it."""

    MIN_CACHEABLE = 1024

    def __init__(self, script: Any):
        self.script = script
        self.cache: set[str] = set()
        self.requests: list[Usage] = []
        self.max_prompt = 0

    @staticmethod
    def _blocks(system: list[dict[str, Any]], tools: list[dict[str, Any]], messages: list[dict[str, Any]]
                ) -> list[tuple[str, bool]]:
        out = [(json.dumps({k: v for k, v in t.items() if k != "cache_control"}, ensure_ascii=False),
                "cache_control" in t) for t in tools]
        out += [(b["text"], "cache_control" in b) for b in system]
        for message in messages:
            for index, block in enumerate(message["content"]):
                clean = {k: v for k, v in block.items() if k != "cache_control"}
                prefix = message["role"] if index == 0 else ""
                out.append((prefix + json.dumps(clean, ensure_ascii=False), "cache_control" in block))
        return out

    def create(self, request: Request) -> ModelResponse:
        system, tools, messages = request.system, request.tools, request.messages
        reply = self.script(request)
        blocks = self._blocks(system, tools, messages)
        sizes = [estimate_tokens(b) for b, _ in blocks]
        prefix_tokens, hashes, digest = [], [], hashlib.sha256()
        total = 0
        for (block, _), size in zip(blocks, sizes, strict=True):
            digest.update(block.encode())
            hashes.append(digest.hexdigest())
            total += size
            prefix_tokens.append(total)
        breakpoints = [i for i, (_, marked) in enumerate(blocks) if marked]
        hit = -1
        for bp in breakpoints:
            for j in range(bp, max(-1, bp - 21), -1):
                if hashes[j] in self.cache:
                    hit = max(hit, j)
                    break
        written_to = hit
        for bp in breakpoints:
            if bp > hit and prefix_tokens[bp] >= self.MIN_CACHEABLE:
                self.cache.add(hashes[bp])
                written_to = max(written_to, bp)
        read = prefix_tokens[hit] if hit >= 0 else 0
        write = (prefix_tokens[written_to] if written_to >= 0 else 0) - read
        usage = Usage(input_tokens=total - read - write, output_tokens=estimate_tokens(json.dumps(reply.content)),
                      cache_read_input_tokens=read, cache_creation_input_tokens=write)
        self.requests.append(usage)
        self.max_prompt = max(self.max_prompt, total)
        return ModelResponse(reply.content, reply.stop_reason, usage)


def billed_equivalent(usage: Usage) -> float:
    return usage.input_tokens + 0.1 * usage.cache_read_input_tokens + 1.25 * usage.cache_creation_input_tokens
