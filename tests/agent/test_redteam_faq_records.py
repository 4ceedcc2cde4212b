"""Red team after issue #19: the records of a public repository. A FAQ pull request there is readable by anyone."""

from __future__ import annotations

from tests.agent.test_faq_draft import REPO, draft, env, fake, github  # noqa: F401  (the scenario's fixtures)
from tests.fakes.github import FakeGitHub


def test_a_public_repository_gets_no_pull_request_of_unreviewed_drafts(
        env: dict[str, str], github: FakeGitHub) -> None:  # noqa: F811
    """faq-draft.yml keeps no artifact in a public repository ("anyone could download them") unless
    HELPBOT_PUBLIC_RECORDS=true; the pull request it opens instead (GITHUB_REPOSITORY: the same repository) holds
    the same questions and answers, before anyone reviewed them, for everyone to read."""
    public = {**env, "GITHUB_TOKEN": github.token, "GITHUB_REPOSITORY": REPO,
              "HELPBOT_REPOSITORY_VISIBILITY": "public"}
    code, _ = draft(public, "--pr", github_transport=github.transport())
    assert code == 0
    assert [r for r in github.requests if r.method != "GET"] == []
