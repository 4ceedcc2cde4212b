"""The egress guard on its own: masking, names, private runs, mentions and links."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.guard import UNKNOWN_TOOL, Guard
from mcp_lib.external import credential_values
from tests.fakes.slack import FakeSlack, Workspace

ENV = {
    "SLACK_BOT_TOKEN": "xoxb-fake-bot",
    "REDMINE_API_KEY": "rk9",  # short: masked anyway, as Actions' add-mask would
    "SALES_MCP_TOKEN": "s4les-t0ken",  # not declared, named like a credential
    "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token",  # a path, not a secret
    "HELPBOT_MAX_TOKENS": "4096",  # a setting, not a secret
    "GITHUB_TOKEN": "",  # unset
}
NAMES = ["slack_searchMessages", "faq_search", "slack", "faq"]


def guard(**env: str) -> Guard:
    return Guard.from_env({**ENV, **env}, names=NAMES, hosts=["wiki.example.test"])


def test_credential_values_are_the_secrets_of_the_environment() -> None:
    assert sorted(credential_values(ENV)) == ["rk9", "s4les-t0ken", "xoxb-fake-bot"]


@pytest.mark.parametrize(("text", "expected"), [
    ("トークンはxoxb-fake-botです", "トークンは[REDACTED]です"),
    ("キーはrk9です", "キーは[REDACTED]です"),
    ("ghp_fakefakefake", "[REDACTED]"),
    ("postgres://u:pw@db", "postgres://u:[REDACTED]@db"),
    ("パスワード：Hunter2Hunter2", "パスワード：[REDACTED]"),
    ("password=hunter2", "password=[REDACTED]"),
    ("カード 4111 1111 1111 1111", "カード [card]"),
    ("連絡先 taro@example.com / 090-1234-5678", "連絡先 [email] / [phone]"),
    ("s4les-t0ken", "[REDACTED]"),
])
def test_text_is_masked(text: str, expected: str) -> None:
    assert guard().text(text) == expected


def test_mask_personal_false_keeps_mail_and_phone_but_not_cards() -> None:
    keeping = guard(HELPBOT_MASK_PERSONAL="false")
    assert keeping.text("taro@example.com 090-1234-5678 4111111111111111") == \
        "taro@example.com 090-1234-5678 [card]"


def test_only_registered_names() -> None:
    g = guard()
    assert g.name("slack_searchMessages") == "slack_searchMessages"
    for hostile in ("暗証番号は4711", "e69a97e8a8bc", "slack_searchMessages ", None, 7):
        assert g.name(hostile) == UNKNOWN_TOOL
    event = g.event({"event": "tool_call", "name": "e69a97e8a8bc", "tools": ["faq_search", "x_4711"]})
    assert event["name"] == UNKNOWN_TOOL and event["tools"] == ["faq_search", UNKNOWN_TOOL]


def test_a_private_run_keeps_only_how_it_ended() -> None:
    g = guard().for_run(private=True)
    assert g.event({"event": "tool_result", "round": 2, "name": "faq_search", "is_error": False,
                    "preview": "社外秘の内容", "chars": 12}) is None
    assert g.event({"event": "front.question", "chars": 9}) is None
    assert g.event({"t": 1.5, "event": "front.done", "rounds": 4, "degraded": True, "stop": "end_turn",
                    "link": "https://x.slack.com/archives/C0SECRET/p1"}) == {"t": 1.5, "event": "front.done",
                                                                             "degraded": True}
    assert g.event({"t": 2.0, "event": "front.failure", "error": "ValidationException: 社外秘"}) == {
        "t": 2.0, "event": "front.failure"}
    public = guard().event({"event": "tool_call", "name": "faq_search", "input": {"query": "在庫 taro@example.com"}})
    assert public["input"] == {"query": "在庫 [email]"}


@pytest.mark.parametrize("mention", [
    "<@U0TANAKA>", "<@u0tanaka>", "<@W0ABC|tanaka>", "<!subteam^S0TEAM>", "<!SUBTEAM^s0team|@ops>", "<!here>",
    "<!HERE>", "<!here|here>", "<!Channel>", "<!channel>", "<!everyone>", "<!EVERYONE>", "@here", "@HERE",
    "@Channel", "@channel", "@everyone", "@Everyone", "＠here", "皆さん@here", "<#C0SECRET|secret-ops>",
    "<!date^1392734382^{date}|x>",
])
def test_every_mention_form_is_defused(mention: str) -> None:
    out = guard().markdown(f"お知らせ {mention} です")
    assert "<@" not in out and "<!" not in out and "<#" not in out
    assert "@here" not in out.lower() and "@channel" not in out.lower() and "@everyone" not in out.lower()


@pytest.mark.parametrize(("text", "expected"), [
    ("<@U0TANAKA|a<b> <!here|x", "＠a＜b <!here|x"), ("<!here|開いたまま @here", "<!here|開いたまま ＠here"),
    ("> <@U1|x <!channel|y @everyone", "> <@U1|x <!channel|y ＠everyone"),
    ("<#C1|<!here|> @channel<", "#<!here| ＠channel<"),
])
def test_a_mention_left_open_is_kept_as_written_and_what_follows_is_still_defused(text: str, expected: str) -> None:
    assert guard().markdown(text) == expected


def test_email_addresses_are_not_mistaken_for_mentions() -> None:
    assert guard(HELPBOT_MASK_PERSONAL="false").markdown("ops@here.example.com") == "ops@here.example.com"


@pytest.mark.parametrize(("text", "expected"), [
    ("![x](https://evil.test/p.png?d=4711)", "x"),
    ("![](https://wiki.example.test/a.png)", ""),
    ("[手順](https://evil.test/a/b?d=4711#frag)", "[手順](https://evil.test/a/b)"),
    ("[手順](https://wiki.example.test/a?x=1#h)", "[手順](https://wiki.example.test/a?x=1#h)"),
    ("<https://evil.test/a?d=4711|手順>", "<https://evil.test/a|手順>"),
    ("詳細はhttps://evil.test/x?d=4711を参照", "詳細はhttps://evil.test/xを参照"),
    ("www.evil.test/x?d=1 へ", "www.evil.test/x へ"),
    ("[x](javascript:alert(1))", "x)"),  # no web link: the label only
    ("[x](data:text/html,hi)", "x"),
    ("https://user:pw@evil.test/x?d=1", "https://evil.test/x"),
])
def test_links_to_unknown_hosts_keep_scheme_host_and_path(text: str, expected: str) -> None:
    assert guard().markdown(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("見て https://user@evil.test:99999/x です", "見て  です"), ("[a](https://u@evil.test:abc/x)", "a"),
    ("<https://u@evil.test:-1/|x>", "x"), ("https://evil.test:99999/x 先", " 先"),
])
def test_a_link_with_a_port_no_url_can_have_is_no_link_not_a_failed_post(text: str, expected: str) -> None:
    """urlsplit's port raised ValueError out of the guard: an answer with such a URL could never be posted."""
    assert guard().markdown(text) == expected
    assert guard().payload({"url": "https://u@evil.test:99999/"}) == {"url": ""}


@pytest.mark.parametrize("piece", ["[x](", "[", "![x](", "[x](<", "<a:", "<a:|"])
def test_links_left_open_are_read_in_linear_time_and_kept_as_written(piece: str) -> None:
    """From each opener the link pattern read on to the end for a "]", ")" or ">" that never came: 30,000 characters
    took 2-24 s of CPU in every post."""
    text = piece * (30_000 // len(piece))
    assert guard().markdown(text) == text.replace("![", "[")  # no image, so no image mark


@pytest.mark.parametrize(("text", "expected"), [
    ("[x](" * 3 + " https://evil.test/?d=1", "[x]([x]([x]( https://evil.test/"),
    ("[x](" * 3 + "[y](https://evil.test/?d=1)", "x"),  # one link to "[x]([x]([y](https://…": no web link
    ("[" * 5 + "x](https://evil.test/?d=1)", "[[[[[x](https://evil.test/)"),
    ("[x](javascript:a[1])", "x"), ('[x](<https://evil.test/?d=1> "t")', "[x](https://evil.test/)"),
    ("<a:" * 3 + " <https://evil.test/?d=1|y>", "<a:<a:<a: <https://evil.test/|y>"),
])
def test_what_follows_links_left_open_is_cleaned_as_before(text: str, expected: str) -> None:
    assert guard().markdown(text) == expected


def test_links_to_consulted_sources_stay_whole() -> None:
    g = guard().for_run(hosts=["docs.example.test"])
    assert g.markdown("[t](https://docs.example.test/page?id=3)") == "[t](https://docs.example.test/page?id=3)"


def test_a_slack_payload_is_guarded_everywhere() -> None:
    payload = {"text": "<!here> ghp_fakefakefake", "blocks": [
        {"type": "markdown", "text": "[a](https://evil.test/?d=1) <@U0X>"},
        {"type": "actions", "elements": [{"type": "button", "url": "https://evil.test/b?d=1", "text": {
            "type": "plain_text", "text": "@channel"}}]}],
        "metadata": {"event_type": "helpbot_answer", "event_payload": {"tools": ["faq_search", "4711"],
                                                                        "question": "taro@example.com"}}}
    out = guard().payload(payload)
    assert out["text"] == "＠here [REDACTED]"
    assert out["blocks"][0]["text"] == "[a](https://evil.test/) ＠U0X"
    assert out["blocks"][1]["elements"][0]["url"] == "https://evil.test/b"
    assert out["blocks"][1]["elements"][0]["text"]["text"] == "＠channel"
    assert out["metadata"]["event_payload"] == {"tools": ["faq_search", UNKNOWN_TOOL], "question": "[email]"}


def test_every_declared_secret_is_masked_by_value_whatever_its_name_and_length() -> None:
    from agent.config import DECLARED

    secrets = [name for name, declared in DECLARED.items() if declared.secret]
    assert "SLACK_SIGNING_SECRET" in secrets and "AWS_ACCESS_KEY_ID" in secrets
    for name in secrets:
        g = Guard.from_env({name: "q7Z"})  # three characters: no pattern would see it
        assert g.text("値は q7Z です") == "値は [REDACTED] です", name


def test_a_credential_written_as_a_urls_user_is_masked_in_every_form_the_guard_sends() -> None:
    """The URL pattern keeps a URL's user (the reader sees what was there); a credential's value as that user, as
    ``git clone https://<token>@`` or ``https://<token>:x-oauth-basic@`` write it, is masked all the same."""
    g = Guard.from_env({"GROWI_ACCESS_TOKEN": "q7Z"})
    for url in ("https://q7Z:x-oauth-basic@github.com/acme/helpbot", "https://u:pw@x/?t=q7Z", "https://q7Z@h"):
        assert "q7Z" not in g.text(url) and "q7Z" not in g.markdown(f"[clone]({url})"), url


def test_an_in_house_servers_header_token_is_masked_whatever_its_name(tmp_path: Path) -> None:
    config = tmp_path / "helpbot.toml"
    config.write_text('[[mcp_servers]]\nname = "sales"\nurl = "https://mcp.internal/mcp"\n'
                      'header_env = "SALES_MCP_KEY"\ntools = ["get_sales"]\n', encoding="utf-8")
    env = {"HELPBOT_CONFIG": str(config), "SALES_MCP_KEY": "k3y", "SALES_DB_PATH": "/srv/sales.db"}
    assert credential_values(env) == ["k3y"]
    assert Guard.from_env(env).text("鍵 k3y と /srv/sales.db") == "鍵 [REDACTED] と /srv/sales.db"


def test_the_job_summary_is_guarded_as_rendered_markdown_at_its_door(tmp_path: Path) -> None:
    from agent.guard import installed
    from agent.report import write_summary

    summary = tmp_path / "summary.md"
    with installed(Guard.from_env({})):
        write_summary({"GITHUB_STEP_SUMMARY": str(summary)},
                      "### Answer\n<!here> 連絡は ops@example.com へ。[詳細](https://evil.example/x?q=secret#f)")
    written = summary.read_text()
    assert "<!here>" not in written and "ops@example.com" not in written
    assert "https://evil.example/x" in written and "secret" not in written


def test_a_reactions_name_in_the_trace_is_kept_and_a_tools_name_still_checked(
        fake: FakeSlack, ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """helpbot's own reactions (👀, ✅) read as themselves in a public trace; ``name`` stays a tool-name field in
    every event, so a reaction field cannot carry a model-chosen name past the check."""
    from tests.fakes.outward import outward_env, run

    out = run(outward_env(fake), ws, fake, tmp_path, capsys, lambda request: "確認しました。")
    reactions = [e for e in out.events() if e["event"] == "front.reaction"]
    assert [e["reaction"] for e in reactions] == ["eyes", "eyes", "white_check_mark"], reactions  # on, off, ✅
    assert "unknown_tool" not in out.trace
    assert guard().event({"event": "front.reaction", "name": "eyes"})["name"] == UNKNOWN_TOOL


def test_no_names_stay_no_names_not_an_unknown_tool() -> None:
    guard = Guard.from_env({}, names=["faq_search"])
    assert guard.metadata({"tools": ""}) == {"tools": ""}
    assert guard.metadata({"tools": "faq_search,evil"}) == {"tools": f"faq_search,{UNKNOWN_TOOL}"}


def test_a_public_repositorys_runs_keep_private_records_and_a_run_cannot_make_them_public() -> None:
    public = Guard.from_env({"HELPBOT_REPOSITORY_VISIBILITY": "public"})
    assert public.private and public.for_run(private=False).private
    assert not Guard.from_env({"HELPBOT_REPOSITORY_VISIBILITY": "public", "HELPBOT_PUBLIC_RECORDS": "true"}).private
    assert not Guard.from_env({"HELPBOT_REPOSITORY_VISIBILITY": "private"}).private
    assert not Guard.from_env({}).private and Guard.from_env({}).for_run(private=True).private


@pytest.mark.parametrize("visibility", ["", "publc", "PRIVATE"])
def test_a_repository_of_unknown_visibility_keeps_private_records_in_actions(visibility: str) -> None:
    """Empty (an event that does not say) or a value GitHub does not send counts as public: records withheld."""
    env = {"GITHUB_ACTIONS": "true", "HELPBOT_REPOSITORY_VISIBILITY": visibility}
    assert Guard.from_env(env).private
    assert not Guard.from_env({**env, "HELPBOT_PUBLIC_RECORDS": "true"}).private
    assert not Guard.from_env({**env, "HELPBOT_REPOSITORY_VISIBILITY": "internal"}).private
    assert Guard.from_env({"HELPBOT_REPOSITORY_VISIBILITY": visibility}).private is bool(visibility)
