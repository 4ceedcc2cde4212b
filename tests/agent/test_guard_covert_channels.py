"""No covert bits in a private run's public artifacts that come from what the model consulted.

The job summary renders its links through the guard, which keeps a link's query only for a host that is
configured or was consulted. The answer's own permalink (``…/p<ts>?thread_ts=…``) is on the workspace's host: if
that host counted only once a Slack source was consulted, the summary of a private run would say whether the
model read Slack -- a bit per run the model chooses.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.core.model import Request
from tests.fakes.model import calls
from tests.fakes.outward import outward_env, public_view, run
from tests.fakes.slack import FakeSlack, Workspace


def consulting(*tools: tuple[str, dict[str, Any]]) -> Callable[[Request], Any]:
    def script(request: Request) -> Any:
        if request.round == 1 and tools:
            return calls(*tools)
        return "確認しました。"

    return script


CHOICES = {
    "nothing": consulting(),
    "slack": consulting(("slack_getConversationHistory", {"channel": "C0SECRET"})),
    "faq": consulting(("faq_search", {"query": "在庫同期"})),
    "both": consulting(("slack_getConversationHistory", {"channel": "C0ECSUP"}), ("faq_search", {"query": "在庫"})),
}


@pytest.mark.parametrize("dry_run", [False, True])
def test_what_the_model_consulted_does_not_show_in_a_private_runs_summary(
        dry_run: bool, fake: FakeSlack, ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = outward_env(fake)
    views = {case: public_view(run(env, ws, fake, tmp_path / case, capsys, script, channel="C0SECRET",
                                   question="障害対応の手順は？", dry_run=dry_run))
             for case, script in CHOICES.items()}
    assert all(view == views["nothing"] for view in views.values()), views
    if not dry_run:
        assert "?thread_ts=" in views["nothing"]["summary"]  # the permalink whole, whatever was consulted
