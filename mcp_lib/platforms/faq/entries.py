"""faq.entries: the FAQ folder's files -- entries with front matter, the synonym table, the glossary -- and the
cache files' one container (faq.store's index, faq.semantic's vectors), written only by renaming over."""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config import ConfigError

SYNONYMS_FILE = "_synonyms.yml"
GLOSSARY_FILE = "_glossary.yml"


def entry_names(path: Path) -> list[str]:
    """The entry files under the folder, as sorted relative posix paths: every ``*.md`` except README and files
    or folders starting with ``_`` or ``.``. Plain strings: listing 10k entries stays a few milliseconds."""
    found: list[str] = []
    for folder, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        prefix = os.path.relpath(folder, path).replace(os.sep, "/") + "/"
        prefix = "" if prefix == "./" else prefix
        found.extend(prefix + name for name in files
                     if name.endswith(".md") and not name.startswith(("_", ".")) and name.lower() != "readme.md")
    return sorted(found, key=lambda name: name.split("/"))


@dataclass
class Entry:
    id: str
    question: str
    tags: list[str]
    body: str
    file: str
    url: str | None = None


_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n(.*))?\Z", re.S)


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def parse_entry(path: Path, root: Path | None = None) -> Entry:
    """One FAQ file: a ``---`` front matter block (id, question, tags, optional url), then the markdown answer.
    Anything malformed is a ConfigError that names the file and says what to fix."""
    import yaml  # not at the top: the configuration check, on the way to 👀, parses no entry

    where = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError:
        raise ConfigError(where, "not UTF-8 text; save FAQ files as UTF-8") from None
    match = _FRONT_MATTER_RE.match(text)
    if not match:
        raise ConfigError(where, "no front matter: the file must start with a '---' line, then id/question/tags, "
                                 "then a closing '---' line")
    try:
        meta = yaml.load(match.group(1), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 10x faster
    except yaml.YAMLError as exc:
        raise ConfigError(where, f"front matter is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(meta, dict):
        raise ConfigError(where, "front matter must be 'key: value' lines (id, question, tags, url)")
    for key in ("id", "question"):
        value = meta.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ConfigError(where, f"front matter lacks {key!r}")
        if not _scalar(value):
            raise ConfigError(where, f"{key!r} must be a single value, not {type(value).__name__}")
    entry_id = str(meta["id"]).strip()
    if re.search(r"\s", entry_id):
        raise ConfigError(where, f"id {entry_id!r} must not contain spaces")
    tags = [] if meta.get("tags") is None else meta["tags"]
    if not isinstance(tags, list) or not all(_scalar(tag) for tag in tags):
        raise ConfigError(where, "'tags' must be a list of words, e.g. tags: [在庫, Shopify]")
    url = meta.get("url")
    if url is not None and not (isinstance(url, str) and re.match(r"https?://\S+\Z", url.strip())):
        raise ConfigError(where, f"'url' must be an http(s) URL, got {url!r}")
    body = (match.group(2) or "").strip()
    if not body:
        raise ConfigError(where, "the answer is missing: write it below the closing '---'")
    name = path.relative_to(root).as_posix() if root else path.name
    return Entry(id=entry_id, question=str(meta["question"]).strip(), tags=[str(t) for t in tags], body=body,
                 file=name, url=url.strip() if url else None)


def _table(path: Path, empty: list[Any] | dict[str, Any], example: str) -> Any:
    """A table of the FAQ folder: its YAML, empty when the file is (or is missing), else of the type of ``empty``."""
    import yaml

    if not path.exists():
        return empty
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), f"not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw or empty, type(empty)):
        raise ConfigError(str(path), f"expected {example}")
    return raw or empty


def load_synonyms(path: Path) -> list[list[str]]:
    """``_synonyms.yml``: a list of groups, each a list of words meaning the same thing for searching."""
    groups = _table(path, [], "a list of synonym groups, e.g. - [在庫, stock, inventory]")
    for group in groups:
        if not isinstance(group, list) or len(group) < 2 or not all(_scalar(w) for w in group):
            raise ConfigError(str(path), f"each synonym group must be a list of two or more words, got {group!r}")
    return [[str(w) for w in group] for group in groups]


def load_glossary(path: Path) -> dict[str, list[str]]:
    """``_glossary.yml``: per Japanese word of the FAQ, the English words that ask for it (query time only)."""
    raw = _table(path, {}, "日本語: [english, ...] lines, e.g. 在庫: [stock, inventory]")
    for word, english in raw.items():
        if not _scalar(word) or not isinstance(english, list) or not english or not all(_scalar(w) for w in english):
            raise ConfigError(str(path), f"each word needs a list of English words, got {word!r}: {english!r}")
    return {str(word): [str(w) for w in english] for word, english in raw.items()}


def pack(kind: bytes, header: dict[str, Any], sections: list[bytes]) -> bytes:
    """A cache file: ``kind`` (its format's line), a JSON header, then raw sections, each 8-byte aligned for arrays."""
    head = json.dumps({**header, "sizes": [len(s) for s in sections]}, ensure_ascii=False).encode()
    return b"".join(s + b"\0" * (-len(s) % 8) for s in [kind + len(head).to_bytes(8, "little"), head, *sections])


def unpack(data: bytes | mmap.mmap, kind: bytes) -> tuple[dict[str, Any], list[memoryview]]:
    """The header and the sections (views of ``data``) of a :func:`pack` file of that kind; ValueError, KeyError or
    TypeError when it is not one, or not whole."""
    view = memoryview(data)
    if bytes(view[: len(kind)]) != kind:
        raise ValueError("not a file of this kind")
    at = len(kind) + 8
    size, at = int.from_bytes(view[len(kind) : at], "little"), at + -at % 8
    header = json.loads(bytes(view[at : at + size]))
    at += size + (-size % 8)
    sections = []
    for length in header["sizes"]:
        if not isinstance(length, int) or length < 0 or at + length > len(view):
            raise ValueError("a section runs past the end of the file")
        sections.append(view[at : at + length])
        at += length + (-length % 8)
    if at != len(view):
        raise ValueError("not the sections the header lists")
    return header, sections


def mapped(path: Path) -> mmap.mmap | None:
    """The file mapped read-only (the pages are read as they are touched), or None when it cannot be."""
    try:
        with path.open("rb") as file:
            return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, or empty (an empty file cannot be mapped)
        return None


def save(path: Path, data: bytes, keep: int = 0) -> None:
    """A cache file renamed over ``path`` (a concurrent reader sees the old or the new one); with ``keep``, only
    the ``keep`` newest of its kind (name up to the last ``-``) stay. An unwritable folder only costs a rebuild."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as out:
            out.write(data)
        os.replace(out.name, path)
        if keep:
            others = [p for p in path.parent.glob(f"{path.name.rsplit('-', 1)[0]}-*{path.suffix}") if p != path]
            for stale in sorted(others, key=lambda p: p.stat().st_mtime_ns, reverse=True)[keep - 1 :]:
                stale.unlink(missing_ok=True)
