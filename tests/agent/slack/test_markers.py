"""The message-metadata protocol lives in agent/slack/markers.py only: written there, read there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.slack import markers

ROOT = Path(__file__).resolve().parents[3]


def test_no_other_module_spells_the_protocol() -> None:
    spelled = [str(p.relative_to(ROOT)) for p in (ROOT / "agent").rglob("*.py")
               if p.name != "markers.py" and any(word in p.read_text(encoding="utf-8")
                                                for word in ('"event_payload"', "helpbot_answer",
                                                             "helpbot_failure", "helpbot_progress"))]
    assert spelled == []


def test_a_marker_counts_only_on_helpbots_own_message() -> None:
    me = markers.Me("U0HELPBOT", "B0HELPBOT")
    data = markers.metadata("answer", channel="C1", question_ts="1700000000.000001", parts=2, cost_usd=None)
    assert data == {"event_type": "helpbot_answer", "event_payload": {
        "version": 1, "question_channel": "C1", "question_ts": "1700000000.000001", "parts": 2}}
    forged = {"ts": "1700000001.000000", "bot_id": "B0OTHER", "metadata": data}
    mine = {**forged, "bot_id": "B0HELPBOT"}
    assert markers.read(forged) is not None and markers.ours(forged, me) is None
    marker = markers.ours(mine, me)
    assert marker is not None and marker.kind == "answer" and marker.parts == 2
    assert markers.find_answer([forged, mine], "1700000000.000001", "C1", me=me) is mine
    assert markers.find_answer([mine], "1700000000.000001", "C2", me=me) is None


@pytest.mark.scenario
def test_the_workflow_gets_its_notice_metadata_from_the_module_with_plain_python() -> None:
    out = subprocess.run([sys.executable, "-S", "-m", "agent.slack.markers", "failure", "--channel", "C0ECSUP",
                          "--ts", "1700000000.000001"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == markers.metadata("failure", channel="C0ECSUP", question_ts="1700000000.000001")


def test_an_answers_numbers_round_trip_through_its_marker() -> None:
    stats = markers.AnswerStats(rounds=3, tool_calls=4, tools=("faq_search", "slack_searchMessages"), sources=2,
                                cost_usd=0.0123456789, degraded=False, tags=("Shopify", "在庫"), parts=2)
    message = {"bot_id": "B0HELPBOT", "metadata": markers.metadata("answer", channel="C1", question_ts="1.000001",
                                                                   **stats.fields())}
    read = markers.ours(message, markers.Me(bot_id="B0HELPBOT"))
    assert read is not None and read.stats == markers.AnswerStats(**{**stats.__dict__, "cost_usd": 0.012346})


def test_garbage_in_an_answers_marker_reads_as_zeros_not_as_a_crash() -> None:
    payload = {"version": 99, "rounds": "many", "tool_calls": -3, "tools": 7, "sources": None, "cost_usd": "NaN",
               "degraded": "yes", "tags": ["a"], "parts": "x"}
    message = {"bot_id": "B0HELPBOT", "metadata": {"event_type": "helpbot_answer", "event_payload": payload}}
    read = markers.ours(message, markers.Me(bot_id="B0HELPBOT"))
    assert read is not None and read.kind == "answer"  # a newer version is still helpbot's answer
    assert read.stats == markers.AnswerStats()


@pytest.mark.parametrize("cost", [pytest.param(10**400, id="400 digits"), [1], {"a": 1}, -0.5])
def test_a_cost_too_large_for_a_float_or_no_number_reads_as_none(cost: Any) -> None:
    """10**400 (a JSON integer of 400 digits) raised OverflowError in float(): a vote or a rating run's traceback."""
    message = {"bot_id": "B0HELPBOT", "metadata": {"event_type": "helpbot_answer", "event_payload": {"cost_usd": cost}}}
    read = markers.ours(message, markers.Me(bot_id="B0HELPBOT"))
    assert read is not None and read.stats.cost_usd is None


