"""``helpbot doctor``: configured / half-configured / off per part, then live checks against the fakes; lines name
variables and never values; exit 0 only when every configured part works."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import httpx2
import pytest

from agent.cli import main
from agent.doctor import Part, diagnose, healthy
from mcp_lib import Registry
from mcp_lib.platforms import github
from tests.fakes import bedrock
from tests.fakes.bedrock import BedrockStub
from tests.fakes.github import FakeGitHub, serve
from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack, Token, Workspace

GITHUB_TOKEN = "ghp-doctor-test-token-value"


def part(parts: list[Part], name: str) -> Part:
    return next(p for p in parts if p.name == name)


@pytest.fixture
def slack_env(fake: FakeSlack) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_USER_TOKEN": USER_TOKEN, "SLACK_API_URL": fake.url,
            "HELPBOT_CHANNELS": "C0GENERAL,C0ECSUP"}


@pytest.fixture
def hub() -> Iterator[tuple[FakeGitHub, Registry]]:
    fake = FakeGitHub(token=GITHUB_TOKEN)
    fake.add_repo("acme/shop-sync")
    env = {"GITHUB_TOKEN": GITHUB_TOKEN, "HELPBOT_GITHUB_REPOS": "acme/shop-sync,acme/gone"}
    config = github.load_config(env)
    assert config is not None
    client = github.make_client(config, transport=httpx2.MockTransport(fake.handler))
    yield fake, Registry(env, clients={"github": client})


def test_nothing_configured_is_healthy_and_says_how_to_turn_each_part_on() -> None:
    parts = diagnose({})
    assert healthy(parts)
    assert part(parts, "model").state == "not configured"
    assert "AWS_BEARER_TOKEN_BEDROCK" in part(parts, "model").lines[0]
    assert part(parts, "faq").state == "ok" and "entries" in part(parts, "faq").lines[0]
    assert part(parts, "redmine").lines == ["set REDMINE_URL and REDMINE_API_KEY to turn it on"]


def test_a_half_configured_platform_is_named_with_its_variables_and_exits_2(capsys: pytest.CaptureFixture[str],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDMINE_URL", "https://redmine.example.test")
    monkeypatch.setenv("GROWI_ACCESS_TOKEN", "growi-secret-value-1234")
    assert main(["doctor"]) == 2
    out = capsys.readouterr().out
    assert "! redmine: half-configured" in out and "REDMINE_URL set but REDMINE_API_KEY not" in out
    assert "GROWI_ACCESS_TOKEN set but GROWI_URL not" in out
    assert "growi-secret-value-1234" not in out and "doctor: 2 parts to fix" in out


def test_slack_with_every_scope_and_every_channel_is_ok(slack_env: dict[str, str]) -> None:
    slack = part(diagnose(slack_env), "slack")
    assert slack.state == "ok", slack
    assert any("SLACK_BOT_TOKEN accepted" in line for line in slack.lines)
    assert any("SLACK_USER_TOKEN accepted" in line for line in slack.lines)
    assert slack.lines[-1] == "the bot is a member of all 2 channels of HELPBOT_CHANNELS"
    assert slack.warnings == []


def test_a_token_missing_a_scope_is_named_with_the_scope(ws: Workspace, slack_env: dict[str, str]) -> None:
    ws.tokens["xoxb-narrow"] = Token("bot", ws.bot_user_id, frozenset({"chat:write", "channels:history"}))
    slack = part(diagnose({**slack_env, "SLACK_BOT_TOKEN": "xoxb-narrow"}), "slack")
    assert slack.state == "failed"
    assert "the token in SLACK_BOT_TOKEN lacks" in slack.lines[0] and "reactions:write" in slack.lines[0]
    assert "xoxb-narrow" not in json.dumps(dataclasses.asdict(slack))


def test_a_channel_the_bot_is_not_in_fails(ws: Workspace, slack_env: dict[str, str]) -> None:
    ws.add_channel("C0NOBOT", "no-bot", bot_member=False)
    slack = part(diagnose({**slack_env, "HELPBOT_CHANNELS": "C0GENERAL C0NOBOT"}), "slack")
    assert slack.state == "failed"
    assert slack.lines[-1] == "the bot is not a member of C0NOBOT (HELPBOT_CHANNELS): /invite it there"


def test_without_the_user_token_search_is_not_offered_and_doctor_warns(slack_env: dict[str, str]) -> None:
    env = {k: v for k, v in slack_env.items() if k != "SLACK_USER_TOKEN"}
    slack = part(diagnose(env), "slack")
    assert slack.state == "ok"
    assert slack.warnings == ["slack_searchMessages is not offered: SLACK_USER_TOKEN not set"]
    registry = Registry(env)
    assert "slack_searchMessages" not in [t.wire_name for t in registry.tools()]
    assert "slack_getThreadMessages" in [t.wire_name for t in registry.tools()]
    refused = registry.call("slack_searchMessages", {"query": "在庫"})
    assert refused.is_error and "SLACK_USER_TOKEN not set" in (refused.message or "")
    assert registry.warnings() == ["slack_searchMessages is not offered: SLACK_USER_TOKEN not set"]


def test_a_rejected_slack_token_fails_with_the_variable(slack_env: dict[str, str]) -> None:
    slack = part(diagnose({**slack_env, "SLACK_BOT_TOKEN": "xoxb-not-a-token-the-fake-knows"}), "slack")
    assert slack.state == "failed"
    assert "Slack rejected the token in SLACK_BOT_TOKEN (invalid_auth)" in slack.lines[0]


def test_github_names_the_repositories_the_token_cannot_read(hub: tuple[FakeGitHub, Registry]) -> None:
    fake, registry = hub
    found = part(diagnose({}, registry=registry), "github")
    assert found.state == "failed"
    assert found.lines == ["GITHUB_TOKEN cannot read acme/gone of HELPBOT_GITHUB_REPOS (give the token contents "
                           "and issues read on them, or fix the names)"]
    fake.add_repo("acme/gone")
    assert part(diagnose({}, registry=registry), "github").lines == [
        "GITHUB_TOKEN reads all 2 repositories of HELPBOT_GITHUB_REPOS"]


def test_both_models_answer_a_one_token_request(stub: BedrockStub) -> None:
    model = part(diagnose({"AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key", "ANTHROPIC_BEDROCK_BASE_URL": stub.url}),
                 "model")
    assert model.state == "ok", model
    assert model.lines == ["bedrock, region ap-northeast-1", "HELPBOT_MODEL answers", "HELPBOT_SUMMARY_MODEL answers"]
    assert [r.body["max_tokens"] for r in stub.requests] == [1, 1]
    assert {r.model_id for r in stub.requests} == {"jp.anthropic.claude-sonnet-4-5-20250929-v1:0",
                                                   "jp.anthropic.claude-haiku-4-5-20251001-v1:0"}


@pytest.mark.parametrize(("reply", "says"), [
    (bedrock.error(403, "AccessDeniedException", "You don't have access to the model with the specified model ID."),
     "model access"),
    (bedrock.error(400, "ValidationException", "Invocation of model ID anthropic.claude-sonnet-4-5-20250929-v1:0 "
                   "with on-demand throughput isn't supported. Retry your request with the ID or ARN of an "
                   "inference profile that contains this model."), "inference profile"),
    (bedrock.error(404, "ResourceNotFoundException", "Model not found"), "the region"),
])
def test_a_refused_model_says_what_to_check(stub: BedrockStub, reply: bedrock.Reply, says: str) -> None:
    stub.script(reply)
    model = part(diagnose({"AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key", "ANTHROPIC_BEDROCK_BASE_URL": stub.url}),
                 "model")
    assert model.state == "failed"
    assert model.lines[1].startswith("HELPBOT_MODEL: bedrock rejected the request") and says in model.lines[1]
    assert len(stub.requests) == 2  # one attempt each: doctor does not retry a refusal


def test_json_output_and_exit_code(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELPBOT_GITHUB_REPOS", "acme/shop-sync")
    assert main(["doctor", "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    states = {p["name"]: p["state"] for p in report["parts"]}
    assert states["github"] == "half-configured" and states["faq"] == "ok"


@pytest.mark.parametrize("can_push", [True, False])
def test_faq_draft_pull_requests_are_checked_when_their_token_is_set(can_push: bool) -> None:
    fake = FakeGitHub(token="ghp-faq-pr-token-value")
    fake.add_repo("acme/helpdesk").can_push = can_push
    with serve(fake.handler) as url:
        parts = diagnose({"HELPBOT_FAQ_PR_TOKEN": "ghp-faq-pr-token-value", "GITHUB_REPOSITORY": "acme/helpdesk",
                          "GITHUB_API_URL": url})
    found = part(parts, "faq-draft pull requests")
    assert found.state == ("ok" if can_push else "failed")
    assert ("HELPBOT_FAQ_PR_TOKEN may push to acme/helpdesk" in found.lines[0]) is can_push
    assert ("no permission to push to acme/helpdesk" in found.lines[0]) is not can_push
    assert not any(p.name == "faq-draft pull requests" for p in diagnose({}))
