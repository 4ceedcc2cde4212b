"""Question tagging: keywords, the model only when ambiguous, hints in the prompt, FAQ boosts, footers, trace,
and helpbot.toml errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.core.loop import Agent
from agent.core.settings import Settings
from agent.core.tags import (
    TAGGER_SYSTEM,
    TagConfig,
    keyword_matches,
    parse_tag_config,
    parse_tagger_reply,
    tag_question,
)
from agent.errors import ModelUnavailable
from agent.slack.blocks import answer_payloads
from mcp_lib.config import ConfigError
from mcp_lib.external import server_entries
from mcp_lib.platforms.faq import FaqIndex
from tests.fakes.answers import make_answer
from tests.fakes.clock import FakeClock
from tests.fakes.loop import FakeTools
from tests.fakes.model import Request, ScriptedModel, calls

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "helpbot.example.toml"

CONFIG: dict[str, Any] = {
    "tagging": {"max_tags": 2},
    "tags": [
        {"name": "Shopify", "keywords": ["shopify", "ショッピファイ"], "description": "Shopify 連携",
         "hints": ["Shopify の API 制限を疑う"], "search_first": ["Growi /EC連携/Shopify", "Redmine project: shopify"],
         "faq_tags": ["Shopify"]},
        {"name": "楽天", "keywords": ["楽天", "rakuten", "rms"], "faq_tags": ["楽天", "RMS"]},
        {"name": "在庫", "keywords": ["在庫", "stock", "inventory"], "hints": "差分チェックで事実を確かめる",
         "faq_tags": ["在庫"]},
        {"name": "API", "keywords": ["api"]},
        {"name": "お問い合わせ", "keywords": ["お客様"], "patterns": ["お?問い?合わ?せ(?!番号)"]},
    ],
}


def config(**tagging: Any) -> TagConfig:
    parsed = parse_tag_config({**CONFIG, "tagging": {**CONFIG["tagging"], **tagging}})
    assert parsed is not None
    return parsed


@pytest.fixture(autouse=True)
def in_tmp_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no ./helpbot.toml but the ones the tests write


def write_config(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "helpbot.toml"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("HELPBOT_CONFIG", str(path))
    return path


def tag(question: str, model: ScriptedModel | None = None, cfg: TagConfig | None = None) -> Any:
    return tag_question(cfg or config(), question, model=model, settings=Settings(), clock=FakeClock())


# -- keywords ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("question", "expected"), [
    ("Shopifyの在庫が反映されない", {"Shopify", "在庫"}),  # Japanese around a Latin word
    ("inventory not syncing to shopify", {"Shopify", "在庫"}),  # English
    ("ＳＨＯＰＩＦＹ の注文", {"Shopify"}),  # full-width letters (NFKC) and upper case
    ("ショッピファイのストア", {"Shopify"}),
    ("RMSのライセンスキー", {"楽天"}),
    ("rapid growth of orders", set()),  # "api" is a whole word, not part of "rapid"
    ("the API returns 401", {"API"}),
    ("お客様から問い合わせがありました", {"お問い合わせ"}),
    ("お問合せ: 在庫", {"お問い合わせ", "在庫"}),
    ("追跡番号（お問い合わせ番号）が反映されない", set()),  # the pattern excludes the tracking number
])
def test_keyword_tagging(question: str, expected: set[str]) -> None:
    assert set(keyword_matches(config(), question)) == expected


def test_several_tags_match_and_are_all_applied_without_asking() -> None:
    model = ScriptedModel(lambda request: pytest.fail("the model must not be asked"))
    result = tag("楽天とShopifyの在庫", model=model, cfg=config(max_tags=3))
    assert result.names == ["Shopify", "楽天", "在庫"] and result.method == "keywords"
    assert not result.consulted and result.ambiguous is None and model.requests == []
    assert result.matched == {"Shopify": ["shopify"], "楽天": ["楽天"], "在庫": ["在庫"]}
    assert result.faq_tags == ["Shopify", "楽天", "RMS", "在庫"]


# -- the model, only when the keywords are ambiguous -------------------------------------------------------------
def tagger(reply: str) -> ScriptedModel:
    def script(request: Request) -> str:
        assert request.system_text == TAGGER_SYSTEM and request.tools == [] and request.max_tokens <= 200
        return reply

    return ScriptedModel(script)


def test_no_keyword_matched_asks_the_summary_model_among_all_tags() -> None:
    model = tagger('{"tags": ["在庫"]}')
    result = tag("数が合わないんだけど", model=model)
    assert result.names == ["在庫"] and result.method == "model" and result.consulted
    assert result.ambiguous == "no tag's keywords matched"
    [request] = model.requests
    assert request.model == Settings().summary_model
    asked = request.messages[0]["content"][0]["text"]
    assert all(f"- {name}" in asked for name in ("Shopify", "楽天", "在庫", "API", "お問い合わせ"))
    assert "数が合わないんだけど" in asked
    assert result.usage.input_tokens > 0


def test_too_many_matches_asks_among_the_matched_ones_only() -> None:
    model = tagger('選びました：\n```json\n{"tags": ["楽天", "Shopify", "お問い合わせ"]}\n```')
    result = tag("楽天とShopifyの在庫がずれる", model=model)  # three matches, max_tags 2
    asked = model.requests[0].messages[0]["content"][0]["text"]
    assert "- Shopify" in asked and "- 在庫" in asked and "- API" not in asked and "お問い合わせ" not in asked
    assert result.names == ["楽天", "Shopify"]  # お問い合わせ was not a candidate; at most max_tags


@pytest.mark.parametrize("reply", ["在庫だと思います", '{"tags": "在庫"}', "{not json}"])
def test_an_unreadable_reply_keeps_the_keyword_result(reply: str) -> None:
    result = tag("楽天とShopifyの在庫がずれる", model=tagger(reply))
    assert result.consulted and result.model_error and "unreadable" in result.model_error
    assert result.names == ["Shopify", "楽天"] and result.method == "keywords"  # the best two, config order


def test_a_model_that_is_down_keeps_the_keyword_result() -> None:
    def down(request: Request) -> str:
        raise ModelUnavailable("throttled")

    result = tag("数が合わない", model=ScriptedModel(down))
    assert result.names == [] and result.method == "none" and "throttled" in (result.model_error or "")


def test_no_model_or_ask_model_false_means_keywords_only() -> None:
    assert tag("数が合わない").names == []
    model = ScriptedModel(lambda request: pytest.fail("ask_model = false"))
    assert tag("数が合わない", model=model, cfg=config(ask_model=False)).consulted is False


def test_reply_parsing_keeps_only_candidates() -> None:
    tags = config().tags
    assert [t.name for t in parse_tagger_reply('["shopify", "Nope", "在庫", "在庫"]', tags, 3) or []] == [
        "Shopify", "在庫"]
    assert parse_tagger_reply('{"tags": []}', tags, 3) == []
    assert parse_tagger_reply("none", tags, 3) is None
    assert parse_tagger_reply("[" * 100_000 + "]" * 100_000, tags, 3) is None  # deeper than json goes: not JSON


# -- applying the tags: system prompt, FAQ boosts, footer, trace -------------------------------------------------
def faq_tools() -> FakeTools:
    return FakeTools({"faq_search": lambda args: [{"title": "FAQ", "url": "faq://stock-sync-delay"}]})


def answering(request: Request) -> Any:
    if request.system_text == TAGGER_SYSTEM:
        return '{"tags": []}'
    if request.round == 1:
        return calls(("faq_search", {"query": "在庫"}))
    return "在庫同期を確認してください。[FAQ](faq://stock-sync-delay)"


def test_hints_search_first_and_faq_tags_reach_the_system_prompt() -> None:
    model = ScriptedModel(answering)
    events: list[dict[str, Any]] = []
    agent = Agent(model, faq_tools(), Settings(), clock=FakeClock(), on_event=events.append, tags=config())
    answer = agent.run("Shopifyの在庫が反映されない")
    system = model.requests[0].system_text
    assert "## Question tags" in system and "Shopify, 在庫" in system
    assert "- Shopify の API 制限を疑う" in system and "- 差分チェックで事実を確かめる" in system
    assert "Search these first: Growi /EC連携/Shopify; Redmine project: shopify" in system
    assert 'pass tags=["Shopify", "在庫"]' in system
    assert system.index("## Question tags") < system.index("## fake")  # before the tools' guide, like extras
    assert answer.tags == ["Shopify", "在庫"] and answer.to_json()["tags"] == ["Shopify", "在庫"]
    # The trace starts with the tagging, and on_event saw it before the run started.
    assert answer.trace[0]["event"] == "tags" and answer.trace[0]["tags"] == ["Shopify", "在庫"]
    assert answer.trace[0]["matched"] == {"Shopify": ["shopify"], "在庫": ["在庫"]}
    assert [e["event"] for e in events[:2]] == ["tags", "run_start"]


def test_the_next_question_gets_its_own_tags_not_the_previous_ones() -> None:
    model = ScriptedModel(answering)
    agent = Agent(model, faq_tools(), Settings(), clock=FakeClock(), tags=config())
    agent.run("Shopifyの在庫が反映されない")
    second = agent.run("RMSのキーが切れた")
    system = model.requests[-1].system_text
    assert second.tags == ["楽天"] and "Shopify の API 制限" not in system and 'pass tags=["楽天", "RMS"]' in system
    assert isinstance(agent.tools, FakeTools)  # restored after each run


def test_without_a_matching_tag_the_prompt_has_no_tag_part() -> None:
    model = ScriptedModel(answering)
    answer = Agent(model, faq_tools(), Settings(), clock=FakeClock(), tags=config(ask_model=False)).run("こんにちは")
    assert "## Question tags" not in model.requests[0].system_text and answer.tags == []
    assert answer.trace[0]["event"] == "tags" and answer.trace[0]["method"] == "none"


def test_the_tagging_request_is_counted_in_usage_and_cost() -> None:
    model = ScriptedModel(answering)
    settings = Settings()
    tagged = Agent(model, faq_tools(), settings, clock=FakeClock(), tags=config()).run("数が合わない")
    plain = Agent(ScriptedModel(answering), faq_tools(), settings, clock=FakeClock()).run("数が合わない")
    assert tagged.usage_by_model[settings.summary_model].input_tokens > 0
    assert settings.summary_model not in plain.usage_by_model
    assert tagged.cost_usd > plain.cost_usd
    assert tagged.trace[0]["model_consulted"] is True and tagged.trace[0]["usage"]["input_tokens"] > 0


def test_degraded_mode_passes_the_faq_tags_to_faq_search() -> None:
    tools = faq_tools()
    answer = Agent(None, tools, Settings(), clock=FakeClock(), tags=config()).run("Shopifyの在庫")
    assert answer.degraded and tools.seen == [("faq_search", {"query": "Shopifyの在庫"})]  # FakeTools: no tags param

    class TagAwareTools(FakeTools):
        def schemas(self) -> list[dict[str, Any]]:
            return [{"name": "faq_search", "description": "", "input_schema": {"type": "object", "properties": {
                "query": {"type": "string"}, "tags": {"type": "array"}}}}]

    aware = TagAwareTools(tools.functions)
    Agent(None, aware, Settings(), clock=FakeClock(), tags=config()).run("Shopifyの在庫")
    assert aware.seen == [("faq_search", {"query": "Shopifyの在庫", "tags": ["Shopify", "在庫"]})]


def test_a_follow_up_inherits_its_threads_tags() -> None:
    from agent.core.run import Turn

    model = ScriptedModel(answering)
    agent = Agent(model, faq_tools(), Settings(), clock=FakeClock(), tags=config(ask_model=False))
    answer = agent.run("それはいつ直りますか？", history=[Turn("Shopifyの在庫がずれる", "差分チェックを…")])
    assert answer.tags == ["Shopify", "在庫"]


def test_the_thread_context_counts_for_the_tags_and_still_reaches_the_model_apart() -> None:
    model = ScriptedModel(answering)
    tools = faq_tools()
    agent = Agent(model, tools, Settings(), clock=FakeClock(), tags=config(ask_model=False))
    answer = agent.run("それはいつ直りますか？", context="- @suzuki: Shopifyの在庫がずれています")
    assert answer.tags == ["Shopify", "在庫"]
    first = model.requests[0].messages[0]["content"][0]["text"]
    assert first.startswith("それはいつ直りますか？\n\n<context>") and "Shopifyの在庫がずれています" in first

    degraded = Agent(None, tools, Settings(), clock=FakeClock(), tags=config(ask_model=False))
    degraded.run("それはいつ直りますか？", context="- @suzuki: Shopifyの在庫がずれています")
    assert tools.seen[-1] == ("faq_search", {"query": "それはいつ直りますか？"})  # the question alone


# -- through helpbot ask: footer, JSON, degraded boosts, Slack footer -------------------------------------------
def test_helpbot_ask_shows_the_tags_in_the_footer_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HELPBOT_CONFIG", str(EXAMPLE))
    assert main(["ask", "Shopifyの在庫同期が遅い"]) == 0
    footer = capsys.readouterr().out.strip().splitlines()[-1]
    assert "· tools 1 (faq_search) · tags Shopify, 在庫 · tokens" in footer
    assert main(["ask", "Shopifyの在庫同期が遅い", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tags"] == ["Shopify", "在庫"]
    assert data["tool_calls"][0]["input"] == {"query": "Shopifyの在庫同期が遅い",
                                              "tags": ["Shopify", "在庫", "在庫同期"]}
    assert data["sources"][0]["url"] == "faq://stock-sync-delay"


def test_without_helpbot_toml_there_are_no_tags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Shopifyの在庫同期が遅い", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tags"] == [] and data["tool_calls"][0]["input"] == {"query": "Shopifyの在庫同期が遅い"}


def test_helpbot_answer_posts_the_tags_in_the_slack_footer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Slack front builds its agent with build_agent too: the posted footer carries the tags."""
    from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack, sample_workspace

    ws = sample_workspace()
    question = ws.history("C0ECSUP")[0]  # 「Shopify の在庫同期が30分以上遅れています。…」
    with FakeSlack(ws) as fake:
        for name, value in {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_USER_TOKEN": USER_TOKEN, "SLACK_API_URL": fake.url,
                            "HELPBOT_CONFIG": str(EXAMPLE)}.items():
            monkeypatch.setenv(name, value)
        assert main(["answer", "--channel", "C0ECSUP", "--ts", question.ts]) == 0
    [answer] = [m for m in ws.thread("C0ECSUP", question.ts) if m.blocks and m.user != question.user
                and m.ts != question.ts and m.metadata]
    footer = next(b for b in answer.blocks or [] if b["type"] == "context")["elements"][0]["text"]
    assert "タグ Shopify・在庫" in footer


def test_the_slack_footer_shows_the_tags() -> None:
    tagged = make_answer("a", rounds=1, cost_usd=0.01, tags=["Shopify", "在庫"])
    footer = answer_payloads(tagged)[-1]["blocks"][-1]["elements"][0]["text"]
    assert "タグ Shopify・在庫" in footer
    plain = answer_payloads(make_answer("a", rounds=1, cost_usd=0.01))[-1]["blocks"][-1]["elements"][0]["text"]
    assert "タグ" not in plain


# -- configuration errors -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("toml", "words"), [
    ('tags = "Shopify"', "helpbot.toml tags: must be a list of [[tags]] tables"),
    ("[tags]\nname = 'x'\nkeywords = ['x']", "helpbot.toml tags: must be a list"),
    ("[[tags]]\nkeywords = ['x']", "helpbot.toml tags[0]: name: Field required"),
    ("[[tags]]\nname = 'A'\nkeywords = ['a']\n[[tags]]\nname = 'B'",
     "helpbot.toml tags[1] (B): keywords: Field required"),
    ("[[tags]]\nname = 'A'\nkeywords = []", "tags[0] (A): keywords: List should have at least 1 item"),
    ("[[tags]]\nname = 'A'\nkeywords = ['']", "tags[0] (A): keywords: Value error, a keyword is blank"),
    ("[[tags]]\nname = 'A'\nkeywords = ['a']\npatterns = ['(']", "tags[0] (A): patterns: Value error, '('"),
    ("[[tags]]\nname = 'A'\nkeywords = ['a']\nkeyword = 'b'", "tags[0] (A): keyword: Extra inputs"),
    ("[[tags]]\nname = 'A'\nkeywords = ['a']\n[[tags]]\nname = 'a'\nkeywords = ['b']", "two tags are named 'A'"),
    ("[tagging]\nmax_tags = 2", "there is a [tagging] table but no [[tags]]"),
    ("[tagging]\nmax_tags = 0\n[[tags]]\nname = 'A'\nkeywords = ['a']", "helpbot.toml tagging: max_tags"),
    ("[[tags]\nname = 'A'", "not valid TOML"),
])
def test_bad_helpbot_toml_is_one_line_and_exit_2(toml: str, words: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    write_config(tmp_path, toml, monkeypatch)
    assert main(["ask", "在庫"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("helpbot: configuration error: ") and words in err, err


def test_parse_errors_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"tags\[0\]: name"):
        parse_tag_config({"tags": [{"keywords": ["x"]}]})
    assert parse_tag_config({}) is None and parse_tag_config({"tags": []}) is None


# -- the shipped example ----------------------------------------------------------------------------------------------
def test_the_example_config_fits_the_bundled_faq() -> None:
    """Every faq_tags value of helpbot.example.toml is a tag some bundled FAQ entry carries (a typo boosts nothing)."""
    import tomllib

    parsed = parse_tag_config(tomllib.loads(EXAMPLE.read_text(encoding="utf-8")))
    assert parsed is not None and len(parsed.tags) >= 8
    faq_tags = {t for entry in FaqIndex.load(REPO / "faq").entries for t in entry.tags}
    for t in parsed.tags:
        assert set(t.faq_tags) <= faq_tags, f"{t.name}: {set(t.faq_tags) - faq_tags} not in the FAQ"


def test_the_commented_mcp_server_examples_are_valid_when_uncommented(tmp_path: Path) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    toml_line = re.compile(r"^# (\[\[mcp_servers\]\]|[a-z_]+ = .*)$")
    lines = [m.group(1) for line in text.splitlines() if (m := toml_line.match(line))]
    path = tmp_path / "servers.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    entries = server_entries({"HELPBOT_CONFIG": str(path)})
    assert [e.name for e in entries] == ["sales", "saleshttp"]
    assert entries[0].command == "uv" and entries[0].tools == ["get_customers", "get_sales"]
    assert not entries[0].allow_writes and entries[1].url == "http://127.0.0.1:8765/mcp"

