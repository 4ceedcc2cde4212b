"""faq.index: BM25 over the entries, with the synonym table and typo tolerance."""

from __future__ import annotations

import functools
import heapq
import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ...config import ConfigError
from .entries import GLOSSARY_FILE, SYNONYMS_FILE, Entry, entry_names, load_glossary, load_synonyms, parse_entry
from .semantic import CANDIDATES, MIN_COSINE, SemanticLeg, fuse
from .text import UNIGRAM, analyze, best_window, fuzzy_candidate, normalize, query_weights, stem_text, trigrams

_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
FUZZY_MIN_SIMILARITY = 0.5  # a misspelt word stands for known words whose trigrams overlap this much (Dice)
FUZZY_CANDIDATES = 3  # at most this many of them
# An entry carrying one of the caller's boost tags (the question's tags) scores this much more. Multiplied, not
# added: a boost reorders entries that match the query but never brings in one that does not.
TAG_BOOST = 1.3


@dataclass
class _SynonymGroup:
    key: str  # the index term that stands for the whole group
    words: list[str]
    stemmed: list[str]  # each word with its English words stemmed (rate limited -> rate limit)
    terms: list[list[str]]  # the index terms of each word


def _occurs(word: str, text: str) -> bool:
    """A Latin word matches as a whole word (``sku`` not inside ``skus``), a Japanese one anywhere (ずれ matches
    ずれてる: no spaces mark words); ``str.find``, not a regular expression per word of the table."""
    left, right = word[0].isascii(), word[-1].isascii()
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        if ((not left or start == 0 or text[start - 1] not in _WORD_CHARS)
                and (not right or end == len(text) or text[end] not in _WORD_CHARS)):
            return True
        start = text.find(word, start + 1)
    return False


def _shown(term: str) -> bool:
    """A term the snippet looks for: a word or a bigram, not a lone character or a kanji's own term."""
    return len(term) > 1 and term[0] != UNIGRAM


def _group_counts(group: _SynonymGroup, postings: Mapping[str, Posting]) -> dict[int, float]:
    """Per entry, in order, the summed counts of the group's words. A word of several bigrams is counted as often
    as its rarest bigram occurs there (an upper bound: the bigrams need not be adjacent)."""
    total: defaultdict[int, float] = defaultdict(float)
    for terms in group.terms:
        if terms and all(term in postings for term in terms):
            rarest, *others = sorted(terms, key=lambda t: len(postings[t][0]))
            counts = dict(zip(*postings[rarest], strict=True))
            for term in others:
                other = dict(zip(*postings[term], strict=True))
                counts = {doc: min(count, other[doc]) for doc, count in counts.items() if doc in other}
            for doc, count in counts.items():
                total[doc] += count
    return dict(sorted(total.items()))


@dataclass
class QueryPlan:
    """What a query looks for: index terms with weights (a synonym group is one term), the known words that
    stand in for misspelt ones, and the words a snippet should show."""

    terms: dict[str, float]
    corrections: dict[str, str]
    words: set[str]
    text: str = ""  # the query as asked, for the semantic leg


Posting = tuple[Sequence[int], Sequence[float]]  # entry numbers, and the term's BM25 weight in each
_Counts = tuple["array[int]", "array[float]"]  # the same while the index is built

K1, B = 2.0, 0.6  # BM25's, applied when the weights are computed (a cached index holds them computed)


@dataclass
class FaqIndex:
    """BM25 over CJK bigrams, kanji and Latin words, each (term, entry) weight computed at load. A term's count is
    weighted by field (question x4, tags x2, body x1); a synonym group is one more term counting its words (as
    Lucene's SynonymQuery: 在庫 / stock / inventory share one idf); a Latin query word no entry has is replaced
    by the known words nearest by character trigrams (shopfy -> shopify), which may pull in their group."""

    entries: Sequence[Entry]
    synonyms: list[list[str]] = field(default_factory=list)
    glossary: dict[str, list[str]] = field(default_factory=dict)  # per Japanese word, English words asking for it
    base_url: str | None = None
    postings: Mapping[str, Posting] = field(default_factory=dict, repr=False)  # BM25 weights: cached, or computed
    semantic: SemanticLeg | None = field(default=None, repr=False, compare=False)  # faq.semantic, fused with BM25
    key: str | None = field(default=None, repr=False, compare=False)  # the content's key, when from faq.store

    MIN_RELATIVE_SCORE = 0.15  # of the best score: entries below it matched only noise

    def __post_init__(self) -> None:
        ids: Sequence[str] | None = getattr(self.entries, "ids", None)  # faq.store's entries: checked when built
        if ids is None:
            seen: dict[str, str] = {}
            for entry in self.entries:
                if entry.id in seen:
                    raise ConfigError(entry.file, f"duplicate FAQ id {entry.id!r} (also in {seen[entry.id]})")
                seen[entry.id] = entry.file
            ids = list(seen)
        self._numbers = {entry_id: n for n, entry_id in enumerate(ids)}
        self._tag_sets: dict[int, frozenset[str]] = {}
        self._groups: list[_SynonymGroup] = []
        for number, synonyms in enumerate(self.synonyms):
            words = list(dict.fromkeys(w for w in (normalize(str(w)).strip() for w in synonyms) if w))
            terms = [list(dict.fromkeys(analyze(word, normalized=True))) for word in words]
            self._groups.append(_SynonymGroup(f"={number}", words, [stem_text(w) for w in words], terms))
        self._english = [(stem_text(normalize(english).strip()), normalize(word))
                         for word, words in self.glossary.items() for english in words if english.strip()]
        if not self.postings:
            postings, lengths = _count_terms(self.entries)
            for group in self._groups:
                if counts := _group_counts(group, postings):
                    postings[group.key] = (array("i", counts), array("f", counts.values()))
            self.postings = _bm25(postings, lengths)

    @functools.cached_property
    def _vocabulary(self) -> tuple[dict[str, list[str]], dict[str, int]]:
        """Trigrams of every Latin word the entries or the synonym table know, for correcting typos: per trigram
        the words having it, and each word's trigram count. Built on the first query with an unknown word."""
        vocabulary = {t for t in self.postings if fuzzy_candidate(t)}
        vocabulary.update(t for group in self._groups for terms in group.terms for t in terms if fuzzy_candidate(t))
        words: dict[str, list[str]] = {}
        counts: dict[str, int] = {}
        for word in sorted(vocabulary):
            grams = trigrams(word)
            counts[word] = len(grams)
            for gram in grams:
                words.setdefault(gram, []).append(word)
        return words, counts

    @classmethod
    def load(cls, path: Path, base_url: str | None = None, names: list[str] | None = None) -> FaqIndex:
        """Built from the folder (``names``: its entry files, when the caller has listed them already)."""
        entries = [parse_entry(path / name, root=path) for name in (entry_names(path) if names is None else names)]
        return cls(entries, synonyms=load_synonyms(path / SYNONYMS_FILE), glossary=load_glossary(path / GLOSSARY_FILE),
                   base_url=base_url)

    def similar_words(self, word: str) -> list[tuple[str, float]]:
        """Known words whose trigrams overlap the word's the most (Dice coefficient), best first."""
        grams = trigrams(word)
        trigram_words, trigram_counts = self._vocabulary
        shared = Counter(known for gram in grams for known in trigram_words.get(gram, ()))
        scored = [(known, 2 * n / (len(grams) + trigram_counts[known])) for known, n in shared.items()]
        good = sorted((pair for pair in scored if pair[1] >= FUZZY_MIN_SIMILARITY), key=lambda p: (-p[1], p[0]))
        return good[:FUZZY_CANDIDATES]

    def plan(self, query: str, kanji: bool = True) -> QueryPlan:
        norm = normalize(query)
        weights = query_weights(norm)
        corrections: dict[str, str] = {}
        for word in [w for w in weights if w not in self.postings and fuzzy_candidate(w)]:
            similar = self.similar_words(word)
            for known, similarity in similar:
                weights[known] = max(weights.get(known, 0.0), weights[word] * similarity)
            if similar:
                corrections[word] = similar[0][0]
        words = {t for t in weights if _shown(t)}
        text = " ".join([norm, *corrections.values()])
        stemmed = stem_text(text)
        # English words of the glossary bring their Japanese word into the query, with a Japanese word's weight
        japanese = list(dict.fromkeys(word for english, word in self._english if _occurs(english, stemmed)))
        glossed = query_weights(" ".join(japanese))
        weights |= {term: max(weights.get(term, 0.0), weight) for term, weight in glossed.items()}
        words.update(filter(_shown, glossed))
        text = " ".join([text, *japanese])
        if not kanji:  # sameness (same_question) is a matter of words and bigrams
            weights = {term: weight for term, weight in weights.items() if term[0] != UNIGRAM}
        for group in self._groups:
            # its words found in the text, or stemmed in the text stemmed ("imported" finds the word "import")
            matched = [i for i, w in enumerate(group.words) if _occurs(w, text) or _occurs(group.stemmed[i], stemmed)]
            if not matched or group.key not in self.postings:
                continue
            # the group replaces the words that matched it, with the weight of the heaviest of them
            weight = max(sum(weights.get(t, 0.0) for t in group.terms[i]) or 1.0 for i in matched)
            for i in matched:
                for term in group.terms[i]:
                    weights.pop(term, None)
            weights[group.key] = max(weights.get(group.key, 0.0), weight)
            words.update(t for terms in group.terms for t in terms if _shown(t))
        return QueryPlan(weights, corrections, words, text=query)

    def search(self, query: str | QueryPlan, limit: int = 5,
               boost_tags: Iterable[str] = ()) -> list[tuple[Entry, float]]:
        """Best entries first. Entries scoring far below the best one are left out: they matched only noise.
        Entries carrying one of ``boost_tags`` (compared normalised: ``shopify`` = ``Shopify``) score
        ``TAG_BOOST`` times more. With a semantic leg, the BM25 ranking and the entries nearest in meaning
        (at least ``MIN_COSINE``) are joined by reciprocal-rank fusion; the score is then the fused one."""
        plan = self.plan(query) if isinstance(query, str) else query
        if self.semantic is None:
            return [(self.entries[doc], score) for doc, score in self._bm25_search(plan, limit, boost_tags)]
        lexical = [doc for doc, _ in self._bm25_search(plan, CANDIDATES, boost_tags)]
        nearest = [doc for doc, cosine in self.semantic.rank(plan.text, CANDIDATES) if cosine >= MIN_COSINE]
        # the semantic leg knows no tags: the fused scores are boosted too
        fused = sorted(self._boosted(fuse([lexical, nearest]), boost_tags), key=lambda pair: (-pair[1], pair[0]))
        return [(self.entries[doc], score) for doc, score in fused[:limit]]

    def _bm25_search(self, plan: QueryPlan, limit: int, boost_tags: Iterable[str]) -> list[tuple[int, float]]:
        scores: dict[int, float] = {}
        get = scores.get
        # a kanji's own term only adds to entries a word or a bigram found: it ranks, never finds on its own
        for term, weight in sorted(plan.terms.items(), key=lambda pair: pair[0][0] == UNIGRAM):
            posting = self.postings.get(term)
            if posting is None:
                continue
            alone = term[0] != UNIGRAM
            for doc, impact in zip(*posting, strict=True):
                if alone or doc in scores:
                    scores[doc] = get(doc, 0.0) + impact * weight
        top = heapq.nlargest(limit, self._boosted(list(scores.items()), boost_tags), key=lambda pair: pair[1])
        floor = top[0][1] * self.MIN_RELATIVE_SCORE if top else 0.0
        return [(doc, score) for doc, score in top if score >= floor]

    def _boosted(self, scored: list[tuple[int, float]], boost_tags: Iterable[str]) -> list[tuple[int, float]]:
        """The scores, those of entries carrying one of the tags ``TAG_BOOST`` times higher (an entry's tags are
        normalised when a search with boost tags first scores it)."""
        boosts = {normalize(tag).strip() for tag in boost_tags} - {""}
        if not boosts:
            return scored
        tags = self._tag_sets
        for doc, _ in scored:
            if doc not in tags:
                tags[doc] = frozenset(normalize(tag).strip() for tag in self.entries[doc].tags)
        return [(doc, score * TAG_BOOST if tags[doc] & boosts else score) for doc, score in scored]

    def same_question(self, question: str, min_share: float = 0.6) -> Entry | None:
        """The entry that already asks ``question``: the first of the best BM25 hits whose question and tags carry
        ``min_share`` of its term weight (for duplicates: a ranking alone says nothing about sameness)."""
        asked = self.plan(question, kanji=False)
        total = sum(asked.terms.values())
        for doc, _ in self._bm25_search(asked, 3, ()):
            entry = self.entries[doc]
            own = self.plan(" ".join([entry.question, *entry.tags]), kanji=False).terms
            if total and sum(w for t, w in asked.terms.items() if t in own) >= min_share * total:
                return entry
        return None

    def entry(self, entry_id: str) -> Entry | None:
        """The entry with that id (a cached index decodes it now), or None."""
        number = self._numbers.get(entry_id)
        return None if number is None else self.entries[number]

    def url_of(self, entry: Entry) -> str:
        """The entry's own url; else the file under HELPBOT_FAQ_BASE_URL (or on GitHub in Actions); else faq://id."""
        if entry.url:
            return entry.url
        return f"{self.base_url}/{quote(entry.file)}" if self.base_url else f"faq://{entry.id}"

    def snippet(self, body: str, query: str | QueryPlan) -> str:
        """The part of the body where the most query words (or synonyms) meet: why the entry matched."""
        return best_window(body, (self.plan(query) if isinstance(query, str) else query).words)


def _count_terms(entries: Sequence[Entry]) -> tuple[dict[str, _Counts], list[float]]:
    """Per term, the entries containing it and its count there (question x4, tags x2, body x1); each entry's length."""
    postings: dict[str, _Counts] = {}
    lengths: list[float] = []
    for doc, entry in enumerate(entries):
        weighted: dict[str, float] = {}
        for text, weight in ((entry.question, 4.0), (" ".join(entry.tags), 2.0), (entry.body, 1.0)):
            for term in analyze(text):
                weighted[term] = weighted.get(term, 0.0) + weight
        for term, count in weighted.items():
            posting = postings.get(term)
            if posting is None:
                posting = postings[term] = (array("i"), array("f"))
            posting[0].append(doc)
            posting[1].append(count)
        lengths.append(sum(weighted.values()))
    return postings, lengths


def _bm25(postings: dict[str, _Counts], lengths: list[float]) -> dict[str, Posting]:
    """Replace each count by the term's BM25 weight in that entry, so that a query only adds numbers up."""
    average = sum(lengths) / len(lengths) if lengths else 1.0
    norms = [K1 * (1 - B + B * length / average) for length in lengths]
    n_docs = len(lengths)
    k1_plus_1 = K1 + 1
    weighted: dict[str, Posting] = {}
    for term, (docs, counts) in postings.items():
        idf = math.log(1 + (n_docs - len(docs) + 0.5) / (len(docs) + 0.5))
        impacts = [idf * c * k1_plus_1 / (c + norms[d]) for d, c in zip(docs, counts, strict=True)]
        weighted[term] = (docs, array("f", impacts))
    return weighted
