"""Bench: `helpbot --help` must start in < 0.5 s (anthropic, slack_sdk and mcp_lib are imported lazily).

    uv run python bench/agent_startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(command: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - began


def main() -> None:
    script = Path(sys.executable).with_name("helpbot")
    command = [str(script), "--help"] if script.exists() else [sys.executable, "-m", "agent.cli", "--help"]
    timed(command)  # warm the file cache
    runs = [timed(command) for _ in range(10)]
    print(f"{' '.join(Path(command[0]).name for _ in [0])} --help: median {statistics.median(runs) * 1000:.0f} ms, "
          f"max {max(runs) * 1000:.0f} ms over {len(runs)} runs -> target < 500 ms: "
          f"{'PASS' if max(runs) < 0.5 else 'FAIL'}")
    ask_help = [timed([*command[:-1], "ask", "--help"]) for _ in range(5)]
    print(f"helpbot ask --help: median {statistics.median(ask_help) * 1000:.0f} ms")
    probe = "import sys, agent.cli; print(sorted(m for m in ('anthropic', 'mcp_lib', 'slack_sdk', 'pydantic') " \
            "if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    print(f"heavy modules imported by agent.cli: {loaded}")


if __name__ == "__main__":
    main()
