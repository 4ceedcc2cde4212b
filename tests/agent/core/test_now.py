"""HELPBOT_NOW: a fixed "now" for the prompt's date context, so 「先週」 can be replayed."""

from __future__ import annotations

import pytest

from agent.core.loop import Agent
from agent.core.model import Request
from agent.core.settings import Settings
from mcp_lib.config import ConfigError
from tests.fakes.loop import FakeTools
from tests.fakes.model import ScriptedModel, text


def test_an_iso_date_time_without_offset_is_in_the_team_time_zone() -> None:
    now = Settings.from_env({"HELPBOT_NOW": "2026-11-30T09:00"}).now
    assert now is not None and now.isoformat() == "2026-11-30T09:00:00+09:00"
    utc = Settings.from_env({"HELPBOT_NOW": "2026-11-30T00:30:00Z", "HELPBOT_TIMEZONE": "Asia/Tokyo"}).now
    assert utc is not None and utc.isoformat() == "2026-11-30T09:30:00+09:00"


@pytest.mark.parametrize("env", [{}, {"HELPBOT_NOW": ""}, {"HELPBOT_NOW": "  "}])
def test_unset_or_empty_means_the_clock(env: dict[str, str]) -> None:
    assert Settings.from_env(env).now is None


def test_a_malformed_value_is_one_configuration_error() -> None:
    with pytest.raises(ConfigError, match="HELPBOT_NOW: '先週' is not an ISO 8601"):
        Settings.from_env({"HELPBOT_NOW": "先週"})


def test_the_system_prompt_dates_follow_helpbot_now() -> None:
    seen: list[Request] = []

    def script(request: Request) -> object:
        seen.append(request)
        return text("ok")

    settings = Settings.from_env({"HELPBOT_NOW": "2025-01-08T10:00"})  # a Wednesday
    Agent(ScriptedModel(script), FakeTools({}), settings).run("先週の障害は？")
    system = seen[0].system_text
    assert "Now: 2025-01-08(水) 10:00, Wednesday" in system
    assert "先週 last week: 2024-12-30(月) – 2025-01-05(日)" in system
