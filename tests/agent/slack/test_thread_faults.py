"""Thread-state faults, each ending with exactly one answer or notice, ✅ or ❌, no 👀 and no
placeholder left (against tests/fakes/slack.py): writes whose answers were lost, a refused placeholder in a race,
a storm that would spend the write budget before the final reactions, and bad configuration found too late."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agent.slack import markers
from agent.slack.blocks import PLACEHOLDER, placeholder_payload
from agent.slack.front import Options, run
from agent.slack.post import FINAL_RESERVE_S, WRITE_BUDGET_S
from tests.fakes.clock import FakeClock
from tests.fakes.front import BOT, STORM, answer_scripted, cites_first_faq_hit, factory, question_of, then, thread_state
from tests.fakes.model import Request, ScriptedModel
from tests.fakes.slack import FakeSlack, Workspace

WRITES = ("chat.postMessage", "chat.update", "chat.delete", "reactions.add", "reactions.remove")


# -- a write whose answer was lost is adopted, never made twice --------------------------------------------------------
def test_an_answer_post_retried_after_a_lost_5xx_is_adopted_not_posted_twice(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """The placeholder cannot be updated (5xx for ever), so the answer is posted anew -- and that post's first
    attempt reaches Slack but answers 503: the retry finds this run's answer in the thread and posts nothing."""
    q = question_of(ws)

    def faults() -> None:
        fake.fail("chat.update", status=503, times=STORM)
        fake.fail("chat.postMessage", status=503, times=1, lost=True)

    code, _ = answer_scripted(env, then(faults, cites_first_faq_hit()), channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 0 and kinds == ["answer"] and placeholders == []
    assert reactions == {"white_check_mark": [BOT]}
    assert len([r for r in fake.calls("chat.postMessage") if r.status == 503]) == 1


def test_an_update_that_went_through_though_slack_answered_503_is_kept(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """Every chat.update of the answer is done but answered 503: the placeholder already is the answer; nothing
    is posted anew (that would leave two answers, or delete the one there was)."""
    q = question_of(ws)
    code, _ = answer_scripted(env, then(lambda: fake.fail("chat.update", status=503, times=STORM, lost=True),
                                        cites_first_faq_hit()), channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 0 and kinds == ["answer"] and placeholders == []
    assert reactions == {"white_check_mark": [BOT]}
    assert len(fake.calls("chat.postMessage")) == 1  # the placeholder only


def test_a_notice_post_whose_answer_was_lost_is_not_posted_twice(ws: Workspace, fake: FakeSlack,
                                                                env: dict[str, str]) -> None:
    q = question_of(ws)

    def broken(request: Request) -> Any:
        fake.fail("chat.update", status=503, times=STORM)
        fake.fail("chat.postMessage", status=503, times=1, lost=True)
        raise RuntimeError("the model script broke")

    code, _ = answer_scripted(env, broken, channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 1 and kinds == ["failure"] and placeholders == []
    assert reactions == {"x": [BOT]}


# -- the claim holds whatever happened to the placeholder --------------------------------------------------------------
def test_a_run_whose_placeholder_was_refused_yields_to_an_older_run(ws: Workspace, fake: FakeSlack,
                                                                   env: dict[str, str]) -> None:
    """Run B's placeholder is in the thread; run A's is refused with a Retry-After longer than we wait. A must not
    answer over B: its answer claims in the placeholder's stead, loses, and is removed. Then B answers."""
    q = question_of(ws)
    ws.post("C0ECSUP", PLACEHOLDER, user=BOT, bot_id=ws.bot_id, thread_ts=q.ts, blocks=placeholder_payload()["blocks"],
            metadata=markers.metadata("progress", channel="C0ECSUP", question_ts=q.ts, run="B"))
    fake.fail("chat.postMessage", status=429, retry_after=120, times=1)
    code, _ = answer_scripted({**env, "GITHUB_RUN_ID": "A"}, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 0 and kinds == ["progress"] and len(placeholders) == 1  # B's, untouched
    assert "eyes" not in reactions or reactions == {"eyes": [BOT]}
    code, _ = answer_scripted({**env, "GITHUB_RUN_ID": "B"}, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 0 and kinds == ["answer"] and placeholders == []
    assert reactions == {"white_check_mark": [BOT]}


def test_two_racing_runs_one_without_a_placeholder_post_one_answer(ws: Workspace, fake: FakeSlack,
                                                                  env: dict[str, str]) -> None:
    q = question_of(ws)
    fake.fail("chat.postMessage", status=429, retry_after=120, times=1)  # whichever run posts first
    start = threading.Barrier(2)
    codes: list[int] = []

    def one_run(name: str) -> None:
        model = ScriptedModel(cites_first_faq_hit())
        start.wait()
        codes.append(run(Options(channel="C0ECSUP", ts=q.ts), {**env, "GITHUB_RUN_ID": name},
                         make_agent=factory(env, model), clock=FakeClock()))

    runs = [threading.Thread(target=one_run, args=(name,)) for name in "AB"]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join(timeout=60)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert codes == [0, 0] and kinds == ["answer"] and placeholders == []
    assert reactions == {"white_check_mark": [BOT]}


# -- the final transitions have budget of their own --------------------------------------------------------------------
def test_a_storm_that_spends_the_budget_on_the_answer_still_ends_with_a_check_mark_and_no_eyes(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """chat.update refuses with Retry-After 30 for ever (the answer is posted anew after it), then 👀 and ✅ each
    meet a few 429s: before, the update storm spent the whole 60 s and 👀 stayed next to no ✅."""
    q = question_of(ws)

    def storms() -> None:
        fake.fail("chat.update", status=429, retry_after=30, times=STORM)
        fake.fail("reactions.remove", status=429, retry_after=2, times=3)
        fake.fail("reactions.add", status=429, retry_after=2, times=5)

    sleeps: list[float] = []
    code, _ = answer_scripted(env, then(storms, cites_first_faq_hit()), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 0 and kinds == ["answer"] and placeholders == []
    assert reactions == {"white_check_mark": [BOT]}
    assert sum(sleeps) <= WRITE_BUDGET_S + 1.5
    assert sum(s for s in sleeps if s >= 30) <= WRITE_BUDGET_S - FINAL_RESERVE_S + 0.5  # the storm kept out


# -- configuration is checked before anything is posted ----------------------------------------------------------------
@pytest.mark.parametrize("bad", ["settings", "platform", "helpbot.toml"])
def test_bad_configuration_is_exit_2_with_nothing_posted(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                         tmp_path: Path, bad: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The real agent factory (the configuration is read where it always is); only the check moved earlier."""
    q = question_of(ws)
    broken = {"settings": {"HELPBOT_DEADLINE_S": "soon"},
              "platform": {"GITHUB_TOKEN": "gh-test-token", "HELPBOT_GITHUB_REPOS": "not a repository"},
              "helpbot.toml": {"HELPBOT_CONFIG": str(tmp_path / "helpbot.toml")}}[bad]
    (tmp_path / "helpbot.toml").write_text("this is [not toml", encoding="utf-8")
    code = run(Options(channel="C0ECSUP", ts=q.ts), {**env, **broken}, clock=FakeClock())
    assert code == 2
    assert [r.method for r in fake.requests if r.method in WRITES] == []
    assert thread_state(ws, q.ts) == ([], [], {})
    assert "configuration error" in capsys.readouterr().err
