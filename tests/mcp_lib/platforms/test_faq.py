"""The FAQ platform: search quality on the bundled entries, malformed files, configuration, limits and urls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_lib import Registry
from mcp_lib.config import ConfigError
from mcp_lib.cutting import TRUNCATION_MARKER
from mcp_lib.platforms import faq
from mcp_lib.platforms.faq import FaqIndex, analyze, normalize, parse_entry

REPO_FAQ = Path(__file__).resolve().parents[3] / "faq"

# Questions as people type them in Slack -- paraphrased, colloquial, English, mixed, with typos -- and the
# entries that answer them. Written from the user's side, not copied from the entries.
LABELLED: list[tuple[str, set[str]]] = [
    ("在庫がずれる", {"stock-mismatch"}),
    ("楽天とヤフーで在庫数が違うんだけど", {"stock-mismatch"}),
    ("inventroy mismatch between channels", {"stock-mismatch"}),
    ("在庫 同期 遅い", {"stock-sync-delay"}),
    ("shopfy 在庫 反映されない", {"stock-sync-delay"}),
    ("Shopifyの在庫が更新されないです", {"stock-sync-delay"}),
    ("inventory not syncing to shopify", {"stock-sync-delay"}),
    ("在庫がマイナスになった、売り越したかも", {"stock-oversell"}),
    ("oversold item, stock went negative", {"stock-oversell"}),
    ("shopify 倉庫が複数ある場合の在庫", {"shopify-locations"}),
    ("FBAの在庫も同期される？", {"amazon-fba-stock"}),
    ("楽天の受注が入ってこない", {"rakuten-order-import"}),
    ("rakuten orders not importing", {"rakuten-order-import"}),
    ("ヤフショの注文が取れてない", {"yahoo-order-import"}),
    ("Shopifyの注文が来ない", {"shopify-order-import"}),
    ("amazonの注文で住所が空っぽ", {"amazon-order-missing-address"}),
    ("amazom 購入者の名前 取れない", {"amazon-order-missing-address"}),
    ("同じ注文が2回入った", {"order-duplicate"}),
    ("失敗したジョブをもう一度動かしたい", {"job-rerun"}),
    ("how can I retry a failed import job", {"job-rerun"}),
    ("how often does stock sync run", {"sync-schedule"}),
    ("在庫同期って何分おき？", {"sync-schedule"}),
    ("shopify 429エラー", {"shopify-api-429"}),
    ("APIの呼び出し制限に引っかかる Shopify", {"shopify-api-429"}),
    ("amazon throttling QuotaExceeded", {"amazon-sp-api-throttling"}),
    ("アマゾンのAPIでレート制限", {"amazon-sp-api-throttling"}),
    ("RMSのライセンスキー更新方法", {"rakuten-license-key"}),
    ("楽天のAPIキーの期限っていつ？", {"rakuten-license-key", "credentials-expiry"}),
    ("ライセンスキー期限切れで注文が止まった", {"rakuten-license-key"}),
    ("yahoo 再認証 12時間で切れる", {"yahoo-token-expiry"}),
    ("トークンの有効期限まとめ", {"credentials-expiry"}),
    ("shopify api 401", {"shopify-auth-error"}),
    ("アプリ削除したらshopifyのトークンが使えなくなった", {"shopify-auth-error"}),
    ("CSVが文字化けする", {"csv-encoding"}),
    ("文字ばけ csv", {"csv-encoding"}),
    ("Excelで開くと文字がおかしい utf8", {"csv-encoding"}),
    ("shift-jisで保存したcsvが取り込めない", {"csv-encoding", "csv-import-errors"}),
    ("CSVインポートで列がずれてエラー", {"csv-import-errors"}),
    ("JANコードが指数表示になる", {"csv-leading-zero"}),
    ("品番の頭の0が消えた", {"csv-leading-zero"}),
    ("楽天に出品できない エラー", {"product-registration"}),
    ("サイズ違いの商品の登録方法 SKU", {"sku-variation"}),
    ("variant sku mapping between shopify and rakuten", {"sku-variation"}),
    ("注文が保留になって SKUがないと言われる", {"sku-not-found"}),
    ("画像が表示されない 楽天", {"product-images"}),
    ("値段を変更したのに反映されない", {"price-sync"}),
    ("webhook届かない shopify", {"shopify-webhook"}),
    ("webhok not received", {"shopify-webhook"}),
    ("hmac signature mismatch", {"shopify-webhook"}),
    ("追跡番号が楽天に反映されない", {"shipping-tracking"}),
    ("出荷したのに発送済みにならない", {"shipping-tracking"}),
    ("佐川のコードは？", {"shipping-carrier-codes"}),
    ("送料がおかしい 沖縄", {"shipping-fee"}),
    ("注文取り消したい", {"order-cancel"}),
    ("キャンセルされた注文の在庫ってどうなる？", {"order-cancel"}),
    ("返品された商品を在庫に戻すには", {"returns-refunds"}),
    ("refund process", {"returns-refunds"}),
    ("注文時間が9時間ずれてる", {"order-time-offset"}),
    ("新しいショップを追加したい", {"new-store-setup"}),
]


@pytest.fixture(scope="module")
def bundled() -> FaqIndex:
    return FaqIndex.load(REPO_FAQ)


def write_entry(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def entry_text(entry_id: str, question: str = "質問", body: str = "回答", extra: str = "") -> str:
    return f"---\nid: {entry_id}\nquestion: {question}\ntags: [在庫]\n{extra}---\n{body}\n"


# -- search quality -----------------------------------------------------------------------------------------
def test_labelled_queries_recall_at_3(bundled: FaqIndex) -> None:
    assert len(LABELLED) >= 30
    known = {e.id for e in bundled.entries}
    for _, expected in LABELLED:
        assert expected <= known, f"labelled id not in the FAQ: {expected - known}"
    misses = []
    for query, expected in LABELLED:
        top = [entry.id for entry, _ in bundled.search(query, limit=3)]
        if not expected & set(top):
            misses.append(f"{query!r}: expected {sorted(expected)}, got {top}")
    recall = 1 - len(misses) / len(LABELLED)
    print(f"recall@3 = {recall:.3f} over {len(LABELLED)} queries")
    assert recall >= 0.9, f"recall@3 = {recall:.3f}; misses:\n" + "\n".join(misses)


def test_queries_are_not_copies_of_entry_questions(bundled: FaqIndex) -> None:
    questions = {normalize(entry.question) for entry in bundled.entries}
    assert not [q for q, _ in LABELLED if normalize(q) in questions]


def test_search_without_synonyms_still_finds_exact_words() -> None:
    index = FaqIndex.load(REPO_FAQ)
    plain = FaqIndex(index.entries)
    assert plain.search("RMS ライセンスキー", 1)[0][0].id == "rakuten-license-key"


def test_synonyms_bridge_languages(bundled: FaqIndex) -> None:
    # The Japanese entry about stock mismatches says neither word: only the synonym table leads to 在庫 / 不一致.
    assert "stock-mismatch" in [e.id for e, _ in bundled.search("inventory discrepancy", 3)]
    assert "stock-mismatch" not in [e.id for e, _ in FaqIndex(bundled.entries).search("inventory discrepancy", 3)]


def test_typos_are_corrected_to_known_words() -> None:
    index = FaqIndex([faq.Entry("a", "Shopify の在庫", [], "本文", "a.md"),
                      faq.Entry("b", "Amazon の注文", [], "本文", "b.md")])
    assert index.search("shopfy", 2)[0][0].id == "a"
    assert index.search("amazom", 2)[0][0].id == "b"
    assert index.plan("amazom shopfy").corrections == {"amazom": "amazon", "shopfy": "shopify"}
    assert index.search("zzzzzz", 2) == []  # nothing similar enough: no guess


def test_corrected_typo_pulls_in_its_synonyms(bundled: FaqIndex) -> None:
    assert bundled.plan("inventroy").corrections == {"inventroy": "inventory"}
    assert "stock-mismatch" in [e.id for e, _ in bundled.search("inventroy mismatch", 3)]


def test_analysis_is_not_substring_matching() -> None:
    # bigrams split at the particle; the function word bigram れる (from される) is dropped; each kanji also alone
    assert analyze("在庫がずれる") == ["在庫", "ずれ", "^在", "^庫"]
    assert analyze("楽天の受注") == ["楽天", "受注", "^楽", "^天", "^受", "^注"]
    assert analyze("Webhooks for SP-API orders") == ["webhook", "sp-api", "sp", "api", "order"]
    # width, case and the long-vowel mark do not matter; function words are not indexed
    assert normalize("ｻｰﾊﾞｰ") == normalize("サーバ") == "サーバ"
    assert analyze("SKU") == analyze("ｓｋｕ") == ["sku"]
    assert analyze("ですか") == [] and analyze("how do I") == []
    # 庫数 is a bigram of 在庫数; 料の crosses a particle, so no entry has it (a substring search would)
    index = FaqIndex([faq.Entry("a", "送料", [], "配送料の計算", "a.md"), faq.Entry("b", "在庫", [], "在庫数", "b.md")])
    assert [e.id for e, _ in index.search("送料", 2)] == ["a"]
    assert index.search("庫数", 2)[0][0].id == "b" and index.search("料の", 2) == []


def test_a_kanji_of_its_own_ranks_what_a_bigram_found_but_finds_nothing_alone() -> None:
    index = FaqIndex([faq.Entry("b", "楽天の在庫", [], "在庫の同期", "b.md"),
                      faq.Entry("a", "楽天の注文", [], "返品の手順", "a.md")])
    assert [e.id for e, _ in index.search("楽天 返金", 2)] == ["a", "b"]  # 返金 shares 返 with a's 返品
    assert [e.id for e, _ in index.search("楽天", 2)] == ["b", "a"]
    assert index.search("返金", 2) == []  # no word or bigram in common: nothing


def test_no_match_is_an_empty_result_with_a_note() -> None:
    result = Registry(env={}).get_mcp("faq").functions["search"]("zzzz qqqq")
    assert result.status == "ok" and result.items == []
    assert result.notes and "no FAQ entry" in result.notes[0]


def test_weak_tail_is_cut(bundled: FaqIndex) -> None:
    hits = bundled.search("RMS ライセンスキー 更新", 20)
    assert len(hits) < 20
    assert all(score >= hits[0][1] * bundled.MIN_RELATIVE_SCORE for _, score in hits)


def test_snippet_shows_where_the_query_matches(bundled: FaqIndex) -> None:
    entry = bundled.entry("csv-leading-zero")
    snippet = bundled.snippet(entry.body, "JANコード 指数表記")
    assert "指数表記" in snippet or "JAN" in snippet
    far = bundled.entry("rakuten-license-key")
    assert "ESA" in bundled.snippet(far.body, "Authorization ヘッダー ESA")


# -- through the registry -----------------------------------------------------------------------------------
def test_search_envelope_on_the_bundled_faq() -> None:
    result = Registry(env={}).get_mcp("faq").functions["search"]("在庫がずれる", limit=3)
    assert result.status == "ok" and result.tool == "faq_search"
    assert 1 <= len(result.items) <= 3
    first = result.items[0]
    assert set(first) == {"id", "title", "url", "tags", "score", "snippet"}
    assert first["id"] == "stock-mismatch" and first["url"] == "faq://stock-mismatch"
    json.loads(result.to_json())


def test_get_entry_and_unknown_id() -> None:
    functions = Registry(env={}).get_mcp("faq").functions
    entry = functions["getEntry"]("stock-sync-delay")
    assert entry.status == "ok" and entry.item and "連携ログ" in entry.item["body"]
    missing = functions["getEntry"]("no-such-entry")
    assert missing.status == "error" and "no-such-entry" in (missing.message or "")


def test_limit_is_validated() -> None:
    functions = Registry(env={}).get_mcp("faq").functions
    assert functions["search"]("在庫", limit=0).status == "error"
    assert functions["search"]("在庫", limit=21).status == "error"
    assert len(functions["search"]("在庫", limit=2).items) == 2
    assert functions["search"]("").status == "error"


def test_faq_path_points_elsewhere(tmp_path: Path) -> None:
    gift = entry_text("gift-wrap", "ギフト包装はできますか？", "のし・包装は注文備考で指定します。")
    write_entry(tmp_path, "gift.md", gift)
    write_entry(tmp_path, "sub/points.md", entry_text("points", "ポイントの付与率", "楽天ポイントは 1 倍です。"))
    write_entry(tmp_path, "_synonyms.yml", "- [ギフト, gift, プレゼント]\n")
    write_entry(tmp_path, "README.md", "no front matter here, and that is fine\n")
    functions = Registry(env={"HELPBOT_FAQ_PATH": str(tmp_path)}).get_mcp("faq").functions
    result = functions["search"]("プレゼント用にラッピングしたい")
    assert [item["id"] for item in result.items][:1] == ["gift-wrap"]
    assert functions["getEntry"]("points").status == "ok"
    assert functions["getEntry"]("stock-sync-delay").status == "error"  # the bundled FAQ is not used


@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        (lambda p: None, "is not a directory"),
        (lambda p: p.mkdir(), "contains no FAQ entries"),
    ],
)
def test_faq_path_config_errors(tmp_path: Path, setup, problem: str) -> None:
    target = tmp_path / "faq"
    setup(target)
    with pytest.raises(ConfigError) as exc:
        faq.load_config({"HELPBOT_FAQ_PATH": str(target)})
    assert exc.value.variable == "HELPBOT_FAQ_PATH" and problem in str(exc.value)


# -- malformed files ----------------------------------------------------------------------------------------
MALFORMED = {
    "no front matter": ("# 在庫がずれる\n\n本文だけのファイル\n", "no front matter"),
    "unclosed front matter": ("---\nid: x\nquestion: q\n本文\n", "no front matter"),
    "bad YAML": ("---\nid: x\nquestion: [unclosed\n---\n本文\n", "not valid YAML"),
    "not a mapping": ("---\n- id\n- question\n---\n本文\n", "key: value"),
    "missing id": ("---\nquestion: 在庫がずれる\ntags: [在庫]\n---\n本文\n", "lacks 'id'"),
    "empty question": ("---\nid: x\nquestion: ''\n---\n本文\n", "lacks 'question'"),
    "id with spaces": ("---\nid: stock sync\nquestion: q\n---\n本文\n", "must not contain spaces"),
    "tags a string": ("---\nid: x\nquestion: q\ntags: 在庫, Shopify\n---\n本文\n", "'tags' must be a list"),
    "tags a mapping": ("---\nid: x\nquestion: q\ntags: {a: 1}\n---\n本文\n", "'tags' must be a list"),
    "nested tags": ("---\nid: x\nquestion: q\ntags: [[a]]\n---\n本文\n", "'tags' must be a list"),
    "relative url": ("---\nid: x\nquestion: q\nurl: wiki/page\n---\n本文\n", "'url' must be an http(s) URL"),
    "no answer": ("---\nid: x\nquestion: q\n---\n\n", "answer is missing"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_file_is_a_config_error_naming_the_file(tmp_path: Path, case: str) -> None:
    text, problem = MALFORMED[case]
    write_entry(tmp_path, "good.md", entry_text("good"))
    bad = write_entry(tmp_path, "broken-entry.md", text)
    with pytest.raises(ConfigError) as exc:
        FaqIndex.load(tmp_path)
    assert str(bad) in str(exc.value) and problem in str(exc.value)


def test_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "sjis.md"
    bad.write_bytes(entry_text("sjis", "文字化け", "本文").encode("cp932"))
    with pytest.raises(ConfigError, match=r"sjis\.md: not UTF-8"):
        FaqIndex.load(tmp_path)


def test_duplicate_id_names_both_files(tmp_path: Path) -> None:
    write_entry(tmp_path, "one.md", entry_text("same"))
    write_entry(tmp_path, "two.md", entry_text("same"))
    with pytest.raises(ConfigError, match=r"two\.md: duplicate FAQ id 'same' \(also in one\.md\)"):
        FaqIndex.load(tmp_path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [("{a: b}\n", "list of synonym groups"), ("- [only-one]\n", "two or more"), ("- [a, [b]]\n", "two or more"),
     ("- [a, b\n", "not valid YAML")],
)
def test_malformed_synonyms_name_the_file(tmp_path: Path, text: str, problem: str) -> None:
    write_entry(tmp_path, "good.md", entry_text("good"))
    write_entry(tmp_path, "_synonyms.yml", text)
    with pytest.raises(ConfigError, match=problem) as exc:
        FaqIndex.load(tmp_path)
    assert "_synonyms.yml" in str(exc.value)


def test_malformed_file_through_the_registry_is_an_error_result(tmp_path: Path) -> None:
    write_entry(tmp_path, "broken.md", "no front matter\n")
    result = Registry(env={"HELPBOT_FAQ_PATH": str(tmp_path)}).get_mcp("faq").functions["search"]("在庫")
    assert result.status == "error" and "broken.md" in (result.message or "")


def test_lenient_where_it_is_harmless(tmp_path: Path) -> None:
    """BOM, CRLF, numeric ids, no tags and unknown keys are accepted."""
    path = tmp_path / "win.md"
    path.write_bytes("\ufeff---\r\nid: 42\r\nquestion: 送料\r\nowner: ec-team\r\n---\r\n離島は別料金\r\n".encode())
    entry = parse_entry(path)
    assert (entry.id, entry.question, entry.tags, entry.body) == ("42", "送料", [], "離島は別料金")


# -- limits and urls ----------------------------------------------------------------------------------------
def test_huge_body_is_cut_with_a_marker(tmp_path: Path) -> None:
    body = "在庫同期の手順。" + "あ" * 50_000
    write_entry(tmp_path, "huge.md", entry_text("huge", "巨大な回答", body))
    functions = Registry(env={"HELPBOT_FAQ_PATH": str(tmp_path)}).get_mcp("faq").functions
    entry = functions["getEntry"]("huge")
    text = entry.item["body"] if entry.item else ""
    assert entry.status == "ok"
    assert text.endswith(TRUNCATION_MARKER.format(n=len(body) - 6000))
    assert any("cut" in note for note in entry.notes)
    hits = functions["search"]("在庫同期の手順")
    assert hits.items[0]["id"] == "huge" and len(hits.items[0]["snippet"]) < 300


def test_limits_from_env_apply(tmp_path: Path) -> None:
    write_entry(tmp_path, "long.md", entry_text("long", "長い", "在庫 " * 2000))
    env = {"HELPBOT_FAQ_PATH": str(tmp_path), "HELPBOT_TOOL_MAX_FIELD_CHARS": "100"}
    result = Registry(env=env).get_mcp("faq").functions["search"]("在庫")
    full = FaqIndex.load(tmp_path).snippet("在庫 " * 2000, "在庫")
    assert len(full) > 100
    assert result.items[0]["snippet"] == full[:100] + TRUNCATION_MARKER.format(n=len(full) - 100)


@pytest.fixture
def url_faq(tmp_path: Path) -> Path:
    write_entry(tmp_path, "own.md", entry_text("own", "独自URL", "本文", "url: https://wiki.example.com/p/1\n"))
    write_entry(tmp_path, "plain.md", entry_text("plain", "URLなし", "本文"))
    write_entry(tmp_path, "日本語/在庫.md", entry_text("nested", "入れ子", "本文"))
    return tmp_path


def urls(env: dict[str, str]) -> dict[str, str]:
    functions = Registry(env=env).get_mcp("faq").functions
    return {i: functions["getEntry"](i).item["url"] for i in ("own", "plain", "nested")}  # type: ignore[index]


def test_url_fallback_rules(url_faq: Path) -> None:
    path = {"HELPBOT_FAQ_PATH": str(url_faq)}
    assert urls(path) == {"own": "https://wiki.example.com/p/1", "plain": "faq://plain", "nested": "faq://nested"}
    with_base = urls({**path, "HELPBOT_FAQ_BASE_URL": "https://ghe.example.com/ec/faq/"})
    assert with_base["own"] == "https://wiki.example.com/p/1"
    assert with_base["plain"] == "https://ghe.example.com/ec/faq/plain.md"
    assert with_base["nested"] == "https://ghe.example.com/ec/faq/%E6%97%A5%E6%9C%AC%E8%AA%9E/%E5%9C%A8%E5%BA%AB.md"
    # GitHub Actions: the bundled FAQ links to the file at the commit being run; a custom folder does not.
    actions = {"GITHUB_REPOSITORY": "acme/helpbot", "GITHUB_SHA": "abc123"}
    assert faq.load_config(actions).base_url == "https://github.com/acme/helpbot/blob/abc123/faq"
    assert urls({**path, **actions})["plain"] == "faq://plain"


def test_base_url_must_be_a_url() -> None:
    with pytest.raises(ConfigError, match="HELPBOT_FAQ_BASE_URL"):
        faq.load_config({"HELPBOT_FAQ_BASE_URL": "ghe.example.com/faq"})


def test_bundled_entries_are_well_formed(bundled: FaqIndex) -> None:
    assert len(bundled.entries) >= 30
    english = [e for e in bundled.entries if e.question.isascii()]
    assert 2 <= len(english) < len(bundled.entries) / 2
    for entry in bundled.entries:
        assert entry.tags and len(entry.body) > 300, entry.id


# -- tag boosts (the question's tags, agent.core.tags) -------------------------------------------------------------
def test_boost_tags_reorder_matching_entries_but_add_none(tmp_path: Path) -> None:
    write_entry(tmp_path, "a.md", "---\nid: rakuten\nquestion: 在庫同期が遅い\ntags: [楽天]\n---\n"
                                  "在庫同期が遅いときは在庫同期ジョブを確認します。\n")
    write_entry(tmp_path, "b.md", "---\nid: shopify\nquestion: 在庫同期が遅い\ntags: [Shopify]\n---\n"
                                  "在庫同期が遅いときはジョブを確認します。\n")
    write_entry(tmp_path, "c.md", "---\nid: other\nquestion: 画像が出ない\ntags: [Shopify]\n---\n画像の形式を確認。\n")
    index = FaqIndex.load(tmp_path)
    plain = [e.id for e, _ in index.search("在庫同期 遅い")]
    assert plain == ["rakuten", "shopify"]
    boosted = index.search("在庫同期 遅い", boost_tags=["shopify"])  # tags compare normalised
    assert [e.id for e, _ in boosted] == ["shopify", "rakuten"]  # "other" has the tag but not the words
    assert boosted[0][1] == pytest.approx(dict((e.id, s) for e, s in index.search("在庫同期 遅い"))["shopify"]
                                          * faq.TAG_BOOST)
    assert [e.id for e, _ in index.search("在庫同期 遅い", boost_tags=["Amazon"])] == plain

    search = Registry(env={"HELPBOT_FAQ_PATH": str(tmp_path)}).get_mcp("faq").functions["search"]
    assert [i["id"] for i in search("在庫同期 遅い", tags=["Shopify"]).items] == ["shopify", "rakuten"]
    assert [i["id"] for i in search("在庫同期 遅い").items] == ["rakuten", "shopify"]
    assert search("在庫同期 遅い", tags="Shopify").status == "error"  # a list, not a string


def test_a_boost_by_the_expected_entrys_tag_never_lowers_its_rank(bundled: FaqIndex) -> None:
    def rank(ids: list[str], wanted: str) -> int:
        return ids.index(wanted) if wanted in ids else 99

    for query, expected in LABELLED:
        wanted = sorted(expected)[0]
        tags = bundled.entry(wanted).tags[:1]
        before = rank([e.id for e, _ in bundled.search(query, limit=10)], wanted)
        after = rank([e.id for e, _ in bundled.search(query, limit=10, boost_tags=tags)], wanted)
        assert after <= before, (query, tags, before, after)


def test_a_secret_at_the_edge_of_a_snippet_is_masked_whole(tmp_path: Path) -> None:
    """The snippet window is cut from the body; masking comes first, so no piece of a token is left at its edge."""
    token = "ghp_" + "Zy9" * 12
    body = "在庫連携の設定 " + "手順の説明です。" * 23 + " " + token + " を使う"  # the token starts at 193
    write_entry(tmp_path, "token.md", entry_text("token-note", "在庫連携の設定", body))
    result = Registry(env={"HELPBOT_FAQ_PATH": str(tmp_path)}).call("faq_search", {"query": "在庫連携の設定"})
    assert result.status == "ok" and result.items
    assert "ghp_" not in result.to_json() and "Zy9" not in result.to_json()
