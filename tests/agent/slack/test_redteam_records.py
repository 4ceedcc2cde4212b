"""Red team after issue #19: the records of a public repository. helpbot feedback's printed report in Actions."""

from __future__ import annotations

import json

import pytest

from tests.agent.slack.test_feedback import as_json, env, seeded  # noqa: F401  (the feedback scenario's fixtures)


# -- records of a public repository: helpbot feedback ----------------------------------------------------------------
@pytest.mark.xfail(strict=True, reason="red team: helpbot feedback ignores records_public; in a public repository's "
                                       "Actions log it prints public channels' answers (tools, rounds, cost, "
                                       "permalinks; with --json their sources' titles and URLs)")
def test_feedback_in_a_public_repository_keeps_its_log_as_a_private_channels(
        env: dict[str, str], seeded: object) -> None:  # noqa: F811
    """The README: in a public repository "every run is kept that way [as a private channel's], whatever its
    channel"; feedback.yml passes HELPBOT_REPOSITORY_VISIBILITY. The answer runs' records keep nothing the model
    chose; the weekly report printed the same runs' tool names, rounds, cost and, with --json, their sources."""
    public = {**env, "GITHUB_ACTIONS": "true", "HELPBOT_REPOSITORY_VISIBILITY": "public"}
    report = as_json(public, "--since", "7d", "--channel", "C0ECSUP")
    printed = json.dumps(report, ensure_ascii=False)
    assert report["answers"] == [], printed[:300]
    assert "FAQ 1" not in printed and "redmine_search" not in printed
