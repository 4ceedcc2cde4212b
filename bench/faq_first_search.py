"""The first FAQ search of a process with the semantic leg: the encoder loaded by the search itself, or prefetched
(as ``helpbot answer`` does right after 👀, mcp_lib.platforms.faq.semantic.prefetch) while a stand-in for the Slack
reads and the first model request passes (``--meanwhile`` seconds).

Needs the semantic extra (``uv sync --extra semantic``); times are printed beside the yardstick (bench/yardstick.py).
Each variant runs in new processes with a warm FAQ cache
(index and vectors in a temporary HELPBOT_FAQ_CACHE_DIR), so only the encoder's load differs.

    uv run --extra semantic python bench/faq_first_search.py [--runs 5] [--meanwhile 1.5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

from yardstick import Yardstick

CHILD = r"""
import json, sys, time
prefetch, meanwhile, cache = sys.argv[1] == "1", float(sys.argv[2]), sys.argv[3]
from mcp_lib import Registry
from mcp_lib.platforms.faq import semantic
env = {"HELPBOT_FAQ_SEMANTIC": "on", "HELPBOT_FAQ_CACHE_DIR": cache}
if prefetch:
    semantic.prefetch(env)
time.sleep(meanwhile)  # Slack's reads and the first model request
registry = Registry(env=env)
began = time.perf_counter()
registry.call("faq_search", {"query": "在庫同期が遅れる"})
first = time.perf_counter() - began
began = time.perf_counter()
registry.call("faq_search", {"query": "CSV import error"})
print(json.dumps({"first": first, "second": time.perf_counter() - began}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--meanwhile", type=float, default=1.5)
    args = parser.parse_args()
    ys = Yardstick()
    with tempfile.TemporaryDirectory() as cache:
        def once(prefetch: bool) -> dict[str, float]:
            done = subprocess.run([sys.executable, "-c", CHILD, "1" if prefetch else "0", str(args.meanwhile), cache],
                                  capture_output=True, text=True, check=True)
            return json.loads(done.stdout)

        once(False)  # warm the index and vector cache
        for prefetch in (False, True):
            runs = []
            for _ in range(args.runs):
                ys.sample()
                runs.append(once(prefetch))
            firsts = sorted(r["first"] for r in runs)
            print(f"{'prefetched' if prefetch else 'loaded by the search'}: first search median "
                  f"{ys.show(statistics.median(firsts))} ({ys.show(firsts[0])} - {ys.show(firsts[-1])}), second "
                  f"{ys.show(statistics.median(r['second'] for r in runs))}")
    print(ys.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
