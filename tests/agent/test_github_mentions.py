"""GitHub-bound text (a pull request's title, body and files; any future issue or comment) through ONE function,
:meth:`agent.guard.Guard.github`: no @mention GitHub would notify survives in any markdown context, and an
e-mail address is left as it is (GitHub notifies nobody for ``a@b.com``)."""

from __future__ import annotations

import pytest

from agent import guard
from agent.faq_pr import PrConfig, PullRequestWriter, make_client
from tests.fakes.clock import FakeClock
from tests.fakes.github import FakeGitHub

DEFUSED = [  # (text, what GitHub may be sent)
    ("@octocat 見てください", "＠octocat 見てください"),
    ("_@octocat_ のレビュー", "_＠octocat_ のレビュー"),  # emphasis: <em>@octocat</em>
    ("__@octocat__", "__＠octocat__"),
    ("*@acme/security-team*", "*＠acme/security-team*"),
    ("**@acme/security-team**", "**＠acme/security-team**"),
    ("~~@octocat~~ ~@octocat~", "~~＠octocat~~ ~＠octocat~"),
    ("[@octocat](https://github.com/octocat)", "[＠octocat](https://github.com/octocat)"),  # link text
    ("(@octocat)", "(＠octocat)"),
    ("「@octocat」、@hubot。@monalisa!@x", "「＠octocat」、＠hubot。＠monalisa!＠x"),  # after punctuation
    ("担当は@octocat", "担当は＠octocat"),  # straight after kana/kanji
    ("ａ@octocat", "ａ＠octocat"),  # a full-width letter is no ASCII word character for GitHub
    ("\\@octocat <b>@hubot</b>", "\\＠octocat <b>＠hubot</b>"),  # an escape, an HTML tag
    ("x_@octocat", "x_＠octocat"),
    ("cc &#64;octocat &#x40;acme/ops &commat;monalisa", "cc ＠octocat ＠acme/ops ＠monalisa"),
    ("@&#111;ctocat", "＠&#111;ctocat"),  # the name's first letter as a reference
    ("> @octocat\n- @hubot\n# @acme/team", "> ＠octocat\n- ＠hubot\n# ＠acme/team"),  # quote, list, heading
]
KEPT = [  # (text): GitHub notifies nobody, so nothing changes
    "連絡は taro.yamada@example.co.jp へ",
    "_taro@example.com_ か *ops@example.com*",
    "＠octocat",  # already full width
    "a&#64;b",
    "user@host",
    "@ 単独の記号",
    "@-dash",
]


@pytest.mark.parametrize(("text", "expected"), DEFUSED)
def test_a_mention_in_any_markdown_context_is_defused(text: str, expected: str) -> None:
    assert guard.Guard(guard.Masker()).github(text) == expected


@pytest.mark.parametrize("text", KEPT)
def test_what_notifies_nobody_is_left_alone(text: str) -> None:
    assert guard.Guard(guard.Masker()).github(text) == text


def test_the_pull_requests_title_body_and_files_all_pass_it() -> None:
    hub = FakeGitHub()
    hub.add_repo("acme/helpbot")
    config = PrConfig("acme/helpbot", hub.token, "https://api.github.com", "faq")
    with guard.installed(guard.Guard.from_env({})), make_client(config, hub.transport()) as client:
        PullRequestWriter(config, client, FakeClock()).open(
            "helpbot/z", {"c.md": "question: _@octocat_ の件\n"}, "*@acme/security-team* FAQ", "_@octocat_ より")
    pull = hub.repos["acme/helpbot"].pulls[1]
    written = hub.repos["acme/helpbot"].files["helpbot/z"]["faq/c.md"].decode()
    assert pull["title"] == "*＠acme/security-team* FAQ" and pull["body"] == "_＠octocat_ より"
    assert "_＠octocat_" in written and "@octocat" not in written
