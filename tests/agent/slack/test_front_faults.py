"""Faults against ``helpbot answer`` end to end (the fake Slack, the scripted model, the Bedrock stub).

Each test is one attack on the promise that every run ends with exactly one answer or one notice in the
thread, ✅ or ❌, no 👀 and no placeholder left, bounded waits; exit codes 0/1/2/130; bad input is one line and
exit 2 with nothing posted. What a user would see is asserted on the fake's workspace.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.errors import ModelUnavailable
from agent.slack import markers
from agent.slack.front import Options, run
from tests.fakes.clock import FakeClock
from tests.fakes.front import (
    BOT,
    FAQ_URL,
    WRITE_METHODS,
    WRITES,
    answer_scripted,
    assert_final,
    bounded,
    cites_first_faq_hit,
    event_file,
    kinds_of,
    ours,
    placeholders,
    question_of,
)
from tests.fakes.model import Request, ScriptedModel, calls
from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack, Workspace

STORM = 1000  # longer than any budget


@pytest.fixture
def env(fake: FakeSlack) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_USER_TOKEN": USER_TOKEN, "SLACK_API_URL": fake.url,
            "HELPBOT_FAQ_BASE_URL": FAQ_URL.rsplit("/", 1)[0]}


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Any:
    """The Bedrock stub, and the process environment pointing at it and at the fake Slack (for ``main``)."""
    from tests.fakes.bedrock import BedrockStub

    with BedrockStub() as running:
        for name, value in {**env, "AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key",
                            "ANTHROPIC_BEDROCK_BASE_URL": running.url}.items():
            monkeypatch.setenv(name, value)
        yield running


# -- Slack write storms -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", WRITE_METHODS)
@pytest.mark.parametrize("retry_after", [3600, 31])
def test_a_huge_retry_after_on_any_write_is_not_waited_for(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                           method: str, retry_after: int) -> None:
    """Retry-After of an hour (or just over the per-write cap) once on each write: nothing sleeps that long."""
    fake.fail(method, status=429, retry_after=retry_after, times=1)
    sleeps: list[float] = []
    q = question_of(ws)
    code, _ = answer_scripted(env, cites_first_faq_hit(), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    bounded(sleeps)
    assert code == 0
    assert kinds_of(ws, q.ts) == ["answer"] and placeholders(ws, q.ts) == []
    reactions = ws.reactions("C0ECSUP", q.ts)
    if method == "reactions.remove":  # 👀 cannot come off when Slack refuses the one removal (a courtesy)
        assert "white_check_mark" in reactions
    else:
        assert reactions == {"white_check_mark": [BOT]}


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_5xx_storm_on_every_write_at_once_ends_bounded_with_no_placeholder(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], status: int) -> None:
    """Slack writes all down for good (reads still work): the run fails (exit 1), bounded, and -- since nothing can
    be written -- nothing of helpbot's is in the thread at all (no stray placeholder)."""
    for method in WRITE_METHODS:
        fake.fail(method, status=status, times=STORM)
    sleeps: list[float] = []
    q = question_of(ws)
    code, _model = answer_scripted(env, cites_first_faq_hit(), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    assert code == 1
    bounded(sleeps)
    assert ours(ws, q.ts) == [] and ws.reactions("C0ECSUP", q.ts) == {}


def test_a_storm_that_starts_mid_run_on_every_write_still_ends_in_one_answer(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """The placeholder and 👀 went out; then every write meets a 429 (Retry-After 10) first."""
    q = question_of(ws)
    sleeps: list[float] = []

    def script(request: Request) -> Any:
        if request.round == 1:
            for method in WRITE_METHODS:
                fake.fail(method, status=429, retry_after=10, times=1)
            return calls(("faq_search", {"query": "Shopify 在庫同期 遅延"}))
        return cites_first_faq_hit()(request)

    code, _ = answer_scripted(env, script, sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    assert code == 0
    bounded(sleeps)
    assert_final(ws, q.ts, "answer")


@pytest.mark.parametrize("value", ["abc", "-5", "", "1e9"])
def test_a_garbage_retry_after_is_bounded(ws: Workspace, fake: FakeSlack, env: dict[str, str], value: str) -> None:
    fake.fail("chat.update", status=429, times=STORM, body=None, retry_after=None)
    # a raw header the fake cannot express with an int: patch its fault directly (the queue is the fake's own)
    fake._faults["chat.update"][0].retry_after = value  # type: ignore[assignment]
    sleeps: list[float] = []
    q = question_of(ws)
    code, _ = answer_scripted(env, cites_first_faq_hit(), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    assert code == 0
    bounded(sleeps)
    assert_final(ws, q.ts, "answer")


def test_a_replies_storm_during_the_claim_ends_in_a_notice(ws: Workspace, fake: FakeSlack,
                                                           env: dict[str, str]) -> None:
    """conversations.replies is read once for the thread, then again for the claim: a 429 storm on the second."""
    q = question_of(ws)
    real = fake.api.methods["chat.postMessage"]

    def post_then_storm(params: dict[str, Any], token: Any) -> dict[str, Any]:
        fake.fail("conversations.replies", status=429, retry_after=1, times=STORM)
        return real(params, token)

    fake.api.methods["chat.postMessage"] = post_then_storm
    sleeps: list[float] = []
    code, model = answer_scripted(env, cites_first_faq_hit(), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    fake.api.methods["chat.postMessage"] = real
    assert code == 1 and model.requests == []
    assert_final(ws, q.ts, "failure")


def test_a_thread_with_messages_slack_never_sends_is_answered(ws: Workspace, fake: FakeSlack,
                                                               env: dict[str, str]) -> None:
    """A proxy's thread holding messages that are no objects or whose ts is no Slack ts, one of them a marker of
    helpbot's, or whose subtype or files are no string or list: float() of them, ``in`` a set and iteration raised
    out of the thread's context, the claim and the attachments, and the run never answered."""
    q = question_of(ws)
    real = fake.api.methods["conversations.replies"]
    marker = {"bot_id": BOT, "metadata": {"event_type": "helpbot_progress",
                                          "event_payload": {"question_ts": q.ts, "run": "other"}}}

    def with_odd_ones(params: dict[str, Any], token: Any) -> dict[str, Any]:
        answer = real(params, token)
        odd = ["x", None, {"ts": "abc", "text": "?"}, {"ts": ["1"]}, {**marker, "ts": "1e20"}, {**marker, "ts": ""},
               {"ts": "1735779660.999998", "subtype": ["x"], "text": "?"}, {"ts": "1735779660.999999", "files": 5}]
        return {**answer, "messages": [*answer["messages"], *odd]}

    fake.api.methods["conversations.replies"] = with_odd_ones
    code, _ = answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)
    assert code == 0
    assert_final(ws, q.ts, "answer")


@pytest.mark.parametrize("ts", ["abc", None, "1e400"])
def test_a_post_whose_answer_names_no_message_is_found_in_the_thread(ws: Workspace, fake: FakeSlack,
                                                                     env: dict[str, str], ts: Any) -> None:
    """A proxy's chat.postMessage answer whose ts is no Slack ts, on a re-run after a notice: float() of it raised
    out of the claim, and the placeholder it named no message of stayed beside a second notice. The post is taken
    as one whose answer was lost: the thread read back names it."""
    q = question_of(ws)
    ws.post("C0ECSUP", "回答を作成できませんでした", user=BOT, bot_id=ws.bot_id, thread_ts=q.ts,
            metadata=markers.metadata("failure", channel="C0ECSUP", question_ts=q.ts))
    real = fake.api.methods["chat.postMessage"]

    def posted(params: dict[str, Any], token: Any) -> dict[str, Any]:
        answer = {key: value for key, value in real(params, token).items() if key != "ts"}
        return answer if ts is None else {**answer, "ts": ts}  # None: no ts at all

    fake.api.methods["chat.postMessage"] = posted
    code, _ = answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)
    assert code == 0
    assert_final(ws, q.ts, "answer")


# -- the model failing ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("failing_round", [1, 2, 3])
def test_the_model_becoming_unavailable_at_any_round_ends_in_one_answer(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], failing_round: int) -> None:
    q = question_of(ws)

    def script(request: Request) -> Any:
        if request.round >= failing_round:
            raise ModelUnavailable("throttled for good")
        return calls(("faq_search", {"query": f"在庫 {request.round}"}))

    code, _ = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    assert code == 0
    assert_final(ws, q.ts, "answer")


# -- hostile tool_use blocks ------------------------------------------------------------------------------------
def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"query": "在庫"}
    for _ in range(levels):
        value = {"a": value}
    return value


HOSTILE_INPUTS: dict[str, Any] = {
    "string": "在庫",
    "list": ["在庫"],
    "null": None,
    "number": 7,
    "huge": {"query": "x" * 10_000_000},
    "surrogates": {"query": "在庫\ud800", "\udfff": "x"},
}


@pytest.mark.parametrize("shape", list(HOSTILE_INPUTS))
def test_a_hostile_tool_input_is_an_error_result_and_the_run_answers(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], shape: str) -> None:
    q = question_of(ws)

    def script(request: Request) -> Any:
        if request.round == 1:
            return [{"type": "tool_use", "id": "toolu_x", "name": "faq_search", "input": HOSTILE_INPUTS[shape]}]
        return "回答です。"

    code, model = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    assert code == 0 and len(model.requests) == 2
    assert_final(ws, q.ts, "answer")


@pytest.mark.parametrize("name", [None, 42, ["faq_search"], "\ud800faq", "faq_search\x00", "x" * 100_000,
                                  "../../etc/passwd"])
def test_a_hostile_tool_name_is_an_error_result_and_the_run_answers(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], name: Any) -> None:
    q = question_of(ws)

    def script(request: Request) -> Any:
        if request.round == 1:
            return [{"type": "tool_use", "id": "toolu_x", "name": name, "input": {"query": "在庫"}}]
        return "回答です。"

    code, model = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    assert code == 0 and len(model.requests) == 2
    [result] = model.requests[1].tool_results()
    assert result.get("is_error") is True
    assert_final(ws, q.ts, "answer")


def test_duplicate_missing_and_odd_ids_each_get_their_own_result(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    q = question_of(ws)
    blocks: list[dict[str, Any]] = [{"type": "tool_use", "id": "dup", "name": "faq_search", "input": {"query": "a"}},
                                    {"type": "tool_use", "id": "dup", "name": "faq_search", "input": {"query": "b"}},
                                    {"type": "tool_use", "name": "faq_search", "input": {"query": "c"}},
                                    {"type": "tool_use", "id": 5, "name": "faq_search", "input": {"query": "d"}},
                                    {"type": "tool_use", "id": "", "name": "faq_search", "input": {"query": "e"}},
                                    {"type": "tool_use", "id": "toolu_helpbot_0", "name": "faq_search",
                                     "input": {"query": "f"}}]
    blocks += [{"type": "tool_use", "id": f"t{i}", "name": "faq_search", "input": {"query": f"在庫 {i}"}}
               for i in range(20)]

    def script(request: Request) -> Any:
        return blocks if request.round == 1 else "回答です。"

    code, model = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    assert code == 0 and len(model.requests) == 2
    results = model.requests[1].tool_results()
    assert len(results) == len(blocks) and len({r["tool_use_id"] for r in results}) == len(blocks)
    assert_final(ws, q.ts, "answer")


def test_hundreds_of_calls_in_one_round_still_end_in_one_answer(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """300 searches in one round: the transcript cannot fit the request budget any more, so the run degrades
    (measured: no second model request) -- but it ends with one answer, ✅."""
    q = question_of(ws)
    blocks = [{"type": "tool_use", "id": f"t{i}", "name": "faq_search", "input": {"query": f"在庫 {i}"}}
              for i in range(300)]

    def script(request: Request) -> Any:
        return blocks if request.round == 1 else "回答です。"

    code, _ = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    assert code == 0
    assert_final(ws, q.ts, "answer")


# -- SIGTERM (an Actions cancel) at each step -------------------------------------------------------------------
def _sigterm_on(fake: FakeSlack, method: str, when: Callable[[dict[str, Any]], bool]) -> None:
    """SIGTERM to this process while the run waits for Slack's answer to ``method`` (once)."""
    real = fake.api.methods[method]
    fired = {"done": False}

    def hook(params: dict[str, Any], token: Any) -> dict[str, Any]:
        result = real(params, token)
        if not fired["done"] and when(params):
            fired["done"] = True
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    fake.api.methods[method] = hook


@pytest.mark.parametrize("step", ["placeholder", "eyes", "claim"])
def test_sigterm_while_starting_ends_in_one_notice(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                   step: str) -> None:
    q = question_of(ws)
    if step == "placeholder":
        _sigterm_on(fake, "chat.postMessage", lambda p: True)
    elif step == "eyes":
        _sigterm_on(fake, "reactions.add", lambda p: p.get("name") == "eyes")
    else:
        count = {"n": 0}

        def second(params: dict[str, Any]) -> bool:
            count["n"] += 1
            return count["n"] == 2  # the claim's re-read

        _sigterm_on(fake, "conversations.replies", second)
    code, _ = answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)
    assert code == 130
    assert_final(ws, q.ts, "failure")


# -- a write that Slack carried out, whose answer was lost (a reset or timeout after the fact) ------------------
class LosingSlack(FakeSlack):
    """The fake Slack, plus: the next ``lose[method]`` calls of a method are carried out, but the connection is
    closed before the answer is sent (the client sees a reset: RemoteDisconnected)."""

    def __init__(self, workspace: Workspace, lose: dict[str, int]):
        super().__init__(workspace)
        self.lose = dict(lose)

    def _handle(self, handler: Any) -> None:
        import io
        from urllib.parse import urlparse

        method = urlparse(handler.path).path.rsplit("/", 1)[-1]
        with self.workspace.lock:
            losing = self.lose.get(method, 0) > 0
            if losing:
                self.lose[method] -= 1
        if not losing:
            return super()._handle(handler)
        wfile, handler.wfile = handler.wfile, io.BytesIO()
        super()._handle(handler)  # done, but the answer goes nowhere
        handler.close_connection = True
        wfile.flush()


@pytest.fixture
def losing(ws: Workspace, request: pytest.FixtureRequest) -> Any:
    with LosingSlack(ws, request.param) as running:
        yield running


def _env_for(slack: FakeSlack) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_USER_TOKEN": USER_TOKEN, "SLACK_API_URL": slack.url,
            "HELPBOT_FAQ_BASE_URL": FAQ_URL.rsplit("/", 1)[0]}


@pytest.mark.parametrize("losing", [{"reactions.add": 1}, {"reactions.remove": 1}, {"chat.update": 1},
                                    {"chat.delete": 1}], indirect=True)
def test_an_idempotent_write_whose_answer_is_lost_is_retried_cleanly(ws: Workspace, losing: LosingSlack) -> None:
    q = question_of(ws)
    sleeps: list[float] = []
    code, _ = answer_scripted(_env_for(losing), cites_first_faq_hit(), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    assert code == 0
    assert_final(ws, q.ts, "answer")


@pytest.mark.parametrize("losing", [{"chat.postMessage": 1}], indirect=True)
def test_a_placeholder_whose_answer_is_lost_is_not_a_rival_run(ws: Workspace, losing: LosingSlack) -> None:
    """Slack took the placeholder but the answer was lost; the retry posts a second one. The run must not yield
    to its own first placeholder ("another run is answering", exit 0, 「調べています…」 left for ever): it is
    this run's (same run marker), so it is cleaned up and the run answers."""
    q = question_of(ws)
    code, model = answer_scripted(_env_for(losing), cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)
    assert code == 0 and len(model.requests) == 2
    assert_final(ws, q.ts, "answer")


@pytest.mark.parametrize("levels", [40, 600, 900])
def test_a_deeply_nested_tool_input_from_bedrock_is_an_error_result(
        bedrock: Any, ws: Workspace, fake: FakeSlack, tmp_path: Path, levels: int) -> None:
    """A tool_use input nested 600 levels deep (3.6 KB of JSON, through the real SDK) does not fail the
    whole run with a RecursionError (❌, exit 1): it is refused with an is_error result and the run answers."""
    from agent.cli import main
    from tests.fakes import bedrock as stub_lib

    q = question_of(ws)
    bedrock.script(stub_lib.tool_use("faq_search", _deep(levels)), stub_lib.text("回答です。"))
    path = event_file(tmp_path, ws.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0SUZUKI", "reaction": "help"}))
    assert main(["answer", "--event", path]) == 0
    assert len(bedrock.requests) == 2
    [result] = [b for b in bedrock.requests[1].body["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert result["is_error"] is True and "nested" in str(result["content"])
    assert_final(ws, q.ts, "answer")


@pytest.mark.parametrize("name", ["HELPBOT_MAX_COST_USD", "HELPBOT_DEADLINE_S", "HELPBOT_TOOL_TIMEOUT_S"])
@pytest.mark.parametrize("value", ["nan", "NaN", "-nan", "abc"])
def test_a_limit_that_is_not_a_number_is_a_configuration_error(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], name: str, value: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """float("nan") parses, and NaN passes "at least" checks: HELPBOT_DEADLINE_S=nan would disable the deadline
    and HELPBOT_MAX_COST_USD=nan the spend cap, silently. It is exit 2, and the thread is left in a final state."""
    from agent.build import build_agent

    env[name] = value
    q = question_of(ws)

    def make(registry: Any, on_progress: Any, on_event: Any) -> Any:
        return build_agent(env, registry=registry, on_progress=on_progress, on_event=on_event)

    code = run(Options(channel="C0ECSUP", ts=q.ts), env, make_agent=make, clock=FakeClock())
    assert code == 2
    assert f"{name}: {value!r} is not a number" in capsys.readouterr().err
    assert placeholders(ws, q.ts) == [] and "eyes" not in ws.reactions("C0ECSUP", q.ts)


# -- event files ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["directory", "symlink-to-zero", "not-utf8", "over-1mb", "missing",
                                  "dangling-symlink", "nested-33", "surrogate-channel", "huge-number"])
def test_a_bad_event_file_is_one_line_exit_2_and_nothing_posted(
        kind: str, fake: FakeSlack, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from agent.cli import main

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "event.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink-to-zero":
        path.symlink_to("/dev/zero")
    elif kind == "not-utf8":
        path.write_bytes(b'{"client_payload": {"channel": "C0ECSUP", "ts": "\xff\xfe"}}')
    elif kind == "over-1mb":
        path.write_text(json.dumps({"client_payload": {"channel": "C0ECSUP", "pad": "x" * 1_100_000}}))
    elif kind == "dangling-symlink":
        path.symlink_to(tmp_path / "nowhere")
    elif kind == "nested-33":
        path.write_text('{"client_payload": ' + "[" * 33 + "]" * 33 + "}")
    elif kind == "surrogate-channel":
        path.write_text('{"client_payload": {"channel": "C0EC\\ud800", "ts": "1735779660.000001"}}')
    elif kind == "huge-number":
        path.write_text('{"client_payload": {"channel": "C0ECSUP", "ts": ' + "9" * 5000 + "}}")
    assert main(["answer", "--event", str(path)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert fake.requests == []


# -- text that is not valid UTF-8, end to end -------------------------------------------------------------------
def test_a_free_question_with_lone_surrogates_is_answered_and_printed(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    event = tmp_path / "event.json"
    event.write_text(json.dumps({"inputs": {"question": "在庫\ud800同期\udfffが遅い"}, "ref": "refs/heads/main",
                                 "workflow": ".github/workflows/help.yml"}), encoding="utf-8")

    def script(request: Request) -> Any:
        return "回答\ud800です"

    code, _ = answer_scripted(env, script, event=str(event))
    assert code == 0
    out = capsys.readouterr().out
    assert "回答\ufffdです" in out
    assert [r for r in fake.requests if r.method in WRITES] == []


# -- the spend guard --------------------------------------------------------------------------------------------
def test_the_spend_cap_ends_the_investigation_with_one_answer(ws: Workspace, fake: FakeSlack,
                                                              env: dict[str, str]) -> None:
    """A model that would search for ever; a cap of 0.0001 USD: the run moves to its final answer."""
    from agent.core.loop import Agent
    from agent.core.settings import Settings
    from agent.core.tools import RegistryTools

    q = question_of(ws)

    def script(request: Request) -> Any:
        if request.forced:  # the final request
            return "ここまでの情報で回答します。"
        return calls(("faq_search", {"query": f"在庫 {len(request.messages)}"}))

    model = ScriptedModel(script)

    def make(registry: Any, on_progress: Any, on_event: Any) -> Agent:
        return Agent(model, RegistryTools(registry), Settings(max_cost_usd=0.0001), on_progress=on_progress,
                     on_event=on_event)

    code = run(Options(channel="C0ECSUP", ts=q.ts), env, make_agent=make, clock=FakeClock())
    assert code == 0 and len(model.requests) == 2  # one round, then the final answer
    assert_final(ws, q.ts, "answer")


# -- the relay ----------------------------------------------------------------------------------------------------
def test_the_relay_dispatches_one_event_once_under_replays_retries_and_concurrency() -> None:
    """The same signed delivery: 8 copies at once from threads, then replays and a retry of each reason."""
    import json
    import threading

    from tests.fakes.relay import GitHub, envelope, relay_for, signed

    github = GitHub()
    relay = relay_for(github)
    raw = json.dumps(envelope()).encode()
    barrier = threading.Barrier(8)
    statuses: list[int] = []

    def deliver() -> None:
        barrier.wait()
        statuses.append(relay(signed(raw), raw)[0])

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    for reason in ("http_timeout", "http_error", "too_many_redirects", "unknown_error", ""):
        extra = {"X-Slack-Retry-Num": "1", **({"X-Slack-Retry-Reason": reason} if reason else {})}
        statuses.append(relay(signed(raw, extra=extra), raw)[0])
    statuses.append(relay(signed(raw), raw)[0])
    assert statuses == [200] * 14
    assert len(github.requests) == 1
