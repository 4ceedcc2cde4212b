"""The fake Slack's chat.*Stream through the real WebClient: what Slack documents, and what it refuses."""

from __future__ import annotations

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack, Workspace


@pytest.fixture
def web(ws: Workspace, fake: FakeSlack) -> WebClient:
    ws.refuse_streaming = None
    return WebClient(token=BOT_TOKEN, base_url=fake.url)


def started(web: WebClient, ws: Workspace) -> tuple[str, str]:
    q = ws.history("C0ECSUP")[0]
    response = web.chat_startStream(channel="C0ECSUP", thread_ts=q.ts, recipient_user_id="U0TANAKA",
                                    recipient_team_id=ws.team_id)
    return q.ts, str(response["ts"])


def error_of(call: object) -> str:
    with pytest.raises(SlackApiError) as caught:
        call()  # type: ignore[operator]
    return str(caught.value.response["error"])


def test_a_stream_reads_back_as_it_grows_and_ends_with_its_metadata(web: WebClient, ws: Workspace) -> None:
    root, ts = started(web, ws)
    web.chat_appendStream(channel="C0ECSUP", ts=ts, chunks=[
        {"type": "task_update", "id": "t1", "title": "FAQを検索: 在庫", "status": "in_progress"},
        {"type": "markdown_text", "text": "在庫同期は"}])
    [reply] = [m for m in web.conversations_replies(channel="C0ECSUP", ts=root, include_all_metadata=True)[
        "messages"] if m["ts"] == ts]
    assert reply["text"] == "在庫同期は" and "metadata" not in reply and reply["thread_ts"] == root
    web.chat_stopStream(channel="C0ECSUP", ts=ts, markdown_text="毎時です。",
                        blocks=[{"type": "context", "elements": [{"type": "mrkdwn", "text": "footer"}]}],
                        metadata={"event_type": "helpbot_answer", "event_payload": {"question_ts": root}})
    message = ws.message("C0ECSUP", ts)
    assert message is not None and not message.streaming and message.text == "在庫同期は毎時です。"
    assert message.blocks == [{"type": "markdown", "text": "在庫同期は毎時です。"},
                              {"type": "context", "elements": [{"type": "mrkdwn", "text": "footer"}]}]
    assert message.metadata == {"event_type": "helpbot_answer", "event_payload": {"question_ts": root}}
    assert message.tasks == {"t1": {"id": "t1", "title": "FAQを検索: 在庫", "status": "in_progress"}}
    assert error_of(lambda: web.chat_appendStream(channel="C0ECSUP", ts=ts, markdown_text="x")) == \
        "message_not_in_streaming_state"


def test_what_slack_refuses(web: WebClient, ws: Workspace, fake: FakeSlack) -> None:
    q = ws.history("C0ECSUP")[0]
    assert error_of(lambda: web.chat_startStream(channel="C0ECSUP", thread_ts=q.ts)) == "missing_recipient_user_id"
    assert error_of(lambda: web.chat_startStream(channel="C0ECSUP", thread_ts=q.ts, recipient_user_id="U0TANAKA")
                    ) == "missing_recipient_team_id"
    user_web = WebClient(token=USER_TOKEN, base_url=fake.url)
    assert error_of(lambda: user_web.chat_startStream(channel="C0ECSUP", thread_ts=q.ts, recipient_user_id="U0TANAKA",
                                                      recipient_team_id=ws.team_id)) == "not_allowed_token_type"
    _, ts = started(web, ws)
    assert error_of(lambda: web.chat_appendStream(channel="C0ECSUP", ts=ts, markdown_text="x" * 12_001)) == \
        "msg_too_long"
    assert error_of(lambda: web.chat_appendStream(channel="C0ECSUP", ts=ts, chunks=[
        {"type": "task_update", "id": "t", "title": "x", "status": "done"}])) == "invalid_chunks"
    assert error_of(lambda: web.chat_appendStream(channel="C0ECSUP", ts=ts, chunks=[
        {"type": "task_update", "id": "t", "title": "x", "status": "complete",
         "sources": [{"type": "url", "url": "https://x"}]}])) == "invalid_chunks"  # a source needs its text
    assert error_of(lambda: web.chat_update(channel="C0ECSUP", ts=ts, text="x")) == "cant_update_message"
    ws.refuse_streaming = "unknown_method"
    assert error_of(lambda: web.chat_appendStream(channel="C0ECSUP", ts=ts, markdown_text="x")) == "unknown_method"
