"""``helpbot faq-draft --pr``'s writes to GitHub: a pull request's title and body notify nobody."""

from __future__ import annotations

import re

from agent import guard
from agent.faq_pr import PrConfig, PullRequestWriter, make_client
from tests.fakes.github import FakeGitHub

REPO = "acme/helpdesk"
# GitHub's mention filter: @ after anything but an ASCII word character, then a login or org/team
GITHUB_MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9][A-Za-z0-9_-]*)?")


def test_mentions_in_the_title_and_body_are_defused() -> None:
    hub = FakeGitHub()
    hub.add_repo(REPO)
    config = PrConfig(REPO, hub.token, "https://api.github.com", "faq")
    body = ("質問: @octocat さんと @acme/ops-team に聞いた件。担当@suzuki-h (cc:@Hubot) `@in-code` "
            "メール a.b@example.com\n- @x")
    with guard.installed(guard.Guard.from_env({})), make_client(config, hub.transport()) as client:
        PullRequestWriter(config, client, lambda s: None).open("helpbot/x", {"a.md": "本文 @octocat"},
                                                                "FAQ drafts for @octocat", body)
    pull = hub.repos[REPO].pulls[1]
    for text in (pull["title"], pull["body"]):
        assert not GITHUB_MENTION.search(text), text
    assert pull["title"] == "FAQ drafts for ＠octocat"
    assert "＠octocat さんと ＠acme/ops-team" in pull["body"] and "担当＠suzuki-h" in pull["body"]
    assert "[email]" in pull["body"]  # masked as well


def test_a_draft_file_is_guarded_before_it_is_encoded() -> None:
    """The file's content goes base64-encoded, which no door can read: it is guarded before the encoding."""
    hub = FakeGitHub()
    hub.add_repo(REPO)
    config = PrConfig(REPO, hub.token, "https://api.github.com", "faq")
    with guard.installed(guard.Guard.from_env({})), make_client(config, hub.transport()) as client:
        PullRequestWriter(config, client, lambda s: None).open(
            "helpbot/y", {"b.md": "連絡は taro@example.com、トークン xoxb-1234567890-abcdefghij"}, "t", "b")
    written = hub.repos[REPO].files["helpbot/y"]["faq/b.md"].decode()
    assert "taro@example.com" not in written and "xoxb-1234567890" not in written


def test_an_at_sign_written_as_a_character_reference_is_no_mention() -> None:
    """GitHub's renderer turns ``&#64;``, ``&#x40;`` and ``&commat;`` into @ before it looks for mentions."""
    text = guard.Guard.from_env({}).github("cc &#64;octocat &#x40;acme/ops &#X0040;hubot &commat;monalisa a&#64;b")
    assert text == "cc ＠octocat ＠acme/ops ＠hubot ＠monalisa a&#64;b"
