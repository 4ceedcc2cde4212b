"""The in-house MCP client against a server as strict as the specification (tests/mcp_lib/paged_server.py): every
page of the tool list, bounded against a hostile server; images passed on, other content named; one listing
however many first calls arrive together."""

from __future__ import annotations

import base64
import json
import queue
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from mcp_lib import Platform, Registry
from mcp_lib.external import MAX_LIST_PAGES
from mcp_lib.media import MAX_RESULT_IMAGES
from tests.fakes.attachments import png

pytestmark = pytest.mark.scenario  # every test here starts processes

SERVER = Path(__file__).with_name("paged_server.py")
NAMES = ["echo", "chart", "mixed", "bad_images", "many_images", "big_images", "last_page_tool"]


def paged(tmp_path: Path, tools: list[str], mode: str = "") -> Registry:
    config = tmp_path / "helpbot.toml"
    config.write_text(f"[[mcp_servers]]\nname = \"paged\"\ncommand = {json.dumps(sys.executable)}\n"
                      f"args = [{json.dumps(str(SERVER))}]\nenv = [\"PAGED_SERVER_MODE\", \"PAGED_SERVER_LOG\"]\n"
                      f"tools = {json.dumps(tools)}\nlist_timeout_s = 120\n", encoding="utf-8")
    return Registry(env={"HELPBOT_CONFIG": str(config), "PAGED_SERVER_MODE": mode,
                         "PAGED_SERVER_LOG": str(tmp_path / "lists.log")})


@pytest.fixture
def registry(tmp_path: Path) -> Any:
    made = paged(tmp_path, NAMES)
    yield made
    made.close()


def test_every_page_of_the_tool_list_is_read(registry: Registry, tmp_path: Path) -> None:
    assert [t.function for t in registry.tools(only=["paged"])] == NAMES  # 4 pages of 2
    assert "cut short" not in registry.platforms()["paged"].overview
    assert (tmp_path / "lists.log").read_text().split() == ["None", "cGFnZS0x", "cGFnZS0y", "cGFnZS0z"]


@pytest.mark.parametrize(("mode", "expected", "why"), [
    ("repeat", NAMES[:6], "the server repeated a page cursor"),  # page 3 points back at page 2
    ("endless", [f"endless_{n}" for n in range(MAX_LIST_PAGES)], f"more than {MAX_LIST_PAGES} pages"),
])
def test_a_listing_that_never_ends_is_cut_short_and_says_so(tmp_path: Path, mode: str, expected: list[str],
                                                            why: str) -> None:
    registry = paged(tmp_path, [*NAMES, *(f"endless_{n}" for n in range(60))], mode=mode)
    try:
        assert [t.function for t in registry.tools(only=["paged"])] == expected
        assert f"(tool list cut short: {why})" in registry.platforms()["paged"].overview
    finally:
        registry.close()


def test_allowlisted_tools_the_server_does_not_list_are_named(tmp_path: Path) -> None:
    registry = paged(tmp_path, ["echo", "gone_tool"])
    try:
        assert [t.function for t in registry.tools(only=["paged"])] == ["echo"]
        assert "allowlisted tools the server did not list: 'gone_tool'" in registry.platforms()["paged"].overview
    finally:
        registry.close()


def test_an_image_is_passed_on_with_its_checked_type(registry: Registry) -> None:
    result = registry.call("paged_chart", {})
    assert not result.is_error
    assert [(i.media_type, base64.b64decode(i.data)) for i in result.images] == [("image/png", png(3, 2))]
    assert result.item == {"text": "sales by month"}
    assert "image 1: image/png, 3x2 px" in result.notes
    assert "images" not in result.to_dict()  # the JSON names the image; the bytes travel beside it


def test_other_content_is_named_and_embedded_text_is_kept(registry: Registry) -> None:
    result = registry.call("paged_mixed", {})
    assert len(result.images) == 1
    assert result.item == {"text": "mixed content", "embedded_resources": [
        {"uri": "file:///notes/readme.txt", "text": "embedded notes"}]}
    assert {"[1 audio item not shown: helpbot shows text and images]",
            "[1 resource link not shown: helpbot shows text and images]",
            "[1 binary resource not shown: helpbot shows text and images]"} <= set(result.notes)


def test_images_the_model_may_not_be_shown_are_named_with_the_reason(registry: Registry) -> None:
    result = registry.call("paged_bad_images", {})
    assert [i.media_type for i in result.images] == ["image/png"]  # declared JPEG: shown as what it is
    assert "[2 images not shown: not a PNG, JPEG, GIF or WebP image]" in result.notes  # the bitmap, the garbage
    assert "[1 image not shown: 9000x2 px (at most 8000 px a side)]" in result.notes
    assert "[1 image not shown: not valid base64]" in result.notes


@pytest.mark.parametrize(("tool", "shown", "left"), [("many_images", MAX_RESULT_IMAGES, 2), ("big_images", 1, 1)])
def test_one_result_carries_a_bounded_number_and_size_of_images(registry: Registry, tool: str, shown: int,
                                                                left: int) -> None:
    result = registry.call(f"paged_{tool}", {})
    assert len(result.images) == shown
    expected = f"[{left} image{'s' if left > 1 else ''} not shown: over the limit of one result"
    assert any(note.startswith(expected) for note in result.notes)


def test_concurrent_first_calls_share_one_listing(registry: Registry, tmp_path: Path) -> None:
    """The symptom of the issue: the second of two first calls found no tools ("tools of paged: ")."""
    start = threading.Barrier(2)
    results: list[Any] = [None, None]

    def call(index: int) -> None:
        start.wait()
        results[index] = registry.call("paged_last_page_tool", {})

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.item for r in results] == [{"text": "last_page_tool answered"}] * 2, [r.message for r in results]
    assert (tmp_path / "lists.log").read_text().split()[0] == "None"
    assert len((tmp_path / "lists.log").read_text().split()) == 4  # one listing: 4 pages, asked once each


class _SeenLock:
    """A real lock that reports each thread arriving at it (a seam: ``Platform(_lock=...)``)."""

    def __init__(self, arrived: queue.Queue[str]):
        self.lock = threading.Lock()
        self.arrived = arrived

    def __enter__(self) -> None:
        if threading.current_thread().name == "second":
            self.arrived.put("waits at the lock")
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_a_first_use_during_the_loading_waits_for_it() -> None:
    """Deterministic: the second first use starts while the first is inside the loading. Before, it found the
    loader already taken and returned the tools so far: none."""
    events: queue.Queue[str] = queue.Queue()
    seen: list[list[str]] = []

    def second() -> None:
        seen.append(list(platform.tools))
        events.put("returned")

    def load(target: Platform) -> None:
        thread = threading.Thread(target=second, name="second")
        thread.start()
        assert events.get(timeout=30) == "waits at the lock"  # not "returned" (with nothing)
        target._tools["late"] = object()  # type: ignore[assignment]
        holder.append(thread)

    holder: list[threading.Thread] = []
    platform = Platform(name="slow", overview="", scenes=[], security_rules=[], load_config=lambda env: {},
                        make_client=lambda config: config, load_tools=load,
                        _lock=_SeenLock(events))  # type: ignore[arg-type]
    assert list(platform.tools) == ["late"]
    holder[0].join()
    assert seen == [["late"]]
