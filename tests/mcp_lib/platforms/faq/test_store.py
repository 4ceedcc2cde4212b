"""The FAQ index on disk: built once per content, loaded when the content is the same, rebuilt otherwise."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mcp_lib import Registry
from mcp_lib.config import ConfigError
from mcp_lib.platforms import faq
from mcp_lib.platforms.faq import store
from tests.fakes.clock import FakeClock

REPO_FAQ = Path(__file__).resolve().parents[4] / "faq"
QUERIES = ["在庫がずれる", "rakuten orders not importing", "shopfy 在庫 反映されない", "CSVが文字化けする"]


def copy_faq(target: Path) -> Path:
    target.mkdir()
    for source in REPO_FAQ.iterdir():
        (target / source.name).write_bytes(source.read_bytes())
    return target


def content_key(folder: Path) -> str:
    return store.hash_files(folder, store.entry_names(folder))[0]


def ranking(index: faq.FaqIndex) -> list[list[tuple[str, float]]]:
    return [[(entry.id, round(score, 6)) for entry, score in index.search(q, 5)] for q in QUERIES]


def index_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("index-*.bin"))


def test_second_load_comes_from_the_cache_and_ranks_the_same(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    built = store.load_index(folder, cache=cache)
    assert not isinstance(built.postings, store.PackedPostings) and len(index_files(cache)) == 1
    loaded = store.load_index(folder, cache=cache)
    assert isinstance(loaded.postings, store.PackedPostings)
    assert ranking(loaded) == ranking(built)
    assert [e.__dict__ for e in loaded.entries] == [e.__dict__ for e in built.entries]
    assert loaded.similar_words("shopfy") == built.similar_words("shopfy")
    assert list(loaded.postings) == sorted(built.postings, key=str.encode)  # every term, as the typo search sees
    assert loaded.similar_words("throtling") == built.similar_words("throtling") != []  # a word of an entry only
    assert loaded.snippet(loaded.entry("stock-mismatch").body, "在庫がずれる") == \
        built.snippet(built.entry("stock-mismatch").body, "在庫がずれる")


def test_changed_content_is_a_new_index(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    store.load_index(folder, cache=cache)
    (folder / "gift.md").write_text("---\nid: gift\nquestion: ギフト包装はできますか？\ntags: [ギフト]\n---\n"
                                    "のし・包装は注文備考で指定します。\n", encoding="utf-8")
    index = store.load_index(folder, cache=cache)
    assert [e.id for e, _ in index.search("ギフト包装")][:1] == ["gift"]
    assert len(index_files(cache)) == 2
    (folder / "_synonyms.yml").write_text("- [ギフト, present]\n", encoding="utf-8")
    assert [e.id for e, _ in store.load_index(folder, cache=cache).search("present")][:1] == ["gift"]


def test_same_content_elsewhere_has_the_same_key(tmp_path: Path) -> None:
    first, second = copy_faq(tmp_path / "a"), copy_faq(tmp_path / "b")
    assert content_key(first) == content_key(second)
    (second / "job-rerun.md").write_bytes((second / "job-rerun.md").read_bytes() + b"\n")
    assert content_key(first) != content_key(second)


@pytest.mark.parametrize("damage", [
    lambda data: data[: len(data) // 2],
    lambda data: b"not an index" + data,
    lambda data: data.replace(b'"terms"', b'"tarms"', 1),
    lambda data: b"",
])
def test_a_damaged_cache_file_is_rebuilt(tmp_path: Path, damage) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    expected = ranking(store.load_index(folder, cache=cache))
    [path] = index_files(cache)
    path.write_bytes(damage(path.read_bytes()))
    assert store.undump(path.read_bytes(), None) is None
    assert ranking(store.load_index(folder, cache=cache)) == expected
    assert store.undump(path.read_bytes(), None) is not None  # and written back whole


def test_a_cache_folder_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    folder = copy_faq(tmp_path / "faq")
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    assert ranking(store.load_index(folder, cache=blocker / "cache")) == ranking(store.load_index(folder))


def test_old_index_files_are_pruned(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    for n in range(store.KEEP_FILES + 2):
        (folder / "extra.md").write_text(f"---\nid: extra\nquestion: 追加 {n}\n---\n本文 {n}\n", encoding="utf-8")
        store.load_index(folder, cache=cache)
    assert len(index_files(cache)) == store.KEEP_FILES


@pytest.mark.parametrize(("env", "expected"), [
    ({"HELPBOT_FAQ_CACHE_DIR": "/srv/cache", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, Path("/srv/cache")),
    ({"HELPBOT_FAQ_CACHE_DIR": "", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, Path("/x/helpbot/faq")),
    ({"XDG_CACHE_HOME": "", "HOME": "/h"}, Path("/h/.cache/helpbot/faq")),
    ({"HOME": ""}, None),
    ({}, None),
])
def test_cache_folder_from_the_environment(env: dict[str, str], expected: Path | None) -> None:
    assert store.cache_dir(env) == expected
    assert faq.load_config(env).cache_dir == expected


def test_the_tool_uses_the_configured_cache(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    env = {"HELPBOT_FAQ_PATH": str(folder), "HELPBOT_FAQ_CACHE_DIR": str(cache)}
    first = Registry(env=env).get_mcp("faq").functions["search"]("在庫がずれる")
    assert len(index_files(cache)) == 1
    second = Registry(env=env).get_mcp("faq").functions["search"]("在庫がずれる")
    assert first.items == second.items and first.items


LATER = FakeClock(wall=4e9)  # a clock long after every file here was written: their stats are settled


def test_settled_files_are_recognised_by_their_stats(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    names = store.entry_names(folder)
    store.load_index(folder, cache=cache, clock=FakeClock(wall=0.0))  # files written "just now": hashed, not recorded
    assert not (cache / store.KEYS_FILE).exists()
    expected = ranking(store.load_index(folder, cache=cache, clock=LATER))
    stats = store.stat_key(folder, names)
    assert store._known_keys(cache) == {stats: content_key(folder)}
    # the record is trusted without reading a file: pointed at another key, that key's index is built
    (cache / store.KEYS_FILE).write_text(json.dumps({stats: "0" * 64}))
    assert ranking(store.load_index(folder, cache=cache, clock=LATER)) == expected
    assert (cache / f"index-{'0' * 64}.bin").exists()


def test_a_write_that_keeps_the_size_is_seen(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    store.load_index(folder, cache=cache, clock=LATER)
    entry = folder / "job-rerun.md"
    before = entry.stat()
    text = entry.read_text(encoding="utf-8")
    entry.write_text(text.replace("question:", "question: ", 1).replace("\n\n", "\n", 1), encoding="utf-8")
    os.utime(entry, ns=(before.st_atime_ns, before.st_mtime_ns))  # even with the old mtime put back
    assert entry.stat().st_size == before.st_size
    index = store.load_index(folder, cache=cache, clock=LATER)
    assert index.entry("job-rerun").body == faq.parse_entry(entry).body
    assert index.key == content_key(folder) and len(index_files(cache)) == 2


def test_the_key_file_damaged_is_no_error(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    expected = ranking(store.load_index(folder, cache=cache, clock=LATER))
    for damage in ("not json", "[1, 2]", '{"a": 1}'):
        (cache / store.KEYS_FILE).write_text(damage)
        assert ranking(store.load_index(folder, cache=cache, clock=LATER)) == expected


def test_an_entry_added_after_the_record_is_indexed(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    store.load_index(folder, cache=cache, clock=LATER)
    assert store._known_keys(cache)
    (folder / "gift.md").write_text("---\nid: gift\nquestion: ギフト包装\n---\nのし欄で指定。\n", encoding="utf-8")
    assert [e.id for e, _ in store.load_index(folder, cache=cache, clock=LATER).search("ギフト包装")][:1] == ["gift"]
    stats = store.stat_key(folder, store.entry_names(folder))
    assert store._known_keys(cache)[stats] == content_key(folder)


def test_a_key_given_by_the_workflow_finds_the_index_without_the_folder(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    given = "9f" * 32 + "-use0.2.1-semantic-true"
    built = store.load_index(folder, cache=cache, given=given)
    assert not (cache / store.KEYS_FILE).exists()  # nothing hashed, so nothing recorded
    for file in folder.iterdir():
        file.unlink()
    loaded = store.load_index(folder, cache=cache, given=given)  # the folder is not even listed
    assert ranking(loaded) == ranking(built) and loaded.key == built.key
    assert ranking(store.load_index(copy_faq(tmp_path / "other"), cache=cache, given="another-key-0123456789"))


@pytest.mark.parametrize(("value", "expected"), [("", None), ("ab" * 32 + "-use0.2.1-semantic-true", None)])
def test_the_given_key_from_the_environment(value: str, expected: None) -> None:
    env = {"HELPBOT_FAQ_CACHE_KEY": value}
    assert store.given_key(env) == (value or None) and faq.load_config(env).cache_key == (value or None)


@pytest.mark.parametrize("value", ["short", "../../etc/passwd-0123456789", "a b" * 10, "x" * 201])
def test_a_given_key_that_is_no_hash_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="HELPBOT_FAQ_CACHE_KEY"):
        faq.load_config({"HELPBOT_FAQ_CACHE_KEY": value})


def test_entries_are_decoded_when_first_asked_for_and_damage_is_only_wrong_text(tmp_path: Path) -> None:
    folder, cache = copy_faq(tmp_path / "faq"), tmp_path / "cache"
    expected = ranking(store.load_index(folder, cache=cache))
    loaded = store.load_index(folder, cache=cache)
    assert isinstance(loaded.entries, store.PackedEntries)
    assert ranking(loaded) == expected and len(set(loaded.entries.ids)) == len(loaded.entries)
    assert sum(made is not None for made in loaded.entries._made) < len(loaded.entries)  # only the hits were made
    [path] = index_files(cache)
    body = loaded.entry("stock-mismatch").body.encode()
    data = path.read_bytes()
    at = data.index(body)
    damaged = data[:at] + b"\xff\xfe" + data[at + 2 :]  # the same size: the sections still line up
    index = store.undump(damaged, None)
    assert index is not None and index.entry("stock-mismatch").body.startswith("\ufffd")
    assert [e.id for e, _ in index.search("在庫がずれる", 3)]


def test_the_key_covers_every_module_of_the_package_as_the_workflow_hashes_it() -> None:
    # help.yml's key hashes mcp_lib/platforms/faq/*.py; a local key missing one (entries.py once) kept a stale index
    assert {path.name for path in store._CODE} == {path.name for path in Path(faq.__file__).parent.glob("*.py")}
    assert "entries.py" in {path.name for path in store._CODE}
