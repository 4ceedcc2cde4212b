"""The answers' 👍/👎 buttons end to end: helpbot answers with them (placeholder and streamed path), a person
clicks on the fake Slack, the signed interaction reaches the relay, which dispatches a ``slack-vote``; ``helpbot
vote`` (vote.yml) keeps the vote in the answer's metadata; ``helpbot feedback`` and faq-draft count it like a
reaction, one vote per person. Hostile clicks and forged dispatches change nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agent.cli import build_parser
from agent.cli import main as helpbot_main
from agent.slack import feedback, markers
from agent.slack.admission import TriggerSettings
from agent.slack.blocks import BUTTONS_LINE, FEEDBACK_ACTION, FEEDBACK_LINE, answer_payloads
from agent.slack.relay import Relay, RelayConfig, github_dispatcher
from agent.slack.vote import click_vote, load_vote
from tests.fakes.answers import make_answer
from tests.fakes.clock import FakeClock
from tests.fakes.front import BOT, answer_scripted, bot_messages, question_of
from tests.fakes.model import Request, calls
from tests.fakes.slack import FakeSlack, Message, Workspace, interaction_request

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_735_790_000  # the sample workspace's messages are 2025-01-02
CHANNEL, TANAKA, SUZUKI = "C0ECSUP", "U0TANAKA", "U0SUZUKI"
WIKI = "https://wiki.example.com/page?id=3#step-2"  # a source whose link keeps its query (an allowed host)


def citing_the_wiki(request: Request) -> Any:
    if request.round == 1:
        return calls(("faq_search", {"query": "在庫同期 遅延"}))
    return f"連携ログを確認してください。[手順書]({WIKI})"


@pytest.fixture
def buttons(env: dict[str, str]) -> dict[str, str]:
    return {**env, "HELPBOT_FEEDBACK_BUTTONS": "true", "HELPBOT_CHANNELS": CHANNEL, "HELPBOT_BOT_USER_ID": BOT,
            "GROWI_URL": "https://wiki.example.com"}


def answered(ws: Workspace, env: dict[str, str]) -> Message:
    q = question_of(ws)
    assert answer_scripted(env, citing_the_wiki, channel=CHANNEL, ts=q.ts)[0] == 0
    [answer] = bot_messages(ws, CHANNEL, q.ts)
    return answer


class GitHub:
    """The dispatches API as an httpx2.MockTransport: what the relay sent."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.transport = httpx2.MockTransport(
            lambda r: self.bodies.append(json.loads(r.content)) or httpx2.Response(204))


def relay(github: GitHub, **env: str) -> Relay:
    config = RelayConfig.from_env({"SLACK_SIGNING_SECRET": SECRET, "GITHUB_REPOSITORY": "acme/helpbot",
                                   "HELPBOT_DISPATCH_TOKEN": "tok", "HELPBOT_CHANNELS": CHANNEL,
                                   "HELPBOT_BOT_USER_ID": BOT, **env})
    return Relay(config, github_dispatcher(config, transport=github.transport), clock=FakeClock(wall=NOW))


def deliver(to: Relay, payload: dict[str, Any]) -> tuple[int, bytes]:
    headers, body = interaction_request(payload, SECRET, NOW)
    status, _, out = to(headers, body)
    return status, out


def run_vote(tmp_path: Path, env: dict[str, str], client_payload: dict[str, Any],
             monkeypatch: pytest.MonkeyPatch) -> int:
    """vote.yml's step: ``helpbot vote --event $GITHUB_EVENT_PATH`` with the workflow's environment."""
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"action": "slack-vote", "client_payload": client_payload}), encoding="utf-8")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return helpbot_main(["vote", "--event", str(path)])


def counted(env: dict[str, str]) -> dict[str, Any]:
    out = io.StringIO()
    args = build_parser("feedback").parse_args(["feedback", "--since", "2025-01-01", "--channel", CHANNEL, "--json"])
    assert feedback.run(args, env, clock=FakeClock(wall=NOW + 3600), out=out) == 0
    [answer] = json.loads(out.getvalue())["answers"]
    return dict(answer)


def votes(message: Message) -> dict[str, str]:
    marker = markers.read({"metadata": message.metadata})
    assert marker is not None and marker.kind == "answer"
    return marker.votes


# -- the buttons under each answer -------------------------------------------------------------------------------
def test_the_buttons_are_under_the_answer_only_when_they_are_turned_on() -> None:
    answer = make_answer("手順です。\n\n" + "在庫同期ジョブのログを見てください。" * 40, sources=[
        {"title": "FAQ", "url": "https://faq.example/1"}])
    *first, last = answer_payloads(answer, limit=400, buttons=True)
    assert first and not any(b["type"] == "context_actions" for p in first for b in p["blocks"])
    footer, block = last["blocks"][-2:]
    assert footer["type"] == "context" and footer["elements"][1]["text"] == BUTTONS_LINE
    [element] = block["elements"]
    assert block["type"] == "context_actions" and element["type"] == "feedback_buttons"
    assert element["action_id"] == FEEDBACK_ACTION
    assert (element["positive_button"]["value"], element["negative_button"]["value"]) == markers.VOTES
    unbuttoned = answer_payloads(answer, limit=400)
    assert unbuttoned[-1]["blocks"][-1]["elements"][1]["text"] == FEEDBACK_LINE
    assert not any(b["type"] == "context_actions" for p in unbuttoned for b in p["blocks"])


@pytest.mark.parametrize("streams", [False, True])
def test_both_paths_post_the_buttons_slack_accepts(ws: Workspace, fake: FakeSlack, buttons: dict[str, str],
                                                   streams: bool) -> None:
    if streams:
        ws.refuse_streaming = None
    answer = answered(ws, buttons)
    assert bool(fake.calls("chat.stopStream")) is streams
    assert answer.blocks is not None and answer.blocks[-1]["type"] == "context_actions"  # the fake checks the block
    assert ws.click(CHANNEL, answer.ts, TANAKA, "+1")["actions"][0]["action_id"] == FEEDBACK_ACTION


# -- a click, end to end ---------------------------------------------------------------------------------------------
def test_a_click_becomes_one_vote_that_feedback_counts_and_a_second_click_replaces_it(
        ws: Workspace, fake: FakeSlack, buttons: dict[str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    answer = answered(ws, buttons)
    before = (answer.text, json.dumps(answer.blocks, ensure_ascii=False), dict(answer.metadata or {}))
    github = GitHub()
    assert deliver(relay(github), ws.click(CHANNEL, answer.ts, TANAKA, "+1")) == (200, b"")
    [dispatched] = github.bodies
    assert dispatched == {"event_type": "slack-vote", "client_payload": {
        "channel": CHANNEL, "ts": answer.ts, "user": TANAKA, "team": ws.team_id, "vote": "+1"}}

    assert run_vote(tmp_path, buttons, dispatched["client_payload"], monkeypatch) == 0
    assert votes(answer) == {TANAKA: "+1"}
    assert (answer.text, json.dumps(answer.blocks, ensure_ascii=False)) == before[:2]  # the answer reads the same
    assert WIKI in json.dumps(answer.blocks, ensure_ascii=False)  # its link's query kept by the guard
    assert {k: v for k, v in (answer.metadata or {})["event_payload"].items() if k != "votes"} == \
        before[2]["event_payload"]  # the marker's other fields as they were
    [update] = [c for c in fake.calls("chat.update") if c.params["ts"] == answer.ts][-1:]
    assert update.kind == "bot"
    row = counted(buttons)
    assert (row["positive"], row["negative"], row["reactors"]) == (1, 0, 1)

    deliver(relay(github), ws.click(CHANNEL, answer.ts, TANAKA, "-1"))  # changed their mind
    assert run_vote(tmp_path, buttons, github.bodies[-1]["client_payload"], monkeypatch) == 0
    assert votes(answer) == {TANAKA: "-1"}
    row = counted(buttons)
    assert (row["positive"], row["negative"], row["reactors"]) == (0, 1, 1)
    capsys.readouterr()
    assert run_vote(tmp_path, buttons, github.bodies[-1]["client_payload"], monkeypatch) == 0  # delivered twice
    assert "the same vote is already kept" in capsys.readouterr().err


@pytest.mark.parametrize("streams", [False, True])
def test_a_vote_leaves_the_answers_blocks_as_posted_where_slack_reads_markdown_back_as_rich_text(
        ws: Workspace, fake: FakeSlack, buttons: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        streams: bool) -> None:
    """Re-sent as read, the answer's markdown would become Slack's (lossy) rich_text rendering of it for good."""
    if streams:
        ws.refuse_streaming = None
    answer = answered(ws, buttons)
    before = json.dumps(answer.blocks, ensure_ascii=False)
    assert answer.blocks is not None and answer.blocks[0]["type"] == "markdown"
    ws.markdown_as_rich_text = True
    github = GitHub()
    deliver(relay(github), ws.click(CHANNEL, answer.ts, TANAKA, "+1"))
    assert run_vote(tmp_path, buttons, github.bodies[0]["client_payload"], monkeypatch) == 0
    assert votes(answer) == {TANAKA: "+1"} and json.dumps(answer.blocks, ensure_ascii=False) == before


def test_a_person_who_reacts_and_clicks_counts_once_and_the_click_wins(
        ws: Workspace, fake: FakeSlack, buttons: dict[str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    answer = answered(ws, buttons)
    answer.reactions.update({"+1": [TANAKA, SUZUKI], "-1": [TANAKA], "eyes": [TANAKA]})
    github = GitHub()
    deliver(relay(github), ws.click(CHANNEL, answer.ts, TANAKA, "-1"))
    assert run_vote(tmp_path, buttons, github.bodies[0]["client_payload"], monkeypatch) == 0
    row = counted(buttons)
    assert (row["positive"], row["negative"]) == (1, 1)  # suzuki's 👍 reaction, tanaka's 👎 click (not +1 and -1)
    assert row["reactions"] == {"+1": 1, "-1": 1, "eyes": 1} and row["reactors"] == 2


@pytest.mark.parametrize("audience", ["a public repository", "a private channel"])
def test_the_vote_jobs_log_names_no_voter_and_no_vote_where_feedback_would_leave_the_answer_out(
        ws: Workspace, fake: FakeSlack, buttons: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], audience: str) -> None:
    """helpbot feedback keeps such answers' ratings out of the Actions log; one person's vote is no less private."""
    answer = answered(ws, buttons)
    github = GitHub()
    deliver(relay(github), ws.click(CHANNEL, answer.ts, TANAKA, "-1"))
    env = {**buttons, "HELPBOT_REPOSITORY_VISIBILITY": "public" if audience == "a public repository" else "private"}
    if audience == "a private channel":
        ws.channels[CHANNEL].is_private = True
    capsys.readouterr()
    for _ in range(2):  # kept, then ignored as kept already
        assert run_vote(tmp_path, env, github.bodies[0]["client_payload"], monkeypatch) == 0
    assert votes(answer) == {TANAKA: "-1"}
    log = capsys.readouterr().err
    assert "kept a vote on the answer" in log and "already kept" in log
    assert TANAKA not in log and "👎" not in log


def test_faq_draft_counts_votes_like_reactions(ws: Workspace, fake: FakeSlack, buttons: dict[str, str],
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from agent.faq_draft import run as faq_draft

    answer = answered(ws, buttons)
    github = GitHub()
    for person in (TANAKA, SUZUKI):
        deliver(relay(github), ws.click(CHANNEL, answer.ts, person, "+1"))
        assert run_vote(tmp_path, buttons, github.bodies[-1]["client_payload"], monkeypatch) == 0
    args = build_parser("faq-draft").parse_args(["faq-draft", "--since", "2025-01-01", "--channel", CHANNEL])
    capsys.readouterr()
    assert faq_draft(args, {**buttons, "HELPBOT_FAQ_CACHE_DIR": str(tmp_path / "cache")},
                     clock=FakeClock(wall=NOW + 60), out=io.StringIO()) == 0
    assert "from 1 answers (1 with ≥ 2 👍 and no 👎 majority)" in capsys.readouterr().err  # the FAQ has it already


# -- hostile clicks ----------------------------------------------------------------------------------------------
def forged(payload: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A click payload changed where it says who, where and what (then signed: a payload Slack would not send)."""
    out = json.loads(json.dumps(payload))
    for path, value in changes.items():
        node = out
        *parents, key = path.split("__")
        for parent in parents:
            node = node[int(parent)] if isinstance(node, list) else node[parent]
        node[key] = value
    return out


@pytest.mark.parametrize(("changes", "why"), [
    ({"team__id": "T0OTHER"}, "not of the payload's team"),
    ({"user__team_id": "T0OTHER"}, "not of the payload's team"),
    ({"user__team_id": None}, "not of the payload's team"),  # no team and no enterprise is no match
    ({"user__team_id": ["T0HELPBOT"]}, "not of the payload's team"),
    ({"actions__0__action_id": "approve"}, "not a click of helpbot's feedback buttons"),
    ({"actions__0__value": "+100"}, "not a click of helpbot's feedback buttons"),
    ({"type": "view_submission"}, "not a block_actions interaction"),
    ({"container__is_ephemeral": True}, "not a click on a message"),
    ({"container__message_ts": "1735779660.000001"}, "not a click on a message"),  # disagrees with the message
    ({"user__id": BOT}, "no person clicked"),
    ({"user__id": "USLACKBOT"}, "no person clicked"),
    ({"message__user": "U0TANAKA", "message__bot_id": None}, "is not helpbot's"),
])
def test_the_relay_ignores_what_is_not_a_persons_click_on_helpbots_buttons(
        ws: Workspace, fake: FakeSlack, buttons: dict[str, str], changes: dict[str, Any], why: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    answer = answered(ws, buttons)
    github = GitHub()
    capsys.readouterr()
    assert deliver(relay(github), forged(ws.click(CHANNEL, answer.ts, TANAKA, "+1"), **changes)) == (200, b"")
    assert github.bodies == []
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "ignored an interaction" in line and why in line


def test_the_relay_ignores_clicks_outside_its_channels_unsigned_ones_and_replays(
        ws: Workspace, fake: FakeSlack, buttons: dict[str, str]) -> None:
    answer = answered(ws, buttons)
    click = ws.click(CHANNEL, answer.ts, TANAKA, "+1")
    github = GitHub()
    assert deliver(relay(github, HELPBOT_CHANNELS="C0GENERAL"), click) == (200, b"") and github.bodies == []
    headers, body = interaction_request(click, "another-secret", NOW)
    assert relay(github)(headers, body)[0] == 401 and github.bodies == []
    once = relay(github)
    assert deliver(once, click) == deliver(once, click) == (200, b"")
    assert len(github.bodies) == 1  # the same click delivered twice is dispatched once
    assert click_vote(b"payload=%7B%7D&x=1", TriggerSettings()) == "not an interaction payload"


def test_on_lambda_a_click_is_dispatched_before_the_ack(ws: Workspace, fake: FakeSlack,
                                                        buttons: dict[str, str]) -> None:
    """A function URL hands the form-encoded body over base64-encoded, its headers lower-cased."""
    import base64

    from agent.slack.relay import lambda_handler

    answer = answered(ws, buttons)
    headers, body = interaction_request(ws.click(CHANNEL, answer.ts, SUZUKI, "+1"), SECRET, NOW)
    github = GitHub()
    answered_by = lambda_handler({"headers": {k.lower(): v for k, v in headers.items()}, "isBase64Encoded": True,
                                  "body": base64.b64encode(body).decode(),
                                  "requestContext": {"http": {"method": "POST"}}}, relay=relay(github))
    assert (answered_by["statusCode"], answered_by["body"]) == (200, "")
    assert [b["client_payload"]["user"] for b in github.bodies] == [SUZUKI]


@pytest.mark.parametrize("case", ["other team", "guest", "another organization's person", "bot", "the question",
                                  "a notice", "forged metadata", "not in the channels", "gone"])
def test_a_forged_dispatch_changes_nothing(ws: Workspace, fake: FakeSlack, buttons: dict[str, str], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                           case: str) -> None:
    """Whoever may dispatch to the repository can send any slack-vote: the job believes only Slack."""
    answer = answered(ws, buttons)
    q = question_of(ws)
    ws.add_user("U0GUEST", "guest", is_restricted=True)
    ws.add_user("U0STRANGER", "stranger", team_id="T0OTHER")
    notice = ws.post(CHANNEL, "回答を作成できませんでした", user=BOT, thread_ts=q.ts, bot_id=ws.bot_id,
                     metadata=markers.metadata("failure", channel=CHANNEL, question_ts=q.ts))
    fake_answer = ws.post(CHANNEL, "偽の回答", user=SUZUKI, thread_ts=q.ts, metadata=answer.metadata)
    vote = {"channel": CHANNEL, "ts": answer.ts, "user": SUZUKI, "team": ws.team_id, "vote": "+1"}
    vote.update({"other team": {"team": "T0OTHER"}, "guest": {"user": "U0GUEST"},
                 "another organization's person": {"user": "U0STRANGER"}, "bot": {"user": BOT},
                 "the question": {"ts": q.ts}, "a notice": {"ts": notice.ts},
                 "forged metadata": {"ts": fake_answer.ts},
                 "not in the channels": {"channel": "C0GENERAL"}, "gone": {"ts": "1735779999.000001"}}[case])
    before = len(fake.requests)
    capsys.readouterr()
    code = run_vote(tmp_path, buttons, vote, monkeypatch)
    assert code == (1 if case == "gone" else 0)  # a message Slack does not know: its error, one line
    assert not [r for r in fake.requests[before:] if r.method == "chat.update"]
    assert votes(answer) == {} and fake_answer.metadata == answer.metadata
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_vote_names_the_part_that_carries_the_buttons(ws: Workspace, fake: FakeSlack, buttons: dict[str, str],
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vote.yml queues the votes of one answer by the clicked ts: a forged vote naming another part of a split
    answer would run beside them and lose one in the read-modify-write, so only the last part's ts is taken."""
    q = question_of(ws)
    long = "連携ログを確認してください。\n\n" + "在庫同期ジョブのログを確認し、失敗した行を再実行してください。" * 400

    def answering_at_length(request: Request) -> Any:
        return calls(("faq_search", {"query": "在庫同期"})) if request.round == 1 else long

    assert answer_scripted(buttons, answering_at_length, channel=CHANNEL, ts=q.ts)[0] == 0
    first, *_, last = bot_messages(ws, CHANNEL, q.ts)
    vote = {"channel": CHANNEL, "ts": first.ts, "user": SUZUKI, "team": ws.team_id, "vote": "+1"}
    assert run_vote(tmp_path, buttons, vote, monkeypatch) == 0
    assert votes(first) == {}
    assert run_vote(tmp_path, buttons, {**vote, "ts": last.ts}, monkeypatch) == 0
    assert votes(first) == {SUZUKI: "+1"}


@pytest.mark.parametrize("payload", [
    {"channel": CHANNEL, "ts": "1.2", "user": TANAKA, "team": "T0HELPBOT", "vote": "+1"},
    {"channel": CHANNEL, "ts": "1735779660.000001", "user": TANAKA, "team": "T0HELPBOT", "vote": "up"},
    {"channel": CHANNEL, "ts": "1735779660.000001", "user": TANAKA, "team": "T0HELPBOT"},
    {"channel": CHANNEL, "ts": "1735779660.000001", "user": TANAKA, "team": "T0HELPBOT", "vote": "+1", "x": "1"},
])
def test_a_malformed_vote_is_exit_2_before_slack_is_asked(fake: FakeSlack, buttons: dict[str, str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          payload: dict[str, Any]) -> None:
    assert run_vote(tmp_path, buttons, payload, monkeypatch) == 2
    assert not fake.requests
    path = tmp_path / "help.json"
    path.write_text(json.dumps({"action": "slack-help", "client_payload": payload}), encoding="utf-8")
    with pytest.raises(Exception, match="is not a slack-vote repository_dispatch"):
        load_vote(path)


def test_a_malformed_votes_line_never_echoes_an_unknown_key(tmp_path: Path) -> None:
    """The key names are the dispatcher's: echoed, a newline would start an Actions workflow command (::error)."""
    from agent.errors import BadInput

    payload = {"channel": CHANNEL, "ts": "1735779660.000001", "user": TANAKA, "team": "T0HELPBOT", "vote": "+1",
               "x\n::error title=forged::line": "1"}
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"action": "slack-vote", "client_payload": payload}), encoding="utf-8")
    with pytest.raises(BadInput) as raised:
        load_vote(path)
    assert "\n" not in str(raised.value) and "::" not in str(raised.value) and "1 unknown key" in str(raised.value)


# -- the fake Slack, as strict as Slack --------------------------------------------------------------------------
def test_the_fakes_click_is_slacks_block_actions_payload(ws: Workspace, fake: FakeSlack,
                                                         buttons: dict[str, str]) -> None:
    answer = answered(ws, buttons)
    click = ws.click(CHANNEL, answer.ts, SUZUKI, "-1")
    assert {"type", "user", "api_app_id", "container", "trigger_id", "team", "channel", "message", "response_url",
            "actions"} <= set(click)
    assert click["container"] == {"type": "message", "message_ts": answer.ts, "channel_id": CHANNEL,
                                  "is_ephemeral": False, "thread_ts": answer.thread_ts}
    [action] = click["actions"]
    assert action["type"] == "feedback_buttons" and action["value"] == "-1" and action["text"]["text"] == "👎"
    assert "metadata" not in click["message"]  # nothing says the payload carries it: nobody may rely on it
    with pytest.raises(ValueError):
        ws.click(CHANNEL, question_of(ws).ts, SUZUKI, "+1")  # a message without buttons cannot be clicked


def test_the_fake_refuses_what_slack_refuses(ws: Workspace, fake: FakeSlack, buttons: dict[str, str]) -> None:
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    from tests.fakes.slack import BOT_TOKEN

    answer = answered(ws, buttons)
    web = WebClient(token=BOT_TOKEN, base_url=fake.url)
    with pytest.raises(SlackApiError, match="no_text"):
        web.api_call("chat.update", json={"channel": CHANNEL, "ts": answer.ts, "metadata": answer.metadata})
    broken = json.loads(json.dumps(answer.blocks))
    broken[-1]["elements"][0]["positive_button"]["text"]["text"] = "👍" * 76
    with pytest.raises(SlackApiError, match="invalid_blocks"):
        web.api_call("chat.update", json={"channel": CHANNEL, "ts": answer.ts, "text": "x", "blocks": broken})


def test_an_event_file_that_is_no_file_is_exit_2(tmp_path: Path, fake: FakeSlack, buttons: dict[str, str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in buttons.items():
        monkeypatch.setenv(name, value)
    assert helpbot_main(["vote", "--event", str(tmp_path)]) == 2  # a folder: refused before a byte is read
    assert not fake.requests
