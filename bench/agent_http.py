"""Production's path for the agent benches: the real Bedrock client (``agent.core.claude.Claude``) over HTTP to
the local Bedrock stub, and the real mcp_lib tools (Registry -> Tool.invoke: the platform's cut, masking,
limits) over HTTP to the Growi and GitHub fakes of ``tests/fakes``, each answer delayed by a configurable latency.

The stub bills like Bedrock's prompt cache, as far as we know its rules (api-notes, Anthropic's caching guide):
an entry is written at each ``cache_control`` breakpoint whose prefix has at least 1,024 tokens; a request reads
the longest entry found at one of its breakpoints or up to 20 blocks before it; reads count 0.1x, writes 1.25x;
the prefix is tools -> system -> messages, and a different ``tool_choice`` misses every message entry (tools and
system still hit). Token counts are helpbot's own pessimistic estimate (1.5 per Japanese character), not
Claude's tokenizer, so the loop's calibration stays at 1. The 5-minute TTL never expires within a bench run.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx2  # noqa: E402

from agent.core.claude import Claude, ModelConfig, build_model  # noqa: E402
from agent.core.settings import Settings  # noqa: E402
from agent.core.tokens import estimate_tokens  # noqa: E402
from agent.core.tools import RegistryTools  # noqa: E402
from mcp_lib.registry import Registry  # noqa: E402
from tests.fakes.bedrock import BedrockStub, error, message  # noqa: E402
from tests.fakes.github import FakeGitHub, serve  # noqa: E402
from tests.fakes.growi import FakeGrowi  # noqa: E402

MAIN, SUMMARY = Settings().model, Settings().summary_model
REPO = "acme/shop-sync"
MIN_CACHEABLE = 1024
LOOKBACK_BLOCKS = 20


@dataclass
class Billing:
    """What the stub billed, per model."""

    requests: dict[str, int] = field(default_factory=dict)
    input: dict[str, int] = field(default_factory=dict)  # uncached input tokens
    read: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    output: dict[str, int] = field(default_factory=dict)
    prompt: dict[str, int] = field(default_factory=dict)  # what the requests would count uncached
    peak: int = 0

    def add(self, model: str, **counts: int) -> None:
        for name, value in counts.items():
            book = getattr(self, name)
            book[model] = book.get(model, 0) + value


def _blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The request as (text, has a breakpoint) in cache order: tools, system, then each message's blocks; the
    tool_choice is part of every message block's key."""
    out = [(json.dumps({k: v for k, v in t.items() if k != "cache_control"}, ensure_ascii=False),
            "cache_control" in t) for t in body.get("tools") or []]
    system = body.get("system") or []
    out += [(b["text"], "cache_control" in b) for b in ([{"text": system}] if isinstance(system, str) else system)]
    choice = json.dumps(body.get("tool_choice"), sort_keys=True)
    for m_index, msg in enumerate(body["messages"]):
        content = msg["content"] if isinstance(msg["content"], list) else [{"type": "text", "text": msg["content"]}]
        for index, block in enumerate(content):
            clean = {k: v for k, v in block.items() if k != "cache_control"}
            prefix = (choice if m_index == 0 and index == 0 else "") + (msg["role"] if index == 0 else "")
            out.append((prefix + json.dumps(clean, ensure_ascii=False), "cache_control" in block))
    return out


class CacheModel:
    """Bedrock's prompt cache as a set of prefix hashes (one per model)."""

    def __init__(self) -> None:
        self.entries: set[str] = set()

    def bill(self, model: str, body: dict[str, Any]) -> tuple[int, int, int, int]:
        """(uncached input, read, written, total) tokens of this request."""
        blocks = _blocks(body)
        hashes, totals, digest, total = [], [], hashlib.sha256(model.encode()), 0
        for text, _ in blocks:
            digest.update(text.encode())
            hashes.append(digest.hexdigest())
            total += estimate_tokens(text)
            totals.append(total)
        total += 4 * len(body["messages"])
        breakpoints = [i for i, (_, marked) in enumerate(blocks) if marked]
        hit = -1
        for bp in breakpoints:
            for j in range(bp, max(-1, bp - LOOKBACK_BLOCKS - 1), -1):
                if hashes[j] in self.entries:
                    hit = max(hit, j)
                    break
        written_to = hit
        for bp in breakpoints:
            if bp > hit and totals[bp] >= MIN_CACHEABLE:
                self.entries.add(hashes[bp])
                written_to = max(written_to, bp)
        read = totals[hit] if hit >= 0 else 0
        written = (totals[written_to] if written_to >= 0 else 0) - read
        return total - read - written, read, written, total


Script = Callable[[str, dict[str, Any]], list[dict[str, Any]]]


class BillingStub:
    """The Bedrock stub answering from ``script(model_id, body)`` after ``latency_s``, billing like the cache."""

    def __init__(self, script: Script, latency_s: float):
        self.script = script
        self.latency_s = latency_s
        self.caches: dict[str, CacheModel] = {}
        self.billing = Billing()
        self.stub = BedrockStub()
        self.stub.responder = self._respond

    def _respond(self, model_id: str, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        time.sleep(self.latency_s)
        marks = sum(marked for _, marked in _blocks(body))
        if marks > 4:  # what Bedrock answers
            return error(400, "ValidationException", f"A maximum of 4 blocks with cache_control may be provided. "
                                                     f"Found {marks}.")
        content = self.script(model_id, body)
        uncached, read, written, total = self.caches.setdefault(model_id, CacheModel()).bill(model_id, body)
        output = estimate_tokens(json.dumps(content, ensure_ascii=False))
        b = self.billing
        b.add(model_id, requests=1, input=uncached, read=read, written=written, output=output, prompt=total)
        b.peak = max(b.peak, total) if model_id == MAIN else b.peak
        stop = "tool_use" if any(c["type"] == "tool_use" for c in content) else "end_turn"
        return message(content, stop, {"input_tokens": uncached, "output_tokens": output,
                                       "cache_read_input_tokens": read, "cache_creation_input_tokens": written})

    def model(self) -> Claude:
        config = ModelConfig(provider="bedrock", model=MAIN, summary_model=SUMMARY, region="ap-northeast-1",
                             base_url=self.stub.url, bearer_token="bench-bedrock-key", request_timeout_s=120.0)
        return build_model(config)

    def __enter__(self) -> BillingStub:
        self.stub.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stub.__exit__(*exc)


# -- the text of pages and issues ------------------------------------------------------------------------------
WORDS = ("在庫同期", "注文取込", "楽天", "Shopify", "Yahoo!ショッピング", "API", "レート制限", "429", "CSV",
         "ジョブ", "再実行", "連携ログ", "SKU", "倉庫", "差分", "タイムアウト", "webhook", "バッチ", "設定",
         "確認しました", "原因は", "対応として", "再発防止", "お客様から", "問い合わせ", "本番環境", "ステージング")


def prose(rng: random.Random, chars: int) -> str:
    """``chars`` characters of Japanese-looking support prose."""
    out: list[str] = []
    length = 0
    while length < chars:
        out.append(rng.choice(WORDS) + rng.choice(("の", "が", "を", "で", "、", "。", " ")))
        length += len(out[-1])
    return "".join(out)[:chars]


# -- the knowledge behind the tools ------------------------------------------------------------------------------
def delayed(handler: Callable[[httpx2.Request], httpx2.Response], latency_s: float
            ) -> Callable[[httpx2.Request], httpx2.Response]:
    def answer(request: httpx2.Request) -> httpx2.Response:
        time.sleep(latency_s)
        return handler(request)

    return answer


@dataclass
class Knowledge:
    """Growi pages and GitHub issues (and one source file) whose bodies are ``chars`` characters each (of
    ``text``, or generated prose)."""

    chars: int
    text: str | None = None
    pages: int = 6
    issues: int = 8
    seed: int = 7
    growi: FakeGrowi = field(init=False)
    github: FakeGitHub = field(init=False)
    page_ids: list[str] = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        body = (lambda: self.text[:self.chars]) if self.text is not None else (lambda: prose(rng, self.chars))
        self.growi = FakeGrowi(token="bench-growi-token")
        self.page_ids = [self.growi.add_page(f"/手順/在庫同期/{n}", "在庫同期 手順 遅延 再実行 詰まり\n"
                                             + body()) for n in range(1, self.pages + 1)]
        ticks = itertools.count()
        self.github = FakeGitHub(token="bench-github-token", clock=lambda: 1_800_000_000.0 + 60 * next(ticks))
        self.github.add_repo(REPO)
        for n in range(1, self.issues + 1):
            self.github.add_issue(REPO, f"在庫同期 遅延 #{n}", "在庫同期 429 rate limit\n" + body(),
                                  comments=(prose(rng, min(2000, self.chars)),))
        self.github.add_file(REPO, "src/stock_sync.py", "# stock_sync\n" + "def sync(): pass  # 在庫同期\n"
                             * max(1, self.chars // 30))


@contextlib.contextmanager
def real_tools(knowledge: Knowledge, latency_s: float, env: dict[str, str] | None = None) -> Iterator[RegistryTools]:
    """The Growi and GitHub platforms of mcp_lib, configured like production (plus ``env``), against the served
    fakes."""
    with serve(delayed(knowledge.growi.handler, latency_s)) as growi_url, \
            serve(delayed(knowledge.github.handler, latency_s)) as github_url:
        env = {**(env or {}), "GROWI_URL": growi_url, "GROWI_ACCESS_TOKEN": knowledge.growi.token,
               "GITHUB_TOKEN": knowledge.github.token, "GITHUB_API_URL": github_url, "HELPBOT_GITHUB_REPOS": REPO}
        registry = Registry(env=env)
        builtin = registry.builtin_platforms()
        registry = Registry(env=env, platforms={name: builtin[name] for name in ("growi", "github")})
        yield RegistryTools(registry)


def main_rounds(body: dict[str, Any]) -> int:
    """Which round the request is for: the assistant turns so far, plus one."""
    return 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")


def forced(body: dict[str, Any]) -> bool:
    return (body.get("tool_choice") or {}).get("type") == "none"


def calls(round_: int, wanted: list[tuple[str, dict[str, Any]]], thought: str = "次を確認します。"
          ) -> list[dict[str, Any]]:
    return [{"type": "text", "text": thought}] + [
        {"type": "tool_use", "id": f"toolu_bench_{round_:02d}_{i}", "name": name, "input": arguments}
        for i, (name, arguments) in enumerate(wanted)]


def summary_reply(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A compact summary that keeps the URLs it was given, at most the request's max_tokens."""
    source = body["messages"][0]["content"][0]["text"]
    urls = sorted({part.split('"')[0] for part in source.split('"url":"')[1:]})[:20]
    url_lines = "\n".join(f"- {u}" for u in urls)
    budget = int(body["max_tokens"] * 0.9) - len(url_lines) // 3
    return [{"type": "text", "text": "- " + prose(random.Random(len(source)), min(budget, len(source) // 12))
             + "\n" + url_lines}]
