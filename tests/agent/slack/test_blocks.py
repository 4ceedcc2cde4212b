"""Slack output: safe splitting, sources and footer, metadata, and the public guard on everything posted."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest

from agent import guard
from agent.core.run import Answer
from agent.guard import Guard, installed
from agent.slack.blocks import (
    DEGRADED_LABEL,
    FEEDBACK_LINE,
    MARKDOWN_LIMIT,
    MAX_ANSWER_PARTS,
    PLACEHOLDER,
    answer_metadata,
    answer_payloads,
    failure_payload,
    placeholder_payload,
    plain_fallback,
    progress_payload,
    question_payload,
    run_url,
    sources_markdown,
)
from agent.slack.markers import EVENT_TYPES, Me, find_answer
from mcp_lib.cutting import slack_len, split_markdown
from tests.fakes.answers import make_answer


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    """The names a run would have registered (footers and progress show only those: agent.guard)."""
    names = ["faq_search", "faq_getEntry", "slack_searchMessages", "slack_getThreadMessages", "redmine_search",
             "growi_searchPages", "sales_x"]
    with installed(Guard.from_env({}, names=names)):
        yield


FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
TS = "1700000000.123456"
RUN = "https://github.com/acme/helpbot/actions/runs/42"


def fences_balanced(part: str) -> bool:
    open_fence = None
    for line in part.split("\n"):
        match = FENCE.match(line)
        if not match:
            continue
        if open_fence is None:
            open_fence = match.group(1)
        elif line.strip() and set(line.strip()) == {open_fence[0]} and len(line.strip()) >= len(open_fence):
            open_fence = None
    return open_fence is None


def content(text: str) -> str:
    """The text without fence lines and whitespace: what splitting must never lose or reorder."""
    lines = [line for line in text.split("\n") if not FENCE.match(line)]
    return re.sub(r"\s+", "", "".join(lines))


def code_lines(text: str) -> int:
    """Non-blank lines inside fenced code: splitting may add some (cut long lines), never lose any."""
    count, open_fence = 0, ""
    for line in text.split("\n"):
        match = FENCE.match(line)
        if match and not open_fence:
            open_fence = match.group(1)
        elif match and set(line.strip()) == {open_fence[0]} and len(line.strip()) >= len(open_fence):
            open_fence = ""
        elif open_fence and line.strip():
            count += 1
    return count


def markdown_chars(payload: dict) -> int:
    return sum(slack_len(b["text"]) for b in payload["blocks"] if b["type"] == "markdown")


def result(answer: str, *, tool_calls: list[dict[str, str]] | None = None, **extra: Any) -> Answer:
    return make_answer(answer, tools=[c["name"] for c in tool_calls or [{"name": "faq_search"}]], **extra)


def keeping_personal() -> Any:
    """The guard as ``HELPBOT_MASK_PERSONAL=false`` installs it."""
    return installed(Guard.from_env({"HELPBOT_MASK_PERSONAL": "false"}, names=["faq_search"]))


# -- counting and splitting -------------------------------------------------------------------------------------
def test_slack_len_counts_characters_not_bytes() -> None:
    assert slack_len("在庫同期") == 4  # 12 bytes in UTF-8
    assert slack_len("👍") == 2  # outside the BMP: two UTF-16 units
    assert slack_len("") == 0


def test_short_answer_is_one_part_and_unchanged() -> None:
    text = "# 手順\n\n1. 管理画面を開く\n2. **在庫同期**を実行\n\n```bash\ncurl -s https://example.com\n```"
    assert split_markdown(text) == [text]


def test_code_block_split_closes_and_reopens_the_fence() -> None:
    code = "\n".join(f"print({i})  # 在庫 {i}" for i in range(400))
    text = f"説明です。\n\n```python\n{code}\n```\n\n以上です。"
    parts = split_markdown(text, 2000)
    assert len(parts) > 3
    for part in parts:
        assert slack_len(part) <= 2000
        assert fences_balanced(part), part[-80:]
    code_parts = [p for p in parts if "print(" in p]
    assert all(p.lstrip("説明です。\n").startswith("```python") for p in code_parts)
    assert content("\n".join(parts)) == content(text)


def test_paragraph_boundaries_are_preferred() -> None:
    paragraphs = [f"段落{i}：" + "在庫を確認します。" * 40 for i in range(10)]
    parts = split_markdown("\n\n".join(paragraphs), 1500)
    for part in parts:
        for chunk in part.split("\n\n"):
            assert chunk in paragraphs  # no paragraph was cut, since each fits on its own


def test_lines_are_preferred_over_cutting_inside_a_line() -> None:
    lines = [f"- 項目{i}: 在庫数を確認" for i in range(300)]
    parts = split_markdown("\n".join(lines), 1000)
    assert len(parts) > 1
    for part in parts:
        assert all(line in lines for line in part.split("\n"))


def test_japanese_line_without_spaces_is_cut_after_a_sentence() -> None:
    text = "注文取込が遅れる場合は管理画面で同期状況を確認してください。" * 200
    parts = split_markdown(text, 1000)
    assert len(parts) > 1
    assert all(slack_len(p) <= 1000 and p.endswith("。") for p in parts[:-1])
    assert "".join(parts) == text


def test_emoji_sequences_are_not_broken() -> None:
    family = "👨\u200d👩\u200d👧"
    text = (family + "、") * 3000  # no spaces or newlines at all
    for part in split_markdown(text, 500):
        assert slack_len(part) <= 500
        assert not part.startswith("\u200d") and not part.endswith("\u200d")
        assert part.replace("、", "").replace(family, "") == ""


def test_table_header_is_repeated() -> None:
    rows = "\n".join(f"| SKU-{i:04d} | {i} | 在庫あり |" for i in range(200))
    text = f"| SKU | 数量 | 状態 |\n|---|---|---|\n{rows}"
    parts = split_markdown(text, 1500)
    assert len(parts) > 1
    assert all(p.startswith("| SKU | 数量 | 状態 |\n|---|---|---|\n") for p in parts)


def test_unterminated_fence_is_closed() -> None:
    parts = split_markdown("見てください:\n\n```json\n{\"a\": 1}", 1000)
    assert parts == ["見てください:\n\n```json\n{\"a\": 1}\n```"]


def test_a_fence_line_longer_than_the_limit_is_cut_as_plain_lines_within_the_limit() -> None:
    # the model's answer: an info string that leaves no room in a part, then emoji (this once looped forever)
    text = "```" + "x" * 100 + "\n😀😀\n```"
    parts = split_markdown(text, 40)
    assert all(0 < slack_len(part) <= 40 for part in parts)
    assert "".join(parts).replace("\n", "") == text.replace("\n", "")  # cut as plain lines, nothing lost


@pytest.mark.parametrize("seed", range(25))
def test_random_markdown_splits_within_limit_balanced_and_lossless(seed: int) -> None:
    rng = random.Random(seed)
    words = ["在庫", "同期", "Shopify", "楽天", "注文", "API", "です。", "👍", "rate limit", "CSV", "が"]
    blocks = []
    for _ in range(rng.randint(5, 40)):
        kind = rng.random()
        if kind < 0.3:
            lang = rng.choice(["", "python", "json", "bash"])
            fence = rng.choice(["```", "~~~", "````"])
            body = "\n".join("".join(rng.choices(words, k=rng.randint(0, 30))) for _ in range(rng.randint(1, 60)))
            blocks.append(f"{fence}{lang}\n{body}\n{fence}")
        elif kind < 0.4:
            blocks.append("".join(rng.choices(words, k=rng.randint(200, 2000))))  # one very long line
        else:
            blocks.append("\n".join("- " + " ".join(rng.choices(words, k=rng.randint(1, 20)))
                                    for _ in range(rng.randint(1, 15))))
    text = "\n\n".join(blocks)
    limit = rng.choice([200, 700, 3000, MARKDOWN_LIMIT])
    parts = split_markdown(text, limit)
    for part in parts:
        assert slack_len(part) <= limit
        assert fences_balanced(part)
    assert content("\n".join(parts)) == content(text)
    assert sum(code_lines(p) for p in parts) >= code_lines(text)


# -- answer payloads ----------------------------------------------------------------------------------------------
def test_answer_payload_shape() -> None:
    res = result("在庫同期は **15分ごと** に走ります。<!channel> へ通知は不要です。",
                 sources=[{"title": "FAQ: 在庫同期の遅れ", "url": "https://example.com/faq/stock-sync-delay"}],
                 tool_calls=[{"name": "faq_search"}, {"name": "slack_searchMessages"}, {"name": "faq_getEntry"}],
                 rounds=3, cost_usd=0.0123)
    [payload] = answer_payloads(res, channel="C0123ABCD", question_ts=TS, run_link=RUN)
    answer, sources, footer = payload["blocks"]
    assert answer["type"] == "markdown" and answer["text"].startswith("在庫同期は **15分ごと**")
    assert sources == {"type": "markdown",
                       "text": "**参照元**\n- [FAQ: 在庫同期の遅れ](https://example.com/faq/stock-sync-delay)"}
    assert footer["type"] == "context"
    footer_text = footer["elements"][0]["text"]
    for expected in ("ラウンド 3", "ツール 3 回（FAQ・Slack）", "推定コスト $0.012", f"<{RUN}|実行ログ>"):
        assert expected in footer_text
    assert footer["elements"][1]["text"] == FEEDBACK_LINE
    assert payload["metadata"] == {"event_type": EVENT_TYPES["answer"], "event_payload": {
        "version": 1, "question_channel": "C0123ABCD", "question_ts": TS, "rounds": 3, "tool_calls": 3,
        "tools": "faq_search,slack_searchMessages,faq_getEntry", "sources": 1, "cost_usd": 0.0123,
        "degraded": False, "parts": 1}}
    # The plain fallback has no markdown markup and no live Slack control sequences.
    assert payload["text"].startswith("在庫同期は 15分ごと に走ります。")
    assert "<!channel>" not in json.dumps(payload, ensure_ascii=False)


def test_no_run_link_outside_actions() -> None:
    [payload] = answer_payloads(result("OK"))
    footer = payload["blocks"][-1]["elements"][0]["text"]
    assert "実行ログ" not in footer and "推定コスト &lt;$0.001" in footer
    assert len(payload["blocks"]) == 2  # answer + footer: no sources section without sources


def test_long_answer_is_split_into_payloads_within_the_limit() -> None:
    code = "\n".join(f"SELECT * FROM stock WHERE sku = 'SKU-{i}';  -- 在庫" for i in range(900))
    answer = ("概要です。\n\n" + "在庫の同期手順を説明します。" * 600 + "\n\n```sql\n" + code + "\n```\n\n"
              + "以上です。")
    sources = [{"title": f"チケット #{i}", "url": f"https://redmine.example.com/issues/{i}"} for i in range(8)]
    payloads = answer_payloads(result(answer, sources=sources), channel="C0123ABCD", question_ts=TS, run_link=RUN)
    assert len(payloads) >= 4
    for payload in payloads:
        assert markdown_chars(payload) <= MARKDOWN_LIMIT
        for block in payload["blocks"]:
            if block["type"] == "markdown":
                assert fences_balanced(block["text"])
        assert payload["text"]
    assert "metadata" in payloads[0] and all("metadata" not in p for p in payloads[1:])
    assert payloads[0]["metadata"]["event_payload"]["parts"] == len(payloads)
    assert all(b["type"] == "markdown" for p in payloads[:-1] for b in p["blocks"])  # footer only at the end
    assert "**参照元**" in payloads[-1]["blocks"][-2]["text"]
    body = "\n".join(b["text"] for p in payloads for b in p["blocks"] if b["type"] == "markdown")
    assert content(answer) in content(body)


def test_japanese_counts_characters_so_11000_fit_in_one_payload() -> None:
    answer = "在" * 11_000  # 33,000 UTF-8 bytes
    assert len(answer_payloads(result(answer))) == 1


def test_emoji_count_double() -> None:
    payloads = answer_payloads(result("👍" * 7_000))  # 14,000 UTF-16 units
    assert len(payloads) == 2
    assert all(markdown_chars(p) <= MARKDOWN_LIMIT for p in payloads)


def test_runaway_answer_is_capped_with_a_note() -> None:
    payloads = answer_payloads(result("あ。\n\n" * 60_000))
    assert len(payloads) == MAX_ANSWER_PARTS
    assert payloads[-1]["blocks"][0]["text"].endswith("以降を省略しました）")


def test_sources_fill_a_payload_of_their_own_when_needed() -> None:
    sources = [{"title": "t" * 100, "url": f"https://example.com/{i}"} for i in range(10)]
    payloads = answer_payloads(result("あ" * 11_900, sources=sources))
    assert len(payloads) == 2
    assert payloads[1]["blocks"][0]["text"].startswith("**参照元**")


def test_degraded_answer_is_labelled_not_ai() -> None:
    [payload] = answer_payloads(result("- [在庫同期の遅れ](https://example.com/faq/1)", degraded=True,
                                       cost_usd=0.0, rounds=0))
    assert payload["blocks"][0]["text"].startswith(DEGRADED_LABEL)
    assert payload["text"].startswith("⚠️ AIによる回答ではありません。")
    footer = payload["blocks"][-1]["elements"][0]["text"]
    assert "AI生成ではありません" in footer and "推定コスト" not in footer
    assert payload["metadata"]["event_payload"]["degraded"] is True


def test_sources_markdown_dedupes_escapes_and_bounds() -> None:
    text = sources_markdown([
        {"title": "[楽天] 注文取込\nエラー", "url": "https://example.com/a b(1)"},
        {"title": "dup", "url": "https://example.com/a b(1)"},
        {"title": "no link", "url": "javascript:alert(1)"},
        {"title": "", "url": "https://example.com/untitled"},
    ])
    assert text.split("\n") == [
        "**参照元**",
        "- [［楽天］ 注文取込 エラー](https://example.com/a%20b%281%29)",
        "- no link",
        "- [https://example.com/untitled](https://example.com/untitled)",
    ]
    many = sources_markdown({"title": f"t{i}", "url": f"https://example.com/{i}"} for i in range(40))
    assert many.endswith("- ほか 25 件")
    assert sources_markdown([]) == ""


# -- small messages -----------------------------------------------------------------------------------------------
def test_placeholder_and_progress() -> None:
    assert placeholder_payload()["text"] == PLACEHOLDER == "調べています…"
    assert progress_payload(1, 10)["text"] == "調べています…（ラウンド 1/10）"
    text = progress_payload(2, 10, ["slack_searchMessages", "redmine_search", "slack_getThreadMessages", "sales_x"])
    assert text["text"] == "調べています…（ラウンド 2/10：Slack・Redmine・sales を検索中）"
    assert progress_payload(2, 10, ["growi_searchPages"])["text"].endswith("Growi を検索中）")


def test_failure_notice_names_what_failed_and_links_the_run() -> None:
    payload = failure_payload("Bedrock unavailable after retries (token ghp_" + "a" * 36 + ")", RUN,
                              channel="C0123ABCD", question_ts=TS)
    assert "Bedrock unavailable after retries" in payload["text"]
    assert f"<{RUN}|実行ログ>" in payload["text"]
    assert "ghp_" not in json.dumps(payload)
    assert payload["metadata"]["event_type"] == "helpbot_failure"
    # not an answer: a new reaction tries again
    assert find_answer([{**payload, "bot_id": "B0HELPBOT"}], TS, me=ME) is None
    no_link = failure_payload("x" * 2000)
    assert "もう一度リアクション" in no_link["text"] and slack_len(no_link["text"]) < 400


def test_failure_notice_is_one_line_without_urls() -> None:
    """A SlackApiError's text is several lines with the API URL in it: the channel gets one line, no URL."""
    what = ("The request to the Slack API failed. (url: https://slack.com/api/chat.postMessage)\n"
            "The server responded with: {'ok': False, 'error': 'msg_too_long'}")
    text = failure_payload(what, RUN)["text"]
    assert "\n" not in text and "slack.com/api" not in text and "msg_too_long" in text
    assert f"<{RUN}|実行ログ>" in text  # the run link is the one URL, added on purpose


def test_a_free_question_is_escaped_and_fits_slacks_section_limit() -> None:
    question = ("<https://evil.example.com|社内ポータル> から <!channel> @here 在庫の件。 & 詳細は以下\n"
                + "在庫同期の遅延について詳しく説明します。" * 190)  # about 3,900 characters, under the 4,000 allowed
    payload = question_payload(question, "octocat")
    texts = [b["text"]["text"] for b in payload["blocks"]]
    assert len(texts) >= 2 and all(b["type"] == "section" for b in payload["blocks"])
    assert all(slack_len(t) <= 3000 for t in texts)
    joined = "".join(texts)
    assert "<https://evil" not in joined and "<!channel>" not in joined and "<" not in payload["text"]
    assert "&lt;https://evil.example.com|社内ポータル&gt;" in joined and "&amp;" in joined
    assert "octocat" in texts[0] and all(t.split("\n")[-1].startswith(">") for t in texts)
    assert slack_len(payload["text"]) <= 600


def test_run_url() -> None:
    env = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/helpbot", "GITHUB_RUN_ID": "42"}
    assert run_url(env) == RUN
    assert run_url({**env, "GITHUB_RUN_ID": ""}) is None


ME = Me(bot_id="B0HELPBOT")


def test_find_answer_uses_the_metadata() -> None:
    [payload] = answer_payloads(result("OK"), channel="C0123ABCD", question_ts=TS)
    thread = [
        {"ts": TS, "text": "在庫がずれています"},
        {"ts": "1700000001.000000", "text": PLACEHOLDER, "bot_id": "B0HELPBOT"},
        {"ts": "1700000002.000000", "text": "OK", "bot_id": "B0HELPBOT", "metadata": payload["metadata"]},
    ]
    assert find_answer(thread, TS, me=ME) is thread[2]
    assert find_answer(thread, "1700000009.000000", me=ME) is None
    assert find_answer(thread, TS, channel="C0OTHER", me=ME) is None
    assert find_answer(thread[:2], TS, me=ME) is None


def test_find_answer_ignores_helpbot_metadata_on_another_apps_message() -> None:
    """Any app can attach ``helpbot_answer`` metadata: only helpbot's own message counts as its answer."""
    [payload] = answer_payloads(result("OK"), channel="C0123ABCD", question_ts=TS)
    forged = {"ts": "1700000002.000000", "text": "OK", "bot_id": "B0OTHERAPP", "metadata": payload["metadata"]}
    assert find_answer([{"ts": TS, "text": "質問"}, forged], TS, me=ME) is None


# -- the public guard -----------------------------------------------------------------------------------------------
SECRET_CASES = [
    "token xoxb-1234567890-abcdefghij",
    "トークンはxoxb-1234567890-abcdefghijです",
    "キーはghp_" + "A" * 36 + "です",
    "AWSキーAKIAABCDEFGHIJKLMNOPを使用",
    "password: hunter2hunter2",
]
PERSONAL_CASES = [
    ("mail taro@example.com now", "taro@example.com"),
    ("連絡先はtaro@example.comまで", "taro@example.com"),
    ("電話は03-1234-5678です", "1234-5678"),
    ("TEL 0120-123-456", "123-456"),
    ("携帯：090-1234-5678", "1234-5678"),
    ("海外からは+81 90 1234 5678へ", "1234 5678"),
    ("番号09012345678に", "09012345678"),
    ("全角で０３－１２３４－５６７８です", "１２３４"),
]
KEEP = [
    "2024-01-15 10:00 に発生", "ts 1700000000.123456", "v1.2.3", "チケット #1234", "¥1,200",
    RUN, "https://acme.slack.com/archives/C0123ABCD/p1700000000123456", "SKU-0001-XL", "在庫 120 個",
    "2024-01-15T10:00:00+09:00", "差分は+1,200円", "order 1234567890",
]


@pytest.mark.parametrize("text", SECRET_CASES)
def test_guard_masks_secrets_even_without_personal_masking(text: str) -> None:
    for personal in (False, True):
        with keeping_personal() if personal else installed(Guard.from_env({})):
            guarded = guard.markdown(text)
        assert "[REDACTED]" in guarded
        assert not re.search(r"xoxb-\d|ghp_A|AKIAAB|hunter2", guarded)


@pytest.mark.parametrize("text,needle", PERSONAL_CASES)
def test_guard_masks_personal_data(text: str, needle: str) -> None:
    guarded = guard.markdown(text)
    assert needle not in guarded and ("[email]" in guarded or "[phone]" in guarded), guarded
    with keeping_personal():
        assert guard.markdown(text) == text


@pytest.mark.parametrize("text", KEEP)
def test_guard_keeps_ordinary_text(text: str) -> None:
    assert guard.markdown(text) == text


def test_guard_defuses_broadcast_mentions() -> None:
    guarded = guard.markdown("<!here> <!channel|channel> @everyone <!subteam^S0123|@support> <@U0123ABCD>")
    assert guarded == "＠here ＠channel ＠everyone ＠support ＠U0123ABCD"  # a user mention notifies too


def test_guard_is_applied_to_every_part_of_the_answer() -> None:
    res = result("担当は taro@example.com、電話は03-1234-5678。トークンxoxp-1234567890-abcdefghij",
                 sources=[{"title": "hanako@example.com の報告", "url": "https://example.com/1"}],
                 tool_calls=[{"name": "faq_search"}])
    dumped = json.dumps(answer_payloads(res, question_ts=TS), ensure_ascii=False)
    for leaked in ("taro@example.com", "hanako@example.com", "1234-5678", "xoxp-"):
        assert leaked not in dumped
    with keeping_personal():
        kept = json.dumps(answer_payloads(res, question_ts=TS), ensure_ascii=False)
    assert "taro@example.com" in kept and "xoxp-" not in kept


def test_a_source_url_that_urlparse_refuses_is_listed_unlinked_not_a_lost_answer() -> None:
    """``http://[x`` (a tool's source URL, a peer's) raised ValueError (Invalid IPv6 URL): no answer was posted."""
    sources = [{"title": "壊れたURL", "url": "http://[x/a"}, {"title": "ok", "url": "https://example.com/b"}]
    payloads = answer_payloads(make_answer(text="回答", sources=sources))
    assert "- 壊れたURL\n- [ok](https://example.com/b)" in payloads[-1]["blocks"][1]["text"]


@pytest.mark.parametrize("piece", ["[", "[x](", "[x](a"])
def test_a_parts_fallback_text_takes_linear_time_on_unclosed_links(piece: str) -> None:
    """Each "[" read on to the end again: 30,000 characters took 4 s (a part holds 12,000, an answer five parts)."""
    plain_fallback(piece * (30_000 // len(piece)))
    assert plain_fallback("[a [b](https://x.test/c) d") == "[a b (https://x.test/c) d"


def test_a_secret_in_a_long_source_title_is_masked_before_the_title_is_cut() -> None:
    title = "あ" * 140 + "AKIAABCDEFGHIJKLMNOP"  # the cut (150) falls inside the key: its head alone is no key
    rendered = sources_markdown([{"title": title, "url": "https://example.com/1"}])
    assert "AKIA" not in rendered and "REDACTED" in rendered


def test_guarding_twice_changes_nothing() -> None:
    """The door guards every payload again after the builder's pass before a cut: the second pass is a no-op."""
    texts = [*SECRET_CASES, *(t for t, _ in PERSONAL_CASES), *KEEP,
             "<!here> @channel [x](https://evil.example/?q=secret#f) ![i](https://evil.example/i.png) <img src=x>"]
    for text in texts:
        once = guard.markdown(text)
        assert guard.markdown(once) == once, text


def test_the_metadata_carries_the_tags_for_feedback_reports() -> None:
    tagged = result("a", rounds=1, tags=["Shopify", "在庫"])
    payload = answer_metadata(tagged, channel="C1", question_ts="1.000001", parts=1)["event_payload"]
    assert payload["tags"] == "Shopify,在庫" and payload["tools"] == "faq_search"
    untagged = answer_metadata(result("a"), channel="C1", question_ts="1.000001", parts=1)
    assert "tags" not in untagged["event_payload"]


def test_an_answer_of_markup_only_still_has_a_fallback_text() -> None:
    for payload in answer_payloads(result("# " + "*" * 500 + "\n" + "\n```" * 30)):
        assert payload["text"].strip()
