"""faq.text: how FAQ text and queries become index terms.

No dictionary: CJK runs become character bigrams (split at particles: 在庫|が|ずれる) and each kanji a term of its
own, which only ranks what a bigram or a word found (返金 and 返品 share 返); Latin text its words. Text is NFKC-
normalised, lower-cased, English inflections folded, a word-final long-vowel mark dropped (サーバー = サーバ);
function words (です, the) are not indexed. Katakana is not folded into hiragana: loanwords would then collide
with function words (サイズ -> さいず ~ ください)."""

from __future__ import annotations

import functools
import operator
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from ...cutting import excerpt, squash_whitespace

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff々〆ー"
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[a-z0-9]+(?:[._'-][a-z0-9]+)*")
_LONG_VOWEL_RE = re.compile(r"(?<=[ァ-ヺー]{2})ー(?![ァ-ヺー])")  # ending a katakana word of 3 or more

LATIN_WEIGHT = 2.0  # a Latin word weighs as much as one CJK bigram in a query
UNIGRAM, UNIGRAM_WEIGHT = "^", 1.0  # a kanji's own term ("^" + the kanji) weighs as much as a bigram (bench/README.md)
_KANJI_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")

# Words that say nothing about the topic (English ones would look rare, so important, in a Japanese FAQ).
_STOP_WORDS = frozenset((
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "get", "got", "has", "have", "how", "i", "if", "in",
    "into", "is", "it", "its", "just", "me", "my", "no", "not", "of", "on", "one", "or", "our", "please",
    "should", "so", "some", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this",
    "to", "too", "us", "very", "was", "we", "what", "when", "where", "which", "who", "why", "will", "with",
    "would", "you", "your",
))
# Japanese function words and endings; their hiragana bigrams are not indexed ("ですか", "している", "んだけど").
_STOP_PHRASES = (
    "です", "ですか", "でした", "でしょう", "ます", "ません", "ました", "ましょう", "ください", "ほしい", "たい",
    "して", "している", "しています", "した", "する", "される", "されて", "された", "すれば", "なる", "なった",
    "なって", "ある", "あります", "いる", "いない", "いた", "って", "という", "けど", "けれど", "だけど", "んです",
    "んだ", "ので", "のに", "から", "まで", "には", "では", "での", "とは", "への", "でも", "など", "こと", "もの",
    "とき", "ため", "ような", "ように", "どう", "どの", "どこ", "なぜ", "なん", "いつ", "これ", "それ", "あれ",
    "この", "その", "あの", "ちゃん", "ちゃう", "かな", "かも", "よね",
)
_STOP_BIGRAMS = frozenset(p[i : i + 2] for p in _STOP_PHRASES for i in range(len(p) - 1))


def normalize(text: str) -> str:
    """NFKC (full/half width), lower case, サーバー -> サーバ."""
    return _LONG_VOWEL_RE.sub("", unicodedata.normalize("NFKC", text).lower())


_VOWELS = frozenset("aeiou")


def _consonant(word: str, i: int) -> bool:
    """Porter's consonant: not a, e, i, o, u, and y only after a vowel (or at the start)."""
    return word[i] not in _VOWELS and (word[i] != "y" or i == 0 or not _consonant(word, i - 1))


def _measure(stem: str) -> int:
    """Porter's m: how many vowel-consonant sequences the stem has (tr=0, trouble=1, troubles=2)."""
    return "".join("c" if _consonant(stem, i) else "v" for i in range(len(stem))).count("vc")


def _cvc(stem: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (hop, not hoop or snow)."""
    return (len(stem) >= 3 and _consonant(stem, -1) and not _consonant(stem, -2) and _consonant(stem, -3)
            and stem[-1] not in "wxy")


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """English inflections folded (Porter's steps 1a, 1b and 5): ordered, ordering -> order; shipped -> ship;
    updated -> updat (stems need not be words: the index and the queries share this function)."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies"):
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            stem = word[: -len(suffix)]
            if word.endswith(suffix) and len(stem) >= 3 and not all(_consonant(stem, i) for i in range(len(stem))):
                if stem.endswith(("at", "bl", "iz")):
                    stem += "e"
                elif stem[-1] == stem[-2] and _consonant(stem, -1) and stem[-1] not in "lsz":
                    stem = stem[:-1]
                elif _measure(stem) == 1 and _cvc(stem):
                    stem += "e"
                word = stem
                break
    if word.endswith("e") and len(word) > 4:
        measure = _measure(word[:-1])
        if measure > 1 or (measure == 1 and not _cvc(word[:-1])):
            word = word[:-1]
    if word.endswith("ll") and _measure(word) > 1:
        word = word[:-1]
    return word


_LATIN_WORD_RE = re.compile(r"[a-z]+")


def stem_text(text: str) -> str:
    """The (normalised) text with each Latin word stemmed, for matching phrases of stemmed words."""
    return _LATIN_WORD_RE.sub(lambda m: _stem(m.group()), text)


def trigrams(word: str) -> set[str]:
    """Character trigrams of a word padded with spaces; ``shopfy`` shares 4 of its 6 with ``shopify``."""
    padded = f" {word} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def fuzzy_candidate(word: str) -> bool:
    return len(word) >= 4 and word[0].isalpha() and word.isascii()


@functools.lru_cache(maxsize=65536)
def _latin_words(token: str) -> tuple[str, ...]:
    """``sp-api`` is indexed as itself and as ``sp`` and ``api``."""
    words = [token] if token.isalnum() else [token, *(p for p in re.split(r"[._'-]", token) if p)]
    return tuple(_stem(w) for w in words if w not in _STOP_WORDS)


# A particle right after a kanji or katakana ends a word (在庫|が|ずれる, 楽天|の|受注); bigrams across it
# (庫が, がず) would match the same particle in unrelated entries.
_PARTICLE_RE = re.compile(r"(?<=[^\u3040-\u309f])[のがをにはへでとも]")


@functools.lru_cache(maxsize=65536)
def _cjk_terms(run: str) -> tuple[str, ...]:
    """Bigrams of a CJK run split at particles (no function-word bigrams), a lone kanji, and each kanji's own term."""
    terms: list[str] = []
    for part in _PARTICLE_RE.split(run):
        if len(part) > 1:
            terms.extend(b for b in map(operator.add, part, part[1:]) if b not in _STOP_BIGRAMS)
        elif part and not "\u3040" <= part <= "\u309f":
            terms.append(part)
    return (*terms, *(UNIGRAM + kanji for kanji in _KANJI_RE.findall(run)))


def analyze(text: str, normalized: bool = False) -> list[str]:
    """Index terms of a text: bigrams of its CJK runs and its Latin words (lower-case, plurals folded)."""
    terms: list[str] = []
    for run in _TOKEN_RE.findall(text if normalized else normalize(text)):
        terms.extend(_latin_words(run) if run[0].isascii() else _cjk_terms(run))
    return terms


def query_weights(text: str) -> dict[str, float]:
    """The terms of a query (text already through :func:`normalize`), each with its weight."""
    weights: dict[str, float] = {}
    for term in analyze(text, normalized=True):
        weight = UNIGRAM_WEIGHT if term[0] == UNIGRAM else LATIN_WEIGHT if term[0].isascii() else 1.0
        weights[term] = weights.get(term, 0.0) + weight
    return weights


def best_window(body: str, words: Iterable[str], width: int = 200) -> str:
    """``width`` characters of ``body`` where the most different ``words`` meet (whitespace folded), with "…"
    where it was cut: the snippet that shows the model why an entry matched."""
    flat = squash_whitespace(body)
    if len(flat) <= width:
        return flat
    # Normalise character by character, remembering where each normalised character came from.
    folded = [unicodedata.normalize("NFKC", ch).lower() for ch in flat]
    origin = [i for i, part in enumerate(folded) for _ in part]
    norm = "".join(folded)
    hits = sorted((m.start(), word) for word in words for m in re.finditer(re.escape(word), norm))
    # Slide a window over the hits; keep the one that shows the most different words.
    best, best_count, right = 0, 0, 0
    window: Counter[str] = Counter()
    for position, word in hits:
        while right < len(hits) and hits[right][0] < position + width * 3 // 4:
            window[hits[right][1]] += 1
            right += 1
        if len(window) > best_count:
            best, best_count = max(0, position - width // 4), len(window)
        window[word] -= 1
        if not window[word]:
            del window[word]
    return excerpt(flat, width, origin[best] if hits else 0)
