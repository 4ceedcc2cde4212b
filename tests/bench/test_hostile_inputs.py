"""bench/hostile_inputs.py at a tiny size: every case runs its production function on its hostile input (the
timings themselves belong to the bench, not to a test)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_every_case_runs_and_is_reported(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(BENCH))  # the bench imports its yardstick by name
    bench = importlib.import_module("hostile_inputs")
    assert bench.main(["--size", "0.005"]) in (0, 1)  # tiny inputs: growth is noise, only the runs are checked
    out = capsys.readouterr().out
    assert [name for name in bench.CASES if name not in out] == []
