"""People acting on the thread while helpbot works: the placeholder deleted, 👀 taken off, ✅ already there,
1,200 replies; and a long answer whose further parts are lost writes -- the run still ends with one answer, ✅,
no 👀 and no placeholder."""

from __future__ import annotations

from typing import Any

import pytest

from agent.slack.blocks import PLACEHOLDER
from tests.fakes.front import BOT, answer_scripted, cites_first_faq_hit, question_of, then, thread_state
from tests.fakes.model import Request
from tests.fakes.slack import FakeSlack, Workspace


@pytest.mark.parametrize("act", ["delete-placeholder", "remove-eyes", "add-check-by-bot", "reply-flood"])
def test_people_acting_on_the_thread_meanwhile(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                               act: str) -> None:
    q = question_of(ws)

    def meddle() -> None:
        with ws.lock:
            if act == "delete-placeholder":
                ws.messages["C0ECSUP"] = [m for m in ws.messages["C0ECSUP"] if PLACEHOLDER not in (m.text or "")]
            elif act == "remove-eyes":
                ws.message("C0ECSUP", q.ts).reactions.pop("eyes", None)  # type: ignore[union-attr]
            elif act == "add-check-by-bot":
                ws.message("C0ECSUP", q.ts).reactions["white_check_mark"] = [BOT]  # type: ignore[union-attr]
        if act == "reply-flood":
            for i in range(1200):
                ws.post("C0ECSUP", f"返信 {i}", user="U0TANAKA", thread_ts=q.ts)

    code, _ = answer_scripted(env, then(meddle, cites_first_faq_hit()), channel="C0ECSUP", ts=q.ts)
    kinds, placeholders, reactions = thread_state(ws, q.ts)
    assert code == 0 and kinds == ["answer"] and placeholders == [], kinds
    assert reactions == {"white_check_mark": [BOT]}


def test_a_long_answer_whose_further_parts_are_lost_writes_is_posted_once(ws: Workspace, fake: FakeSlack,
                                                                         env: dict[str, str]) -> None:
    """A 60,000-character answer is several messages; each further part's post goes through but answers 503: the
    retry finds it (by its text) instead of posting it twice."""
    q = question_of(ws)
    long_answer = "\n\n".join(f"段落 {i}: " + "在庫同期の手順。" * 60 for i in range(120))

    def script(request: Request) -> Any:
        fake.fail("chat.postMessage", status=503, times=2, lost=True)  # the first two parts (after the placeholder)
        return long_answer

    fake.fail("chat.update", status=503, times=1000)  # so the first part is posted anew too
    code, _ = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    ours = [m for m in ws.thread("C0ECSUP", q.ts)[1:] if m.user == BOT]
    texts = [m.text for m in ours]
    assert code == 0 and len(texts) == len(set(texts)) and len(ours) > 1
