"""Bench: a 5 MB tool result through mcp_lib's real path (Registry -> Tool.invoke: validation, the platform's own
cut, JSON-safe copy, cut-then-mask, the limits), and the CPU cost of three such tools in one round.

    uv run python bench/mask_large_result.py [--runs 5]

Cases:
- *growi page*: growi_getPage of a 5 MB page (Japanese text with secrets every ~2 KB), over the fake Growi
  (httpx MockTransport: the real client and JSON decoding of the 5 MB answer are included);
- *one 5 MB field*, *2,000 items of 2.5 KB*: a registered tool returning that value, so the time is mcp_lib's
  alone (no transport);
- *the old way*: ``redact_secrets`` over the whole 5 MB, as mcp_lib did before it cut first (for comparison).
- *three tools in parallel*: three growi_getPage calls of 5 MB each in a thread pool of three, against one alone
  (issue "Honest benches": <= 1.3x one). Masking holds the GIL, so this ratio shows how much CPU is left per call.

Targets (issue "Honest benches"): a 5 MB result through mcp_lib in <= 0.2 s. Times are wall-clock medians of
``--runs`` runs on this machine (``time.perf_counter``); the first, warming, run is not counted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp_lib.core import Platform, Result, ToolContext  # noqa: E402
from mcp_lib.platforms import growi  # noqa: E402
from mcp_lib.redact import redact_secrets  # noqa: E402
from mcp_lib.registry import Registry  # noqa: E402
from tests.fakes.growi import FakeGrowi  # noqa: E402

SIZE = 5_000_000
CHUNK = ("在庫同期ログ 2026-11-10T10:00:00 stock-sync job=4711 status=running 担当 taro@example.com "
         "password=hunter2hunter2 token ghp_fakefakefake1234 を確認。" * 20)
TEXT = (CHUNK * (SIZE // len(CHUNK) + 1))[:SIZE]
ENV = {"GROWI_URL": "https://wiki.example.test", "GROWI_ACCESS_TOKEN": "bench-token"}


def growi_registry() -> tuple[Registry, str]:
    fake = FakeGrowi(token=ENV["GROWI_ACCESS_TOKEN"], url=ENV["GROWI_URL"])
    fake.add_page("/ログ/巨大", TEXT)
    config = growi.load_config(ENV)
    assert config is not None
    registry = Registry(env=ENV, clients={"growi": growi.make_client(config, transport=fake.transport())},
                        platforms={"growi": growi.PLATFORM})
    page_id = next(pid for pid, page in fake.pages.items() if page["path"] == "/ログ/巨大")
    return registry, page_id


def returning(value: Any) -> Registry:
    """A registry whose one tool returns ``value``: the cost measured is mcp_lib's own."""
    platform = Platform(name="bench", overview="bench", scenes=[], security_rules=[],
                        load_config=lambda env: object(), make_client=lambda config: None)

    @platform.tool()
    def dump(ctx: ToolContext) -> Any:
        """Return the prepared value."""
        return value

    return Registry(env={}, platforms={"bench": platform})


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    fn()  # warm up (imports, regex compilation, first-call caches)
    times, out = [], None
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def check(result: Result) -> str:
    dumped = result.to_json()
    assert result.status == "ok", result.message
    assert "hunter2hunter2" not in dumped and "ghp_fakefakefake" not in dumped, "a secret passed"
    return f"{len(dumped):,} characters out"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    registry, page_id = growi_registry()
    field = returning({"url": "https://example.test/dump", "title": "dump", "text": TEXT})
    items = returning([{"url": f"https://example.test/{n}", "title": f"row {n}", "text": TEXT[:2500]}
                       for n in range(SIZE // 2500)])
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("growi page, 5 MB body (fake Growi over MockTransport)",
         lambda: registry.call("growi_getPage", {"pageId": page_id})),
        ("one 5 MB field (registered tool, no transport)", lambda: field.call("bench_dump", {})),
        ("2,000 items of 2.5 KB (registered tool, no transport)", lambda: items.call("bench_dump", {})),
    ]
    print(f"{SIZE:,} characters, median of {runs} runs")
    one = 0.0
    for label, fn in cases:
        seconds, result = timed(fn, runs)
        one = one or seconds
        print(f"  {label}: {seconds:.3f} s ({check(result)})")
    seconds, _ = timed(lambda: redact_secrets(TEXT), max(1, runs // 2))
    print(f"  the old way, redact_secrets over the whole 5 MB: {seconds:.3f} s")

    def three() -> list[Result]:
        with ThreadPoolExecutor(max_workers=3) as pool:
            return list(pool.map(lambda _: registry.call("growi_getPage", {"pageId": page_id}), range(3)))

    seconds, results = timed(three, runs)
    for result in results:
        check(result)
    print(f"  three growi pages of 5 MB in one round (3 threads): {seconds:.3f} s = {seconds / one:.2f}x one")


if __name__ == "__main__":
    main()
