"""Time comes only from mcp_lib/clock.py: no other module of agent/ or mcp_lib/ reads or waits on the machine's
clocks, so a test that hands in tests/fakes/clock.FakeClock controls all of it and none depends on uptime."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READS = {("time", "time"), ("time", "monotonic"), ("time", "perf_counter"), ("time", "sleep"),
         ("time", "time_ns"), ("time", "monotonic_ns"), ("datetime", "now"), ("datetime", "utcnow"),
         ("datetime", "today"), ("date", "today")}


def time_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [f"{path.relative_to(ROOT)}:{node.lineno} {node.value.id}.{node.attr}" for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
             and (node.value.id, node.attr) in READS]
    found += [f"{path.relative_to(ROOT)}:{node.lineno} from time import {alias.name}" for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module == "time" for alias in node.names]
    return found


def test_no_module_but_the_clock_reads_the_time() -> None:
    modules = [p for pkg in ("agent", "mcp_lib") for p in sorted((ROOT / pkg).rglob("*.py"))
               if p != ROOT / "mcp_lib" / "clock.py"]
    assert [hit for p in modules for hit in time_reads(p)] == []


def test_the_scan_finds_a_time_read(tmp_path: Path) -> None:
    sample = ROOT / "mcp_lib" / "clock.py"
    assert {hit.split(" ", 1)[1] for hit in time_reads(sample)} == {"time.monotonic", "time.time", "time.sleep"}
