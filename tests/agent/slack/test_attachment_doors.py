"""Attachments keep to the Slack tokens' door: a file URL anywhere but the Slack API's own origin (here the fake's:
scheme, host and port) gets no token, is named unreadable, and the run goes on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.attachments import ask, question_text
from tests.fakes.origins import Recorder, recording, refusing
from tests.fakes.slack import BOT_TOKEN, FakeSlack, Workspace
from tests.fakes.slack_files import add_file

REFUSED = "x.log: 読めませんでした（Slack のファイルホスト以外の URL からは読みません）"


@pytest.fixture
def elsewhere() -> Iterator[Recorder]:
    with recording(refusing) as recorder:
        yield recorder


def file_at(ws: Workspace, url: str) -> dict[str, str]:
    """A file shared in the question's channel whose download URL (as files.info gives it) is ``url``."""
    seeded = add_file(ws, "x.log", b"E-DOOR-1 happened\n", channel="C0ECSUP", user="U0TANAKA")
    ws.files[seeded["id"]].url = url
    return seeded


@pytest.mark.parametrize("where", ["another port", "https instead", "userinfo", "userinfo elsewhere", "look-alike"])
def test_a_file_url_outside_the_slack_origin_gets_no_token_and_the_run_goes_on(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], elsewhere: Recorder, where: str) -> None:
    api = fake.url.rstrip("/").removesuffix("/api")  # http://127.0.0.1:PORT
    port = api.rsplit(":", 1)[1]
    path = f"/files-pri/{ws.team_id}-F0DOOR/download/x.log"  # the path of a file the fake does not serve
    url = {"another port": f"{elsewhere.url}{path}",  # the Slack API's host, the port of another server
           "https instead": f"https://127.0.0.1:{port}{path}",
           "userinfo": f"http://helpbot@127.0.0.1:{port}{path}",
           "userinfo elsewhere": f"http://127.0.0.1:{port}@127.0.0.1:{elsewhere.url.rsplit(':', 1)[1]}{path}",
           "look-alike": f"http://127.0.0.1.nip.io:{port}{path}"}[where]
    code, model, _ = ask(ws, env, [file_at(ws, url)], lambda request: "添付は読めませんでした。")
    assert code == 0
    assert REFUSED in question_text(model.requests[0])
    assert elsewhere.seen == [] and fake.calls("files.download") == []
    assert BOT_TOKEN not in str(elsewhere.credentials(BOT_TOKEN))


def test_a_file_on_the_slack_origin_itself_is_read(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """The counterpart: a file the fake serves on its own origin is read, with the bot token."""
    log = add_file(ws, "x.log", b"E-DOOR-1 happened\n", channel="C0ECSUP", user="U0TANAKA")
    code, model, _ = ask(ws, env, [log], lambda request: "ok")
    assert code == 0 and "E-DOOR-1" in question_text(model.requests[0])
    assert [c.kind for c in fake.calls("files.download")] == ["bot"]
