"""The question is masked like a tool result: a held credential's exact value -- one no pattern knows -- in the
asked message, its thread or an attached log never reaches the model (which could post it reversed or encoded).
The mask is applied where the first request is assembled (agent/core/loop.py), not per source."""

from __future__ import annotations

import json
from typing import Any

from agent.core.model import Request
from tests.fakes.front import answer_scripted
from tests.fakes.model import calls
from tests.fakes.outward import outward_env
from tests.fakes.slack import FakeSlack, Workspace
from tests.fakes.slack_files import add_file

HELD = "r7Qm2vX"  # REDMINE_API_KEY's value: no pattern knows it, only its exact value masks it


def test_a_held_credential_in_the_question_thread_and_log_never_reaches_the_model(ws: Workspace,
                                                                                   fake: FakeSlack) -> None:
    env = {**outward_env(fake), "REDMINE_API_KEY": HELD}
    log = add_file(ws, "import.log", f"09:58:03 ERROR login with {HELD} rejected\n".encode(), channel="C0ECSUP",
                   user="U0TANAKA", filetype="text")
    root = ws.post("C0ECSUP", f"昨日のキーは {HELD} でした", user="U0SUZUKI")
    asked = ws.post("C0ECSUP", f"{HELD} で取込が失敗します。原因は？", user="U0TANAKA", thread_ts=root.ts,
                    files=[log])
    seen: list[str] = []

    def script(request: Request) -> Any:
        seen.append(json.dumps([request.system, request.messages], ensure_ascii=False))
        if request.round == 1:
            return calls(("faq_search", {"query": "取込 失敗"}))
        return "キーを確認してください。"

    code, _ = answer_scripted(env, script, channel="C0ECSUP", ts=asked.ts)
    assert code == 0 and len(seen) == 2
    assert "ERROR login with [REDACTED] rejected" in seen[0]  # the log was read, the value masked
    assert all(HELD not in request for request in seen)
