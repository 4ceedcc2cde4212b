"""Shared pieces of the in-process agent bench (``agent_overhead.py``): realistic tool results and a scripted
investigation. The benches on production's path (real client and tools over HTTP) use ``agent_http``."""

from __future__ import annotations

import functools
import json
import random
from typing import Any

from agent.core.model import ModelResponse
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
    tool's own overrides (as Tool.invoke does)."""

    def __init__(self, seed: int = 7):
        self.seed = seed

    def result_json(self, name: str, arguments: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
        rng = random.Random(f"{self.seed}{name}{json.dumps(arguments, sort_keys=True)}")
        result = apply_limits(raw_result(name, arguments, rng), Limits().merged(**tool_overrides(name)))
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
