"""The thread always ends in a final state: Slack write storms, rate-limited progress, racing runs.

Every test asserts what a user would see in the thread (the fake's workspace): exactly one answer or notice, ✅ or
❌, no 👀 and no placeholder left; and that the run waited only what the write budget allows (the injected
sleeps; nothing really sleeps).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agent.slack import markers
from agent.slack.blocks import PLACEHOLDER, placeholder_payload
from agent.slack.front import Options, run
from agent.slack.post import MAX_WAIT_S, WRITE_BUDGET_S, SlackOut
from agent.slack.reply import ProgressThrottle, ThreadReply
from tests.fakes.clock import FakeClock
from tests.fakes.front import (
    BOT,
    FAQ_URL,
    STORM,
    answer_scripted,
    cites_first_faq_hit,
    factory,
    markdown_of,
    question_of,
    thread_state,
)
from tests.fakes.model import Request, ScriptedModel, calls
from tests.fakes.slack import BOT_TOKEN, FakeSlack, Message, Workspace


# -- storms ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["chat.update", "chat.postMessage", "reactions.add", "reactions.remove",
                                    "chat.delete"])
def test_a_short_storm_on_any_write_is_waited_out(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                  method: str) -> None:
    """Three 429s in a row (more than slack-sdk's two retries) on one method: the run still ends clean (and an
    earlier run's notice, which this run deletes, does not stay)."""
    q = question_of(ws)
    ws.post("C0ECSUP", "回答を作成できませんでした", user=BOT, bot_id=ws.bot_id, thread_ts=q.ts,
            metadata=markers.metadata("failure", channel="C0ECSUP", question_ts=q.ts))
    q.reactions["x"] = [BOT]
    fake.fail(method, status=429, retry_after=10, times=3)
    sleeps: list[float] = []
    code, _ = answer_scripted(env, cites_first_faq_hit(), sleeps=sleeps, clock=FakeClock(tick=0), channel="C0ECSUP",
                              ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 0 and kinds == ["answer"] and placeholders == []
    assert reactions == {"white_check_mark": [BOT]}
    assert sum(sleeps) <= WRITE_BUDGET_S + 1.5 and all(s <= MAX_WAIT_S + 0.5 for s in sleeps)


def test_an_endless_storm_on_chat_update_posts_the_answer_anew_and_deletes_the_placeholder(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    fake.fail("chat.update", status=429, retry_after=30, times=STORM)
    sleeps: list[float] = []
    q = question_of(ws)
    code, _ = answer_scripted(env, cites_first_faq_hit(), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 0 and kinds == ["answer"] and placeholders == []
    assert reactions == {"white_check_mark": [BOT]}
    assert sum(sleeps) <= WRITE_BUDGET_S + 1.5
    [answer] = [m for m in ws.thread("C0ECSUP", q.ts)[1:] if m.user == BOT]
    assert FAQ_URL in markdown_of(answer)


def test_an_endless_storm_on_reactions_remove_still_ends_within_the_budget(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """👀 cannot be removed while Slack refuses for ever; the run still delivers and ends, bounded."""
    fake.fail("reactions.remove", status=429, retry_after=30, times=STORM)
    sleeps: list[float] = []
    q = question_of(ws)
    code, _ = answer_scripted(env, cites_first_faq_hit(), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 0 and kinds == ["answer"] and placeholders == []
    assert "white_check_mark" in reactions
    assert sum(sleeps) <= WRITE_BUDGET_S + 1.5


def test_when_nothing_can_be_posted_the_run_fails_in_bounded_time_and_leaves_no_eyes(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    fake.fail("chat.postMessage", status=429, retry_after=30, times=STORM)
    sleeps: list[float] = []
    q = question_of(ws)
    code, _ = answer_scripted(env, cites_first_faq_hit(), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 1 and kinds == [] and placeholders == []
    assert reactions == {"x": [BOT]}
    assert sum(sleeps) <= WRITE_BUDGET_S + 1.5


def test_a_5xx_storm_on_the_answer_update_and_a_failing_post_end_in_a_notice(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """The placeholder cannot be updated (5xx for ever) and the answer cannot be posted anew: the run fails, the
    notice is posted as a reply, and the placeholder is deleted -- not left saying 「調べています…」."""
    fake.fail("chat.update", status=503, times=STORM)
    q = question_of(ws)
    answered = {"n": 0}

    def script(request: Request) -> Any:
        fake.fail("chat.postMessage", error="msg_too_long", times=1)  # the answer's own post is refused
        answered["n"] += 1
        return "回答です。"

    code, _ = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 1 and kinds == ["failure"] and placeholders == []
    assert reactions == {"x": [BOT]}


# -- progress is best effort ----------------------------------------------------------------------------------------
def test_a_rate_limited_progress_update_is_never_waited_for(ws: Workspace, fake: FakeSlack,
                                                            env: dict[str, str]) -> None:
    def rounds(request: Request) -> Any:
        if request.round <= 4:
            return calls(("faq_search", {"query": f"在庫 {request.round}"}))
        return "在庫同期の手順です。"

    fake.fail("chat.update", status=429, retry_after=30, times=1)  # the first progress update
    sleeps: list[float] = []
    q = question_of(ws)
    code, _ = answer_scripted(env, rounds, sleeps=sleeps, clock=FakeClock(tick=10), channel="C0ECSUP", ts=q.ts)
    assert code == 0 and sleeps == []  # not one second spent waiting on Slack
    updates = fake.calls("chat.update")
    assert updates[0].status == 429 and len([u for u in updates if u.status == 429]) == 1
    kinds, placeholders, _ = thread_state(ws, q.ts)
    assert kinds == ["answer"] and placeholders == []


# -- racing runs ----------------------------------------------------------------------------------------------------
def test_two_runs_racing_for_one_message_post_one_answer(ws: Workspace, fake: FakeSlack,
                                                         env: dict[str, str]) -> None:
    """Two runs for the same message at the same moment, in two threads: whatever the interleaving, one answer."""
    q = question_of(ws)
    start = threading.Barrier(2)
    codes: list[int] = []

    def one_run() -> None:
        model = ScriptedModel(cites_first_faq_hit())
        start.wait()
        codes.append(run(Options(channel="C0ECSUP", ts=q.ts), env, make_agent=factory(env, model),
                         clock=FakeClock()))

    runs = [threading.Thread(target=one_run) for _ in range(2)]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join(timeout=60)
    assert codes == [0, 0]
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert kinds == ["answer"] and placeholders == []
    assert reactions == {"white_check_mark": [BOT]}


def reply_for(ws: Workspace, fake: FakeSlack, question: Message, run_name: str, *,
              reread: Any = None) -> ThreadReply:
    from slack_sdk import WebClient

    from agent.report import Trace

    out = SlackOut(WebClient(token=BOT_TOKEN, base_url=fake.url, retry_handlers=[]),
                   trace=Trace(None, FakeClock()), clock=FakeClock())
    me = markers.Me(ws.bot_user_id, ws.bot_id)

    def thread() -> list[dict[str, Any]]:
        return [ws.message_to_api(m, include_metadata=True) for m in ws.thread("C0ECSUP", question.ts)]

    return ThreadReply(out, channel="C0ECSUP", root=question.ts, question_ts=question.ts,
                       throttle=ProgressThrottle(FakeClock(), 5.0), run_link=None, me=me, run=run_name,
                       reread=reread or thread)


def test_the_older_placeholder_wins_in_either_order_of_reading(ws: Workspace, fake: FakeSlack) -> None:
    q = question_of(ws)
    first = reply_for(ws, fake, q, "A")
    # B posts and reads while A has posted but not yet read: B's placeholder is younger, B yields
    second = reply_for(ws, fake, q, "B")
    plain = first.reread

    def a_reads_after_b() -> Any:
        assert second.start() is False and second.yielded_because == "another run is answering"
        assert plain is not None
        return plain()

    first.reread = a_reads_after_b
    assert first.start() is True
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert kinds == ["progress"] and [p.ts for p in placeholders] == [first.placeholder]
    assert reactions == {"eyes": [BOT]}  # only the winner reacts; the loser removed nothing of the winner's
    first.fail("テスト")
    assert thread_state(ws, q.ts)[0] == ["failure"] and ws.reactions("C0ECSUP", q.ts) == {"x": [BOT]}


def test_a_run_that_finds_an_answer_posted_meanwhile_yields(ws: Workspace, fake: FakeSlack) -> None:
    q = question_of(ws)
    ws.post("C0ECSUP", "回答", user=BOT, bot_id=ws.bot_id, thread_ts=q.ts,
            metadata=markers.metadata("answer", channel="C0ECSUP", question_ts=q.ts, parts=1))
    late = reply_for(ws, fake, q, "late")
    assert late.start() is False and "answered meanwhile" in late.yielded_because
    assert thread_state(ws, q.ts)[:2] == (["answer"], [])


def test_a_forged_placeholder_by_another_app_does_not_win(ws: Workspace, fake: FakeSlack) -> None:
    q = question_of(ws)
    ws.post("C0ECSUP", PLACEHOLDER, user="U0OTHERBOT", bot_id="B0OTHERAPP", thread_ts=q.ts,
            metadata=markers.metadata("progress", channel="C0ECSUP", question_ts=q.ts, run="x"),
            blocks=placeholder_payload()["blocks"])
    assert reply_for(ws, fake, q, "mine").start() is True


# -- bounded input, end to end ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "deep", "zero"])
def test_a_hostile_event_file_is_one_line_exit_2_and_nothing_posted(
        kind: str, fake: FakeSlack, env: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import os

    from agent.cli import main

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "event.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    else:
        path = "/dev/zero"
    assert main(["answer", "--event", str(path)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "Traceback" not in err[0]
    assert fake.requests == []
