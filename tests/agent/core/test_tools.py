"""The tool seam: the registry's tools for the model, degraded-mode searches, several providers as one."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Sequence

from agent.core.tools import RegistryTools, join_until, run_concurrently
from mcp_lib import Registry
from tests.fakes.clock import FakeClock


def test_registry_tools_call_the_registry_and_collect_sources() -> None:
    tools = RegistryTools(Registry(env={}))
    names = [schema["name"] for schema in tools.schemas()]
    assert names == ["faq_search", "faq_getEntry"]
    outcome = tools.call("faq_search", {"query": "在庫 同期 遅い", "limit": 2})
    assert not outcome.is_error
    data = json.loads(outcome.content)
    assert [s["url"] for s in outcome.sources] == [item["url"] for item in data["items"]]
    assert all(s["title"] and s.get("snippet") for s in outcome.sources)


def test_registry_tools_refuse_tools_they_did_not_offer() -> None:
    tools = RegistryTools(Registry(env={}))  # the FAQ only: Slack is not configured
    assert "slack_search" not in [s["name"] for s in tools.schemas()]
    refused = tools.call("slack_search", {"query": "在庫"})
    assert refused.is_error and "unknown tool" in refused.content
    invalid = tools.call("faq_search", {"query": ""})
    assert invalid.is_error and "invalid arguments" in invalid.content


def test_degraded_mode_runs_only_the_search_tools_of_enabled_platforms() -> None:
    tools = RegistryTools(Registry(env={}))
    assert tools.search_calls("在庫") == [("faq_search", {"query": "在庫"})]
    assert "## faq" in tools.guide()


def test_run_concurrently_replaces_late_jobs() -> None:
    release = threading.Event()
    waited: list[float] = []

    def timeout_once_the_first_is_done(threads: Sequence[threading.Thread], timeout_s: float) -> None:
        waited.append(timeout_s)
        threads[0].join(5)  # then the timeout passes: the second job is late

    results = run_concurrently([lambda: "fast", lambda: (release.wait(5), "slow")[1]], 30.0,
                               on_timeout=lambda i: f"timeout {i}", wait=timeout_once_the_first_is_done)
    release.set()
    assert results == ["fast", "timeout 1"] and waited == [30.0]


def test_join_until_waits_for_the_threads_within_the_timeout() -> None:
    done = threading.Thread(target=lambda: None)
    done.start()
    join_until([done], 30.0)  # returns as soon as the thread has ended, long before the timeout
    assert not done.is_alive()


def test_join_until_on_a_clock_that_never_moves_waits_the_timeout_not_for_ever() -> None:
    release = threading.Event()
    stuck = threading.Thread(target=release.wait, daemon=True)
    stuck.start()
    waiting = threading.Thread(target=join_until, args=([stuck], 0.05, FakeClock()), daemon=True)
    waiting.start()
    waiting.join(10)  # the join is bounded by the seconds left on the clock, each time it is asked
    assert not waiting.is_alive() and stuck.is_alive()
    release.set()


def _tool_threads_since(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.name.startswith("helpbot-tool-")]


def _blocked_on_a_slot(thread: threading.Thread) -> bool:
    """The thread waits in ``threading.Semaphore.acquire`` (its current stack, read without touching it)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == "acquire" and frame.f_code.co_filename == threading.__file__:
            return True
        frame = frame.f_back
    return False


def _until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):  # ~5 s at most; the outcome never depends on how long it takes
        if condition():
            return
        threading.Event().wait(0.005)
    raise AssertionError("the condition was never met")


def test_run_concurrently_keeps_at_most_eight_jobs_in_flight() -> None:
    release, lock = threading.Event(), threading.Lock()
    active, peak = [0], [0]

    def job(i: int) -> int:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        release.wait(5)
        with lock:
            active[0] -= 1
        return i

    before = set(threading.enumerate())
    results: list[list[int | str]] = []
    batch = threading.Thread(target=lambda: results.append(run_concurrently(
        [lambda i=i: job(i) for i in range(12)], 10, on_timeout=lambda i: f"timeout {i}")))
    batch.start()
    # Eight run, and the other four are blocked waiting for a slot: a state that cannot change until released.
    _until(lambda: active[0] == 8 and len(_tool_threads_since(before)) == 12
           and sum(map(_blocked_on_a_slot, _tool_threads_since(before))) == 4)
    assert peak[0] == 8
    release.set()
    batch.join(5)
    assert results == [list(range(12))]  # the other four ran as slots came free


def test_a_job_still_waiting_for_a_slot_at_the_timeout_never_starts() -> None:
    release, started = threading.Event(), []
    before = set(threading.enumerate())

    def timeout_once_one_runs(threads: Sequence[threading.Thread], timeout_s: float) -> None:
        _until(lambda: len(started) == 1 and sum(map(_blocked_on_a_slot, threads)) == 1)

    def job(i: int) -> None:
        started.append(i)
        release.wait(5)

    results = run_concurrently([lambda: job(0), lambda: job(1)], 30.0, on_timeout=lambda i: f"timeout {i}",
                               max_in_flight=1, wait=timeout_once_one_runs)
    release.set()  # the first finishes and frees its slot; the second must not start now
    assert results == ["timeout 0", "timeout 1"]
    for thread in _tool_threads_since(before):
        thread.join(5)
    assert len(started) == 1  # both threads have ended, and only one job ever started
