"""faq.store: the FAQ index on disk, one file per FAQ content (:func:`dump`), memory-mapped and read in place
instead of rebuilt. The key hashes the entry files, the tables and the indexing code (in Actions the workflow
passes it); no pickle, so a damaged file is rebuilt or gives wrong text, never an error."""

from __future__ import annotations

import hashlib
import itertools
import json
import mmap
import os
import re
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import overload

from ...clock import SYSTEM_CLOCK, Clock
from ...config import ConfigError, env_str
from .entries import GLOSSARY_FILE, SYNONYMS_FILE, Entry, entry_names, mapped, pack, save, unpack
from .index import FaqIndex, Posting

CACHE_VARIABLE = "HELPBOT_FAQ_CACHE_DIR"
KEY_VARIABLE = "HELPBOT_FAQ_CACHE_KEY"
FORMAT = b"helpbot-faq-index/4\n"
KEEP_FILES = 4  # index files kept in the cache folder: a few FAQ versions (branches) side by side
_CODE = sorted(Path(__file__).parent.glob("*.py"))  # all of this package, as help.yml's cache key hashes it
KEYS_FILE = "keys.json"  # file stats -> content key: the fast path that reads no FAQ file
KEEP_KEYS = 16
SETTLED_S = 2.0  # a file changed this recently may change again within the same timestamp: hashed, not trusted


def cache_dir(env: Mapping[str, str]) -> Path | None:
    """``HELPBOT_FAQ_CACHE_DIR``; else ``$XDG_CACHE_HOME/helpbot/faq``; else ``~/.cache/helpbot/faq`` from
    ``$HOME``; with none of them (a bare test environment) the index is kept in memory only."""
    configured, xdg, home = (env_str(env, name) for name in (CACHE_VARIABLE, "XDG_CACHE_HOME", "HOME"))
    if configured:
        return Path(configured).expanduser()
    base = Path(xdg) if xdg else Path(home) / ".cache" if home else None
    return base / "helpbot" / "faq" if base else None


def _depends(root: Path, names: list[str]) -> list[tuple[str, str]]:
    """(name, path) of every file the index depends on: the two tables (either may be missing), code, entries."""
    tables = [(name, os.path.join(root, name)) for name in (SYNONYMS_FILE, GLOSSARY_FILE)]
    return [*tables, *((p.name, str(p)) for p in _CODE), *((n, os.path.join(root, n)) for n in names)]


def _stat_row(path: str, st: os.stat_result | None) -> bytes:
    if st is None:
        return b"\0-\0%s" % path.encode()
    return b"\0%s\0%d %d %d %d" % (path.encode(), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def stat_key(root: Path, names: list[str]) -> str:
    """A digest of what ``os.stat`` says of every file the index depends on (size, mtime, ctime, inode). Any
    write changes a file's ctime, which no one can set back."""
    digest = hashlib.sha256(FORMAT)
    for _, path in _depends(root, names):
        try:
            st: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            st = None
        digest.update(_stat_row(path, st))
    return digest.hexdigest()


def _read(path: str) -> tuple[bytes, os.stat_result | None]:
    """A file's bytes and its stat from one open, so that a write in between cannot pair old stats with them."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        data = os.read(fd, st.st_size + 1)  # a regular file's one read of its size returns it all
        while len(data) > st.st_size and (more := os.read(fd, 1 << 20)):  # it grew since: read to its end
            data += more
        return data, st
    finally:
        os.close(fd)


def hash_files(root: Path, names: list[str]) -> tuple[str, str, float]:
    """The content key (each file's name and bytes), the :func:`stat_key` digest and the newest ctime, in one pass."""
    content, stats, newest = hashlib.sha256(FORMAT + sys.byteorder.encode()), hashlib.sha256(FORMAT), 0
    for number, (name, path) in enumerate(_depends(root, names)):
        try:
            data, st = _read(path)
        except FileNotFoundError:
            if number >= 2:  # only the tables are optional
                raise
            st, data = None, b""
        stats.update(_stat_row(path, st))
        newest = max(newest, st.st_ctime_ns, st.st_mtime_ns) if st else newest
        content.update(b"\0%s\0%d\0%s" % (name.encode(), len(data) if st else -1, data))
    return content.hexdigest(), stats.hexdigest(), newest / 1e9


def _known_keys(cache: Path) -> dict[str, str]:
    try:
        known = json.loads((cache / KEYS_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in known.items() if isinstance(v, str)} if isinstance(known, dict) else {}


def index_key(root: Path, names: list[str], cache: Path, clock: Clock = SYSTEM_CLOCK) -> str:
    """The content key: from the cache's record of the files' stats when none changed (no file read), else hashed
    and recorded unless a file changed within ``SETTLED_S``. A folder whose ctime is newer than the record (an
    entry added, removed or renamed) cannot match it, so its files are not even stat'ed."""
    known = _known_keys(cache)
    try:
        recorded = bool(known) and os.stat(root).st_ctime_ns <= os.stat(cache / KEYS_FILE).st_mtime_ns
    except OSError:
        recorded = False
    key = known.get(stat_key(root, names)) if recorded else None
    if key is not None and len(key) == 64:
        return key
    key, stats, newest = hash_files(root, names)
    if newest < clock.wall() - SETTLED_S:
        known = {stats: key, **{k: v for k, v in known.items() if k != stats}}
        save(cache / KEYS_FILE, json.dumps(dict(list(known.items())[:KEEP_KEYS])).encode())
    return key


class PackedPostings(Mapping[str, Posting]):
    """Posting lists back to back in two arrays (views of the mapped file), ``bounds[i]:bounds[i + 1]`` the i-th
    term's; a term is found by binary search over the sorted term bytes, so loading builds no dict of terms."""

    def __init__(self, terms: memoryview, term_at: Sequence[int], bounds: Sequence[int], docs: Sequence[int],
                 impacts: Sequence[float]):
        self._terms, self._at = bytes(terms), term_at  # one copy of a few MB: bytes compare, views do not
        self._bounds, self._docs, self._impacts = bounds, docs, impacts

    def __getitem__(self, term: str) -> Posting:
        wanted, terms, at = term.encode(), self._terms, self._at
        low, high = 0, len(at) - 1  # binary search (bisect's key= costs a call a step: 1.5x slower)
        while low < high:
            middle = (low + high) // 2
            if terms[at[middle] : at[middle + 1]] < wanted:
                low = middle + 1
            else:
                high = middle
        if low == len(at) - 1 or terms[at[low] : at[low + 1]] != wanted:
            raise KeyError(term)
        start, end = self._bounds[low], self._bounds[low + 1]
        return self._docs[start:end], self._impacts[start:end]

    def __iter__(self) -> Iterator[str]:
        terms, at = self._terms, self._at
        return (str(terms[at[i] : at[i + 1]], "utf-8") for i in range(len(self)))

    def __len__(self) -> int:
        return len(self._at) - 1


class PackedEntries(Sequence[Entry]):
    """The entries as views of the mapped file: an entry's strings are decoded when it is first asked for (a
    search reads a handful of 10k entries), and ``ids`` come from a section of their own."""

    def __init__(self, firsts: Sequence[int], offsets: Sequence[int], text: memoryview, ids: list[str]):
        self._firsts, self._offsets, self._text, self.ids = firsts, offsets, text, ids
        self._made: list[Entry | None] = [None] * len(ids)

    def __len__(self) -> int:
        return len(self.ids)

    def _entry(self, n: int) -> Entry:
        made = self._made[n]
        if made is None:
            at, text = self._offsets, self._text
            first, last = self._firsts[n], self._firsts[n + 1]
            # a damaged file gives wrong text (U+FFFD, empty strings), never an error in a search
            try:
                strings = [str(text[at[i] : at[i + 1]], "utf-8", "replace") for i in range(first, last)]
            except IndexError:
                strings = []
            entry_id, question, body, file, url, *tags = strings + [""] * (5 - len(strings))
            made = self._made[n] = Entry(entry_id, question, tags, body, file, url or None)
        return made

    @overload
    def __getitem__(self, n: int) -> Entry: ...

    @overload
    def __getitem__(self, n: slice) -> list[Entry]: ...

    def __getitem__(self, n: int | slice) -> Entry | list[Entry]:
        if isinstance(n, slice):
            return [self._entry(i) for i in range(len(self))[n]]
        return self._entry(range(len(self))[n])


def _sums(lengths: Iterable[int]) -> bytes:
    """Offsets of items of these lengths laid back to back, from 0 to the total, as an int64 section."""
    return array("q", itertools.accumulate(lengths, initial=0)).tobytes()


def dump(index: FaqIndex) -> bytes:
    """The index as one file: a JSON header, then sections -- the entry strings (UTF-8, byte offsets), the ids,
    the terms sorted by their bytes, the posting arrays -- that :func:`undump` reads in place."""
    terms = sorted(index.postings, key=str.encode)
    encoded = [term.encode() for term in terms]
    docs, impacts = array("i"), array("f")
    for term in terms:
        docs.extend(index.postings[term][0])
        impacts.extend(index.postings[term][1])
    strings = [[e.id, e.question, e.body, e.file, e.url or "", *e.tags] for e in index.entries]
    chunks = [text.encode() for texts in strings for text in texts]
    sections = [_sums(map(len, strings)), _sums(map(len, chunks)), b"".join(chunks),
                "\n".join(e.id for e in index.entries).encode(), _sums(map(len, encoded)), b"".join(encoded),
                _sums(len(index.postings[term][0]) for term in terms), docs.tobytes(), impacts.tobytes()]
    return pack(FORMAT, {"synonyms": index.synonyms, "glossary": index.glossary, "entries": len(index.entries),
                         "terms": len(terms), "postings": len(docs)}, sections)


def undump(data: bytes | mmap.mmap, base_url: str | None) -> FaqIndex | None:
    """The index in ``data`` (kept referenced: the index is views of it); None unless a whole index of this format."""
    try:
        header, (firsts, offsets, text, ids, term_at, terms, bounds, docs, impacts) = unpack(data, FORMAT)
        n_entries, n_terms = header["entries"], header["terms"]
        firsts_, at = firsts.cast("q"), offsets.cast("q")
        names = str(ids, "utf-8").split("\n") if n_entries else []
        if (len(names) != n_entries or len(firsts_) != n_entries + 1 or firsts_[-1] != len(at) - 1
                or at[-1] != len(text)):
            return None
        term_at_, bounds_, docs_, impacts_ = term_at.cast("q"), bounds.cast("q"), docs.cast("i"), impacts.cast("f")
        if (len(term_at_) != n_terms + 1 or term_at_[-1] != len(terms) or len(bounds_) != n_terms + 1
                or bounds_[-1] != len(docs_) or len(docs_) != header["postings"] or len(impacts_) != len(docs_)):
            return None
        return FaqIndex(PackedEntries(firsts_, at, text, names), synonyms=header["synonyms"],
                        glossary=header["glossary"], base_url=base_url,
                        postings=PackedPostings(terms, term_at_, bounds_, docs_, impacts_))
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
        return None


def given_key(env: Mapping[str, str]) -> str | None:
    """``HELPBOT_FAQ_CACHE_KEY``: the FAQ content's key from the workflow's hashFiles, so a fresh checkout neither
    lists nor hashes 10k files to find its index; unset, helpbot computes the key itself."""
    given = env_str(env, KEY_VARIABLE)
    if given is not None and not re.fullmatch(r"[0-9A-Za-z._-]{16,200}", given):
        raise ConfigError(KEY_VARIABLE, "expected the workflow's content hash: 16-200 letters, digits, '.', '_', '-'")
    return given


def load_index(path: Path, base_url: str | None = None, cache: Path | None = None,
               clock: Clock = SYSTEM_CLOCK, given: str | None = None) -> FaqIndex:
    """The FAQ folder's index: from the cache when it holds this content, else built (and then cached).
    ``given``: the content's key from the workflow (:func:`given_key`), trusted instead of hashing the files."""
    if not cache:
        return FaqIndex.load(path, base_url)
    names: list[str] | None = None
    if given:
        key = hashlib.sha256(b"%s%s\0given\0%s" % (FORMAT, sys.byteorder.encode(), given.encode())).hexdigest()
    else:
        names = entry_names(path)
        key = index_key(path, names, cache, clock)
    data = mapped(cache / f"index-{key}.bin")
    index = undump(data, base_url) if data is not None else None
    if index is None:
        index = FaqIndex.load(path, base_url, names)
        save(cache / f"index-{key}.bin", dump(index), keep=KEEP_FILES)
    index.key = key
    return index
