"""faq.store: the FAQ index on disk, built once per FAQ content and then loaded instead of rebuilt.

The key is a SHA-256 of the entry files' paths and bytes, the synonym table and the source of the code that
builds the index (text.py, index.py): editing an entry or the analyzer makes a new index, a fresh checkout of
the same content (new mtimes) does not. One file per key: a JSON header (entries, terms) and then the posting
arrays as raw bytes. No pickle: a damaged or tampered file can only fail to load, and then the index is rebuilt.
The same folder holds the passage vectors of the semantic leg (faq.semantic), keyed by passage content.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import tempfile
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path

from ...config import env_str
from .entries import SYNONYMS_FILE, Entry, entry_names
from .index import FaqIndex, Posting

CACHE_VARIABLE = "HELPBOT_FAQ_CACHE_DIR"
FORMAT = b"helpbot-faq-index/1\n"
KEEP_FILES = 4  # index files kept in the cache folder: a few FAQ versions (branches) side by side
_CODE = [Path(__file__).with_name(name) for name in ("text.py", "index.py", "store.py")]


def cache_dir(env: Mapping[str, str]) -> Path | None:
    """``HELPBOT_FAQ_CACHE_DIR``; else ``$XDG_CACHE_HOME/helpbot/faq``; else ``~/.cache/helpbot/faq`` from
    ``$HOME``; with none of them (a bare test environment) the index is kept in memory only."""
    configured = env_str(env, CACHE_VARIABLE)
    if configured:
        return Path(configured).expanduser()
    xdg = env_str(env, "XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "helpbot" / "faq"
    home = env_str(env, "HOME")
    return Path(home) / ".cache" / "helpbot" / "faq" if home else None


def _read(path: Path | str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def content_key(root: Path, names: list[str]) -> str:
    """What the index depends on: each file's path and bytes, the synonym table, the indexing code."""
    digest = hashlib.sha256(FORMAT + sys.byteorder.encode())
    for code in _CODE:
        digest.update(_read(code))
    synonyms = root / SYNONYMS_FILE
    digest.update(_read(synonyms) if synonyms.exists() else b"")
    for name in names:
        data = _read(os.path.join(root, name))
        digest.update(b"\0%s\0%d\0" % (name.encode(), len(data)))
        digest.update(data)
    return digest.hexdigest()


class PackedPostings(Mapping[str, Posting]):
    """Posting lists stored back to back in two arrays; ``bounds[i]:bounds[i + 1]`` is the i-th term's."""

    def __init__(self, terms: list[str], bounds: array[int], docs: array[int], impacts: array[float]):
        self._slot = {term: i for i, term in enumerate(terms)}
        self._bounds, self._docs, self._impacts = bounds, docs, impacts

    def __getitem__(self, term: str) -> Posting:
        i = self._slot[term]
        start, end = self._bounds[i], self._bounds[i + 1]
        return self._docs[start:end], self._impacts[start:end]

    def __contains__(self, term: object) -> bool:
        return term in self._slot

    def __iter__(self) -> Iterator[str]:
        return iter(self._slot)

    def __len__(self) -> int:
        return len(self._slot)


def dump(index: FaqIndex) -> bytes:
    terms = list(index.postings)
    bounds, docs, impacts = array("i", [0]), array("i"), array("f")
    for term in terms:
        term_docs, term_impacts = index.postings[term]
        docs.extend(term_docs)
        impacts.extend(term_impacts)
        bounds.append(len(docs))
    header = json.dumps({
        "entries": [[e.id, e.question, e.tags, e.body, e.file, e.url] for e in index.entries],
        "synonyms": index.synonyms, "k1": index.k1, "b": index.b, "terms": terms,
    }, ensure_ascii=False).encode()
    return b"".join([FORMAT, len(header).to_bytes(8, "little"), header,
                     bounds.tobytes(), docs.tobytes(), impacts.tobytes()])


def undump(data: bytes, base_url: str | None) -> FaqIndex | None:
    """The index in ``data``, or None when it is not a complete index of this format."""
    if not data.startswith(FORMAT):
        return None
    enabled = gc.isenabled()
    gc.disable()  # tens of thousands of new objects, none of them garbage: collecting would only cost time
    try:
        return _undump(data, base_url)
    finally:
        if enabled:
            gc.enable()


def _undump(data: bytes, base_url: str | None) -> FaqIndex | None:
    view = memoryview(data)
    at = len(FORMAT) + 8
    size = int.from_bytes(view[len(FORMAT):at], "little")
    try:
        header = json.loads(bytes(view[at : at + size]))
        terms = header["terms"]
        bounds, docs, impacts = array("i"), array("i"), array("f")
        at += size
        bounds.frombytes(view[at : at + (len(terms) + 1) * bounds.itemsize])
        at += len(bounds) * bounds.itemsize
        docs.frombytes(view[at : at + bounds[-1] * docs.itemsize])
        impacts.frombytes(view[at + len(docs) * docs.itemsize :])
        if len(bounds) != len(terms) + 1 or len(docs) != bounds[-1] or len(impacts) != len(docs):
            return None
        entries = [Entry(*row) for row in header["entries"]]
        return FaqIndex(entries, synonyms=header["synonyms"], base_url=base_url, k1=header["k1"], b=header["b"],
                        postings=PackedPostings(terms, bounds, docs, impacts))
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def _save(folder: Path, name: str, data: bytes) -> None:
    """Written under a temporary name and renamed, so a concurrent reader sees the old file or the new one.
    A folder that cannot be written only means the next run builds again."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tmp-", delete=False) as out:
            out.write(data)
        os.replace(out.name, folder / name)
        others = [p for p in folder.glob("index-*.bin") if p.name != name]
        for stale in sorted(others, key=lambda p: p.stat().st_mtime_ns, reverse=True)[KEEP_FILES - 1 :]:
            stale.unlink(missing_ok=True)
    except OSError:
        return


def load_index(path: Path, base_url: str | None = None, cache: Path | None = None) -> FaqIndex:
    """The FAQ folder's index: from the cache when it holds this content, else built (and then cached)."""
    names = entry_names(path)
    name = f"index-{content_key(path, names)}.bin" if cache else ""
    if cache:
        try:
            cached = undump(_read(cache / name), base_url)
        except OSError:
            cached = None
        if cached is not None:
            return cached
    index = FaqIndex.load(path, base_url, files=[path / n for n in names])
    if cache:
        _save(cache, name, dump(index))
    return index
