"""``helpbot faq-draft`` against the fake Slack (answers posted as helpbot posts them, reactions seeded) and the
fake GitHub (branch, contents, pull request). The clock is fixed; sleeps are recorded, never slept."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from slack_sdk import WebClient

from agent.cli import main as helpbot_main
from agent.errors import ConfigError, UsageError
from agent.faq_draft import clean_question
from mcp_lib.platforms.faq import FaqIndex, parse_entry
from tests.fakes.faq_draft import BOT, GIFT, REPO, SATO, SUZUKI, TANAKA, answer, at, draft, react
from tests.fakes.github import FakeGitHub, serve
from tests.fakes.slack import BOT_TOKEN, FakeSlack, Workspace


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    ws = Workspace()
    for uid, name in [(TANAKA, "tanaka"), (SUZUKI, "suzuki"), (SATO, "sato")]:
        ws.add_user(uid, name)
    ws.add_channel("C0ECSUP", "ec-support", members={TANAKA, SUZUKI, SATO})
    ws.add_channel("C0SECRET", "secret", private=True, members={TANAKA, SUZUKI, SATO})
    with FakeSlack(ws) as running:
        bot = WebClient(token=BOT_TOKEN, base_url=running.url)
        ec = "C0ECSUP"
        # a new question, asked with a mention and a name: 👍 by two people -> a draft
        q = ws.post(ec, f"<@{BOT}> 鈴木さん、ギフト包装の指定はどこでできますか？ <@{SATO}> も知りたいそうです",
                    user=TANAKA, ts=at(15)).ts
        react(ws, ec, answer(bot, ec, q, GIFT, tags=["ギフト", "注文"]), "+1", SUZUKI, SATO)
        # the FAQ already has it (rakuten-order-import): skipped as a duplicate
        q = ws.post(ec, "楽天の注文が取り込まれない", user=SUZUKI, ts=at(16)).ts
        react(ws, ec, answer(bot, ec, q, "連携ログの rakuten-order ジョブを確認してください。"), "+1", TANAKA, SATO)
        # one 👍 only: below --min-up 2
        q = ws.post(ec, "Qoo10 の出品方法を教えて", user=SATO, ts=at(17)).ts
        react(ws, ec, answer(bot, ec, q, "Qoo10 には未対応です。"), "+1", TANAKA)
        # 👎 majority
        q = ws.post(ec, "ポイント付与率の変え方は？", user=TANAKA, ts=at(18)).ts
        ts = answer(bot, ec, q, "モールの管理画面で変えます。")
        react(ws, ec, ts, "+1", SUZUKI, SATO)
        react(ws, ec, ts, "-1", TANAKA, "U0OWNER", "U0X")
        # a private channel: skipped unless the FAQ is private too
        q = ws.post("C0SECRET", "社販の割引設定はどこ？", user=TANAKA, ts=at(18, 11)).ts
        react(ws, "C0SECRET", answer(bot, "C0SECRET", q, "社販クーポンを発行します。"), "+1", SUZUKI, SATO)
        running.requests.clear()
        yield running


@pytest.fixture
def env(fake: FakeSlack, tmp_path: Path) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": fake.url, "HELPBOT_CHANNELS": "C0ECSUP,C0SECRET",
            "HELPBOT_FAQ_CACHE_DIR": str(tmp_path / "cache")}


@pytest.fixture
def github() -> FakeGitHub:
    hub = FakeGitHub()
    hub.add_repo(REPO)
    hub.add_file(REPO, "faq/stock-mismatch.md", "---\nid: stock-mismatch\nquestion: q\n---\nbody\n")
    return hub


@pytest.mark.parametrize("piece", ["<@", "<!", "<#C1|", "<http:", "<http:x|", "<@U1|"])
def test_a_message_of_slack_markup_left_open_is_cleaned_in_linear_time(piece: str) -> None:
    """A 40,000-character message (Slack's limit) of "<http:" repeated took 5 s: every "<" read on to the end."""
    clean_question(piece * (40_000 // len(piece)))
    assert clean_question("在庫が合わない <@U0TANAKA") == "在庫が合わない"  # left open at the end: still a mention


def test_clean_question_drops_mentions_names_and_links() -> None:
    assert clean_question("<@U0BOT> 田中さん、<https://x.example/a|この画面>で <!here> 在庫が合わない @sato") == \
        "この画面で 在庫が合わない"
    assert clean_question("<mailto:a@b.example|a@b.example> に連絡 <#C0AB|ec-support>") == "に連絡 ec-support"


def test_drafts_are_printed_with_question_answer_sources_and_tags(env: dict[str, str], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out = draft(env)
    assert code == 0
    assert "1 drafts from 5 answers (3 with ≥ 2 👍 and no 👎 majority)" in out
    assert "skipped: 1 already in the FAQ (rakuten-order-import), 1 private channel" in out
    [text] = out.split("\n==> ")[1:]
    name, _, body = text.partition("\n")
    (tmp_path / name).write_text(body, encoding="utf-8")
    entry = parse_entry(tmp_path / name)
    assert entry.id == name[:-3] and entry.id.startswith("draft-20250120-")
    assert entry.question == "ギフト包装の指定はどこでできますか？ も知りたいそうです"
    assert entry.tags == ["ギフト", "注文"]
    assert "ギフト包装は注文備考" in entry.body and "[ギフト設定（Growi）](https://wiki.example.com/gift)" in entry.body
    assert "tanaka@example.com" not in body and "090-1234-5678" not in body  # through the egress guard
    assert "U0SATO" not in body and "鈴木" not in body


def test_out_writes_entries_the_faq_can_load(env: dict[str, str], tmp_path: Path) -> None:
    code, out = draft(env, "--out", str(tmp_path / "drafts"))
    assert code == 0 and "wrote 1 files" in out
    index = FaqIndex.load(tmp_path / "drafts")
    assert [e.id for e, _ in index.search("ギフト包装")][:1] == [index.entries[0].id]


def test_a_private_faq_takes_private_channels(env: dict[str, str]) -> None:
    _, out = draft({**env, "HELPBOT_FAQ_PRIVATE": "true"})
    assert "2 drafts" in out and "社販の割引設定はどこ？" in out


def test_nothing_to_draft(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out = draft(env, "--min-up", "5")
    assert code == 0 and out == ""
    assert "nothing to draft: 0 drafts from 5 answers (0 with ≥ 5 👍" in capsys.readouterr().err


def test_pr_opens_one_pull_request(env: dict[str, str], github: FakeGitHub) -> None:
    pr_env = {**env, "GITHUB_TOKEN": github.token, "GITHUB_REPOSITORY": REPO}
    code, out = draft(pr_env, "--pr", github_transport=github.transport())
    assert code == 0 and "opened https://github.com/acme/helpdesk/pull/1" in out
    calls = [(r.method, r.url.path) for r in github.requests]
    branch = "helpbot/faq-drafts-20250120-100000"
    [put] = [path for method, path in calls if method == "PUT"]
    assert calls == [("GET", f"/repos/{REPO}"), ("GET", f"/repos/{REPO}/git/ref/heads/main"), ("GET", put),
                     ("POST", f"/repos/{REPO}/git/refs"), ("PUT", put), ("POST", f"/repos/{REPO}/pulls")]
    assert put.startswith(f"/repos/{REPO}/contents/faq/draft-20250120-")
    create = json.loads(github.requests[3].content)
    assert create["ref"] == f"refs/heads/{branch}"
    written = json.loads(github.requests[4].content)
    assert written["branch"] == branch and "ギフト包装" in base64.b64decode(written["content"]).decode()
    repo = github.repos[REPO]
    pull = repo.pulls[1]
    assert pull["draft"] is True and pull["head"]["ref"] == branch and pull["base"]["ref"] == "main"
    assert [f["filename"] for f in repo.pull_files[1]] == [put.split("/contents/")[1]]
    assert "faq/stock-mismatch.md" in repo.files[branch] and len(repo.files["main"]) == 1  # main untouched


def test_pr_without_permission_writes_nothing(env: dict[str, str], github: FakeGitHub) -> None:
    github.repos[REPO].can_push = False
    pr_env = {**env, "GITHUB_TOKEN": github.token, "GITHUB_REPOSITORY": REPO}
    with pytest.raises(ConfigError, match=r"no permission to push to acme/helpdesk.*contents: write"):
        draft(pr_env, "--pr", github_transport=github.transport())
    assert [r.method for r in github.requests] == ["GET"]


def test_the_pr_token_is_preferred_to_github_token_and_named_in_errors(env: dict[str, str],
                                                                        github: FakeGitHub) -> None:
    """faq-draft.yml passes the secret HELPBOT_FAQ_PR_TOKEN; GITHUB_TOKEN (a read-only one, say) is not used."""
    pr_env = {**env, "HELPBOT_FAQ_PR_TOKEN": github.token, "GITHUB_TOKEN": "read-only", "GITHUB_REPOSITORY": REPO}
    code, out = draft(pr_env, "--pr", github_transport=github.transport())
    assert code == 0 and "opened https://github.com/acme/helpdesk/pull/1" in out
    with pytest.raises(ConfigError, match=r"^HELPBOT_FAQ_PR_TOKEN: GitHub rejected the token \(HTTP 401"):
        draft({**pr_env, "HELPBOT_FAQ_PR_TOKEN": "wrong"}, "--pr", github_transport=github.transport())
    with pytest.raises(ConfigError, match=r"^HELPBOT_FAQ_PR_TOKEN: not set \(nor GITHUB_TOKEN\)"):
        draft({**env, "GITHUB_REPOSITORY": REPO}, "--pr", github_transport=github.transport())


def test_a_refused_write_is_no_permission_too(env: dict[str, str], github: FakeGitHub) -> None:
    github.script("POST", r"/repos/.*/git/refs", lambda request: httpx2.Response(
        403, json={"message": "Resource not accessible by integration", "status": "403"}))
    pr_env = {**env, "GITHUB_TOKEN": github.token, "GITHUB_REPOSITORY": REPO}
    with pytest.raises(ConfigError, match=r"no permission to create the branch .*HTTP 403.*not accessible"):
        draft(pr_env, "--pr", github_transport=github.transport())
    assert not github.repos[REPO].pulls


def test_no_permission_on_the_command_line_is_exit_2(env: dict[str, str], github: FakeGitHub,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    github.repos[REPO].can_push = False
    with serve(github.handler) as url:
        for name, value in {**env, "GITHUB_TOKEN": github.token, "GITHUB_REPOSITORY": REPO,
                            "GITHUB_API_URL": url}.items():
            monkeypatch.setenv(name, value)
        code = helpbot_main(["faq-draft", "--pr", "--since", "2025-01-01"])
    err = capsys.readouterr().err
    assert code == 2 and "configuration error: GITHUB_TOKEN: no permission to push" in err
    assert not github.repos[REPO].pulls


@pytest.mark.parametrize(("argv", "extra", "error", "match"), [
    (["--min-up", "0"], {}, UsageError, "--min-up must be at least 1"),
    (["--pr"], {"GITHUB_REPOSITORY": REPO}, ConfigError, "GITHUB_TOKEN"),
    (["--pr"], {"GITHUB_TOKEN": "t"}, ConfigError, "GITHUB_REPOSITORY"),
    (["--since", "soon"], {}, UsageError, "helpbot faq-draft: --since"),
    (["--channel", "general"], {}, UsageError, "not a channel ID"),
    ([], {"HELPBOT_BOT_USER_ID": "helpbot"}, ConfigError, "HELPBOT_BOT_USER_ID.*not a Slack user ID"),
    ([], {"SLACK_BOT_TOKEN": ""}, ConfigError, "SLACK_BOT_TOKEN: not set"),
])
def test_bad_input_fails_before_anything_is_read(env: dict[str, str], fake: FakeSlack, argv: list[str],
                                                 extra: dict[str, str], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        draft({**env, **extra}, *argv)
    assert not fake.requests


def test_without_pr_github_is_never_called(env: dict[str, str], github: FakeGitHub, tmp_path: Path) -> None:
    pr_env = {**env, "GITHUB_TOKEN": github.token, "GITHUB_REPOSITORY": REPO}
    assert draft(pr_env, github_transport=github.transport())[0] == 0
    assert draft(pr_env, "--out", str(tmp_path / "d"), github_transport=github.transport())[0] == 0
    assert not github.requests


@pytest.mark.parametrize(("folder", "where"), [("docs/よくある質問/", "docs/よくある質問"), (".", ""),
                                               ("./kb//faq", "kb/faq")])
def test_pr_writes_to_the_configured_folder(env: dict[str, str], github: FakeGitHub, folder: str,
                                            where: str) -> None:
    pr_env = {**env, "GITHUB_TOKEN": github.token, "GITHUB_REPOSITORY": REPO, "HELPBOT_FAQ_REPO_DIR": folder}
    assert draft(pr_env, "--pr", github_transport=github.transport())[0] == 0
    files = github.repos[REPO].files
    [written] = set(files["helpbot/faq-drafts-20250120-100000"]) - set(files["main"])
    folder_written, _, name = written.rpartition("/")
    assert folder_written == where and name.startswith("draft-20250120-")


@pytest.mark.parametrize(("folder", "match"), [
    ("../other", "leaves the folder"), ("faq/../../x", "leaves the folder"), ("/etc/faq", "absolute"),
    ("~/faq", "absolute"), ("C:/faq", "absolute"), ("faq\\drafts", "backslash"), ("faq\ndrafts", "control"),
])
def test_a_repo_folder_outside_the_repository_is_refused(env: dict[str, str], fake: FakeSlack,
                                                         github: FakeGitHub, folder: str, match: str) -> None:
    pr_env = {**env, "GITHUB_TOKEN": github.token, "GITHUB_REPOSITORY": REPO, "HELPBOT_FAQ_REPO_DIR": folder}
    with pytest.raises(ConfigError, match=rf"HELPBOT_FAQ_REPO_DIR.*{match}"):
        draft(pr_env, "--pr", github_transport=github.transport())
    assert not fake.requests and not github.requests  # refused before Slack or GitHub is asked anything


def test_an_out_that_is_a_file_is_one_line_before_the_scan(env: dict[str, str], fake: FakeSlack,
                                                          tmp_path: Path) -> None:
    taken = tmp_path / "drafts"
    taken.write_text("not a folder", encoding="utf-8")
    with pytest.raises(UsageError, match=r"^helpbot faq-draft: --out: cannot write into .*: it is a file, not a "
                                         r"folder$"):
        draft(env, "--out", str(taken))
    assert fake.calls("conversations.history") == []  # nothing scanned (and nothing paid for) first


def test_a_public_repository_gets_no_pull_request_of_unreviewed_drafts(
        env: dict[str, str], github: FakeGitHub) -> None:
    """faq-draft.yml keeps no artifact in a public repository ("anyone could download them") unless
    HELPBOT_PUBLIC_RECORDS=true; the pull request it opens instead (GITHUB_REPOSITORY: the same repository) holds
    the same questions and answers, before anyone reviewed them, for everyone to read."""
    public = {**env, "GITHUB_TOKEN": github.token, "GITHUB_REPOSITORY": REPO,
              "HELPBOT_REPOSITORY_VISIBILITY": "public"}
    code, _ = draft(public, "--pr", github_transport=github.transport())
    assert code == 0
    assert [r for r in github.requests if r.method != "GET"] == []


def test_a_draft_of_a_real_answer_lists_each_source_once_and_none_of_helpbots_own_messages(tmp_path: Path) -> None:
    """#21: an answer as `helpbot answer` streams it -- the model's text with its own list of links, the 参照元 block
    of the stop under it -- that cites helpbot's own earlier answer (found by Slack search) is drafted with each
    source once, helpbot's messages are no source of an FAQ entry, and no participant's name is left in a title."""
    from tests.fakes.front import answer_scripted
    from tests.fakes.model import Request, calls
    from tests.fakes.slack import USER_TOKEN, sample_workspace

    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("slack_searchMessages", {"query": "在庫同期"}), ("faq_search", {"query": "在庫同期 遅延"}))
        found = [item for result in request.tool_results() for item in json.loads(result["content"])["items"]]
        cited = [next(i for i in found if i.get("author") == author) for author in ("helpbot", "鈴木")]
        cited.append(next(i for i in found if "faq" in i["url"]))
        return "ギフト包装は注文備考で指定します。\n\n" + "\n".join(f"- [{i['title']}]({i['url']})" for i in cited)

    ws = sample_workspace()
    ws.refuse_streaming = None
    with FakeSlack(ws) as slack:
        bot = WebClient(token=BOT_TOKEN, base_url=slack.url)
        earlier_q = ws.post("C0GENERAL", "在庫同期の頻度は？", user=TANAKA).ts
        earlier = answer(bot, "C0GENERAL", earlier_q, "在庫同期は15分ごとです。")
        q = ws.post("C0ECSUP", "ギフト包装の指定はどこでできますか？", user=TANAKA)
        env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_USER_TOKEN": USER_TOKEN, "SLACK_API_URL": slack.url,
               "HELPBOT_FAQ_BASE_URL": "https://github.com/acme/helpbot/blob/HEAD/faq",
               "HELPBOT_FAQ_CACHE_DIR": str(tmp_path / "cache")}
        assert answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)[0] == 0
        assert slack.calls("chat.stopStream")  # the answer as the streamed path leaves it
        [posted] = [m for m in ws.thread("C0ECSUP", q.ts) if m.user == BOT]
        react(ws, "C0ECSUP", posted.ts, "+1", TANAKA, SUZUKI)
        code, out = draft({**env, "HELPBOT_CHANNELS": "C0ECSUP"}, "--since", "2025-01-01")
    assert code == 0 and "1 drafts" in out
    body = out.split("\n==> ", 1)[1]
    listed = re.findall(r"\]\((https?://[^)\s]+)\)", body)
    assert len(listed) == len(set(listed)) == 2, body  # the FAQ entry and suzuki's message, each once
    own = ws.permalink("C0GENERAL", earlier).split("?")[0]
    assert not any(url.startswith(own) for url in listed) and "在庫同期は15分ごとです" not in body, body
    assert "田中" not in body and "鈴木" not in body, body
