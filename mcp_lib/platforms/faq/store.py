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
import itertools
import json
import os
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...config import env_str
from .entries import GLOSSARY_FILE, SYNONYMS_FILE, Entry, entry_names
from .index import FaqIndex, Posting

CACHE_VARIABLE = "HELPBOT_FAQ_CACHE_DIR"
FORMAT = b"helpbot-faq-index/2\n"
KEEP_FILES = 4  # index files kept in the cache folder: a few FAQ versions (branches) side by side
_CODE = [Path(__file__).with_name(name) for name in ("text.py", "index.py", "store.py", "semantic.py")]
KEYS_FILE = "keys.json"  # file stats -> content key: the fast path that reads no FAQ file
KEEP_KEYS = 16
SETTLED_S = 2.0  # a file changed this recently may change again within the same timestamp: hashed, not trusted


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


def _depends(root: Path, names: list[str]) -> list[str]:
    """Every file the index depends on: the indexing code, the synonym table and glossary, the entries."""
    tables = [os.path.join(root, SYNONYMS_FILE), os.path.join(root, GLOSSARY_FILE)]
    return [*map(str, _CODE), *tables, *(os.path.join(root, n) for n in names)]


def _stat_row(path: str, st: os.stat_result | None) -> bytes:
    if st is None:
        return b"\0-\0%s" % path.encode()
    return b"\0%s\0%d %d %d %d" % (path.encode(), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def stat_key(root: Path, names: list[str]) -> tuple[str, float]:
    """A digest of what ``os.stat`` says of every file the index depends on (size, mtime, ctime, inode), and
    the newest ctime among them. Any write changes a file's ctime, which no one can set back."""
    digest, newest = hashlib.sha256(FORMAT), 0
    for path in _depends(root, names):
        try:
            st: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            st = None
        digest.update(_stat_row(path, st))
        newest = max(newest, st.st_ctime_ns, st.st_mtime_ns) if st else newest
    return digest.hexdigest(), newest / 1e9


def _read_with_stat(path: str) -> tuple[bytes, os.stat_result]:
    """The file's bytes and its stat, from one open: a regular file's one read of its size returns it all."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        data = os.read(fd, st.st_size + 1)
        if len(data) == st.st_size:
            return data, st
        chunks = [data]  # it changed size since: read up to its end
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def hash_files(root: Path, names: list[str]) -> tuple[str, str, float]:
    """The content key (each file's path and bytes, the synonym table and glossary, the code), and the stat
    digest and newest ctime of :func:`stat_key`, in one pass over the files."""
    content, stats, newest = hashlib.sha256(FORMAT + sys.byteorder.encode()), hashlib.sha256(FORMAT), 0
    paths = _depends(root, names)
    for number, path in enumerate(paths):
        try:
            data, st = _read_with_stat(path)
        except FileNotFoundError:
            if number < len(_CODE) or number >= len(_CODE) + 2:
                raise
            data, found = b"", None
        else:
            found = st
            newest = max(newest, st.st_ctime_ns, st.st_mtime_ns)
        stats.update(_stat_row(path, found))
        if number < len(_CODE):
            content.update(data)
        elif number < len(_CODE) + 2:  # the synonym table, the glossary: present or not
            content.update(b"\0%d\0" % (found is not None))
            content.update(data)
        else:
            content.update(b"\0%s\0%d\0" % (names[number - len(_CODE) - 2].encode(), len(data)))
            content.update(data)
    return content.hexdigest(), stats.hexdigest(), newest / 1e9


def content_key(root: Path, names: list[str]) -> str:
    """What the index depends on: each file's path and bytes, the synonym table and the glossary, the code."""
    return hash_files(root, names)[0]


def _known_keys(cache: Path) -> dict[str, str]:
    try:
        known = json.loads(_read(cache / KEYS_FILE))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in known.items() if isinstance(v, str)} if isinstance(known, dict) else {}


def _moved_since_recorded(root: Path, cache: Path) -> bool:
    """The folder's entries were added, removed or renamed (as a checkout does) after the record was last
    written: no recorded stats can match, so they are not worth a stat of every file."""
    try:
        return os.stat(root).st_ctime_ns > os.stat(cache / KEYS_FILE).st_mtime_ns
    except OSError:
        return True


def index_key(root: Path, names: list[str], cache: Path, now: Callable[[], float] = time.time) -> str:
    """The content key, from the cache's record of the files' stats when none changed since (a local checkout
    run again: no file read), else by hashing the content (a fresh checkout: new stats, same key) and then
    recorded -- unless a file changed within the last ``SETTLED_S`` seconds."""
    known = _known_keys(cache)
    if known and not _moved_since_recorded(root, cache):
        key = known.get(stat_key(root, names)[0])
        if key is not None and len(key) == 64:
            return key
    key, stats, newest = hash_files(root, names)
    if newest < now() - SETTLED_S:
        known = {stats: key, **{k: v for k, v in known.items() if k != stats}}
        _save(cache, KEYS_FILE, json.dumps(dict(list(known.items())[:KEEP_KEYS])).encode())
    return key


class PackedPostings(Mapping[str, Posting]):
    """Posting lists stored back to back in two arrays; ``bounds[i]:bounds[i + 1]`` is the i-th term's. The
    arrays are views of the cache file's bytes (no copy)."""

    def __init__(self, terms: list[str], bounds: Sequence[int], docs: Sequence[int], impacts: Sequence[float]):
        self._slot = dict(zip(terms, range(len(terms)), strict=True))
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


def _padded(data: bytes) -> bytes:
    """Sections start at multiples of 8, so each array view is aligned."""
    return data + b"\0" * (-len(data) % 8)


def dump(index: FaqIndex) -> bytes:
    """The index as one file: a small JSON header, then sections -- every entry string as one UTF-8 text with
    character offsets, the terms joined by newlines (a term never holds one), the posting arrays."""
    terms = list(index.postings)
    bounds, docs, impacts = array("i", [0]), array("i"), array("f")
    for term in terms:
        term_docs, term_impacts = index.postings[term]
        docs.extend(term_docs)
        impacts.extend(term_impacts)
        bounds.append(len(docs))
    strings: list[str] = []
    tag_counts = array("i")
    for e in index.entries:
        strings += [e.id, e.question, e.body, e.file, e.url or "", *e.tags]
        tag_counts.append(len(e.tags))
    offsets = array("q", [0])
    for text in strings:
        offsets.append(offsets[-1] + len(text))
    sections = [tag_counts.tobytes(), offsets.tobytes(), "".join(strings).encode(), "\n".join(terms).encode(),
                bounds.tobytes(), docs.tobytes(), impacts.tobytes()]
    header = json.dumps({
        "synonyms": index.synonyms, "glossary": index.glossary, "k1": index.k1, "b": index.b,
        "entries": len(index.entries),
        "strings": len(strings), "terms": len(terms), "postings": len(docs), "sizes": [len(s) for s in sections],
    }, ensure_ascii=False).encode()
    return b"".join([FORMAT, len(header).to_bytes(8, "little"), _padded(header), *map(_padded, sections)])


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


def _sections(data: bytes) -> tuple[dict[str, Any], list[memoryview]]:
    view = memoryview(data)
    at = len(FORMAT) + 8
    size = int.from_bytes(view[len(FORMAT):at], "little")
    header = json.loads(bytes(view[at : at + size]))
    at += size + (-size % 8)
    sections = []
    for length in header["sizes"]:
        if not isinstance(length, int) or length < 0 or at + length > len(view):
            raise ValueError("a section runs past the end of the file")
        sections.append(view[at : at + length])
        at += length + (-length % 8)
    if at != len(view) or len(sections) != 7:
        raise ValueError("not the sections of this format")
    return header, sections


def _undump(data: bytes, base_url: str | None) -> FaqIndex | None:
    try:
        header, (tag_counts, offsets, text, terms, bounds, docs, impacts) = _sections(data)
        counts, at = tag_counts.cast("i"), offsets.cast("q")
        n_entries, n_strings, n_terms = header["entries"], header["strings"], header["terms"]
        if len(counts) != n_entries or len(at) != n_strings + 1:
            return None
        joined = str(text, "utf-8")
        if at[-1] != len(joined):
            return None
        strings = [joined[a:b] for a, b in itertools.pairwise(at)]
        entries, i = [], 0
        for count in counts:
            entry_id, question, body, file, url = strings[i : i + 5]
            entries.append(Entry(entry_id, question, strings[i + 5 : i + 5 + count], body, file, url or None))
            i += 5 + count
        names = str(terms, "utf-8").split("\n") if n_terms else []
        bounds_, docs_, impacts_ = bounds.cast("i"), docs.cast("i"), impacts.cast("f")
        if (i != n_strings or len(names) != n_terms or len(bounds_) != n_terms + 1 or bounds_[-1] != len(docs_)
                or len(docs_) != header["postings"] or len(impacts_) != len(docs_)):
            return None
        return FaqIndex(entries, synonyms=header["synonyms"], glossary=header["glossary"], base_url=base_url,
                        k1=header["k1"], b=header["b"], postings=PackedPostings(names, bounds_, docs_, impacts_))
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
        return None


def _save(folder: Path, name: str, data: bytes) -> None:
    """Written under a temporary name and renamed, so a concurrent reader sees the old file or the new one.
    A folder that cannot be written only means the next run builds again."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tmp-", delete=False) as out:
            out.write(data)
        os.replace(out.name, folder / name)
        if not name.startswith("index-"):
            return
        others = [p for p in folder.glob("index-*.bin") if p.name != name]
        for stale in sorted(others, key=lambda p: p.stat().st_mtime_ns, reverse=True)[KEEP_FILES - 1 :]:
            stale.unlink(missing_ok=True)
    except OSError:
        return


def load_index(path: Path, base_url: str | None = None, cache: Path | None = None,
               now: Callable[[], float] = time.time) -> FaqIndex:
    """The FAQ folder's index: from the cache when it holds this content, else built (and then cached)."""
    names = entry_names(path)
    key = index_key(path, names, cache, now) if cache else None
    name = f"index-{key}.bin"
    if cache:
        try:
            cached = undump(_read(cache / name), base_url)
        except OSError:
            cached = None
        if cached is not None:
            cached.key = key
            return cached
    index = FaqIndex.load(path, base_url, files=[path / n for n in names])
    if cache:
        _save(cache, name, dump(index))
        index.key = key
    return index
