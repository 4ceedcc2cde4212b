"""Red team after issue #19: the records of a public repository. helpbot feedback's printed report in Actions."""

from __future__ import annotations

import json

from tests.agent.slack.test_feedback import Seeded, as_json, env, feedback, seeded  # noqa: F401  (the scenario's fixtures)


# -- records of a public repository: helpbot feedback ----------------------------------------------------------------
def test_feedback_in_a_public_repository_keeps_its_log_as_a_private_channels(
        env: dict[str, str], seeded: Seeded) -> None:  # noqa: F811
    """The README: in a public repository "every run is kept that way [as a private channel's], whatever its
    channel"; feedback.yml passes HELPBOT_REPOSITORY_VISIBILITY. The answer runs' records keep nothing the model
    chose; the weekly report printed the same runs' tool names, rounds, cost and, with --json, their sources
    (fixed: in a public repository the printed report leaves every channel's answers out; the Slack post is as
    before)."""
    public = {**env, "GITHUB_ACTIONS": "true", "HELPBOT_REPOSITORY_VISIBILITY": "public"}
    report = as_json(public, "--since", "7d", "--channel", "C0ECSUP")
    printed = json.dumps(report, ensure_ascii=False)
    assert report["answers"] == [], printed[:300]
    assert "FAQ 1" not in printed and "redmine_search" not in printed
    code, text = feedback(public, "--since", "7d", "--channel", "C0ECSUP", "--post", "C0FEEDBACK")
    assert code == 0 and "faq_search" not in text and "ラウンド" not in text
    [posted] = seeded.ws.history("C0FEEDBACK")  # the post goes to Slack, not to the log: counted as before
    assert "回答 3 件" in posted.blocks[0]["text"]  # type: ignore[index]
