"""docs/slack-setup.md's checklist names each secret and variable exactly as a workflow reads it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUP = (ROOT / "docs" / "slack-setup.md").read_text(encoding="utf-8")
WORKFLOWS = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / ".github" / "workflows").glob("*.yml"))
RELAY_ENV = {"SLACK_SIGNING_SECRET", "GITHUB_REPOSITORY", "HELPBOT_DISPATCH_TOKEN"}  # the relay's own environment


def checklist() -> str:
    return SETUP.split("## Checklist", 1)[1].split("\n## ", 1)[0]


def test_the_checklist_comes_first_and_ends_with_doctor() -> None:
    assert SETUP.index("## Checklist") < SETUP.index("## 0. Your repository")
    items = [line for line in checklist().splitlines() if line.startswith("- [ ]")]
    assert "doctor" in items[-1] and "private" in items[0]


def test_every_name_in_the_checklist_is_what_a_workflow_or_the_relay_reads() -> None:
    names = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", checklist()))
    assert {"SLACK_BOT_TOKEN", "HELPBOT_CHANNELS", "AWS_BEARER_TOKEN_BEDROCK", "HELPBOT_GITHUB_TOKEN"} <= names
    read = set(re.findall(r"\$\{\{ (?:secrets|vars)\.([A-Z][A-Z0-9_]+)", WORKFLOWS))
    assert sorted(names - read - RELAY_ENV - {"GITHUB_TOKEN"}) == []
    assert "GITHUB_TOKEN" not in read  # GitHub refuses secrets named GITHUB_*: the secret is HELPBOT_GITHUB_TOKEN
