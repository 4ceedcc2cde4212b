"""The credentials' doors in agent/: the model clients, the FAQ pull request and the relay's dispatch keep their
credentials to their configured origins, redirects included -- and every client in agent/ and mcp_lib/ that can
carry a credential is listed here with the test that proves it goes through its door (a new one fails until it
is)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from agent import faq_pr
from agent.core.claude import build_model
from agent.core.model import Request
from agent.core.model_config import ModelConfig
from agent.errors import DispatchError, ModelRequestError
from agent.slack.relay import RelayConfig, github_dispatcher
from mcp_lib.errors import Refused
from tests.fakes.clock import FakeClock
from tests.fakes.origins import Recorder, recording, redirect_to, refusing

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "sk-ant-api03-door-secret"
SESSION_TOKEN = "IQoJb3JpZ2luX2VjEDoorSecretSessionToken"
ACCESS_KEY = "AKIADOORSECRET000000"
GITHUB_TOKEN = "ghp_doorSecret0123456789"


@pytest.fixture
def elsewhere() -> Iterator[Recorder]:
    with recording(refusing) as recorder:
        yield recorder


# -- the model -------------------------------------------------------------------------------------------------------
MODEL_ENVS = {
    "anthropic": {"ANTHROPIC_API_KEY": API_KEY},  # x-api-key: httpx keeps it on a redirect
    "bedrock": {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": "door/secret/key",
                "AWS_SESSION_TOKEN": SESSION_TOKEN},  # X-Amz-Security-Token: kept too
}


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_a_model_endpoint_redirect_is_not_followed(provider: str, elsewhere: Recorder) -> None:
    with recording(redirect_to(elsewhere, 307)) as endpoint:
        variable = "ANTHROPIC_BASE_URL" if provider == "anthropic" else "ANTHROPIC_BEDROCK_BASE_URL"
        config = ModelConfig.from_env({**MODEL_ENVS[provider], variable: endpoint.url,
                                       "HELPBOT_MODEL_MAX_ATTEMPTS": "1"})
        assert config is not None and config.provider == provider
        model = build_model(config, clock=FakeClock())
        hello = [{"role": "user", "content": [{"type": "text", "text": "こんにちは"}]}]
        with pytest.raises(ModelRequestError, match="307"):
            model.create(Request([{"type": "text", "text": "test"}], hello, [], None, 64, config.model, None))
    assert len(endpoint.seen) == 1 and elsewhere.seen == []


def test_the_client_uses_the_configured_endpoint_not_its_own_reading_of_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The door is derived from the configuration helpbot read; the client sends to that URL."""
    monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", "http://127.0.0.1:9/elsewhere")
    config = ModelConfig.from_env({"AWS_BEARER_TOKEN_BEDROCK": "door-bearer", "AWS_REGION": "ap-northeast-1"})
    assert config is not None
    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(400, json={"message": "stop here"})

    client = httpx2.Client(transport=httpx2.MockTransport(answer))
    model = build_model(config, clock=FakeClock(), http_client=client)
    with pytest.raises(ModelRequestError):
        model.create(Request([{"type": "text", "text": "t"}], [{"role": "user", "content": "hi"}], [], None, 8,
                             config.model, None))
    assert [request.url.host for request in seen] == ["bedrock-runtime.ap-northeast-1.amazonaws.com"]


# -- the FAQ pull request and the relay's dispatch -----------------------------------------------------------------
def pr_client(url: str) -> httpx2.Client:
    return faq_pr.make_client(faq_pr.load_config({"GITHUB_REPOSITORY": "acme/faq", "GITHUB_TOKEN": GITHUB_TOKEN,
                                                  "GITHUB_API_URL": url}))


def test_the_faq_pull_request_client_refuses_another_origin_and_follows_no_redirect(elsewhere: Recorder) -> None:
    with recording(redirect_to(elsewhere, 307)) as github, pr_client(github.url) as client:
        with pytest.raises(Refused):
            client.post(f"{elsewhere.url}/repos/acme/faq/git/refs", json={})
        assert client.post("/repos/acme/faq/git/refs", json={}).status_code == 307
    assert len(github.seen) == 1 and elsewhere.seen == []


def test_the_relays_dispatch_follows_no_redirect(elsewhere: Recorder) -> None:
    with recording(redirect_to(elsewhere, 307)) as github:
        config = RelayConfig.from_env({"SLACK_SIGNING_SECRET": "s", "GITHUB_REPOSITORY": "acme/helpdesk",
                                       "HELPBOT_DISPATCH_TOKEN": GITHUB_TOKEN, "GITHUB_API_URL": github.url})
        with pytest.raises(DispatchError, match="307"):
            github_dispatcher(config, deadline=5.0)({"channel": "C0ECSUP", "ts": "1.2"})
    assert len(github.seen) == 1 and elsewhere.seen == []


# -- every client that can carry a credential goes through its door ------------------------------------------------
# Calls that build an HTTP-capable client, and string constants that are credential headers (or a Bearer prefix).
CONSTRUCTORS = {"Client", "AsyncClient", "DefaultHttpxClient", "DefaultAsyncHttpxClient", "WebClient",
                "AsyncWebClient", "Redmine", "Anthropic", "AsyncAnthropic", "AnthropicBedrock", "AsyncAnthropicBedrock",
                "urlopen", "build_opener", "Session", "HTTPConnection", "HTTPSConnection", "streamable_http_client",
                "sse_client", "stdio_client", "StdioServerParameters", "request", "get", "post"}
HEADERS = {"authorization", "x-api-key", "x-amz-security-token", "x-redmine-api-key"}
# (file, what) -> the test that proves it goes through its door (or why it carries no credential).
SITES = {
    ("mcp_lib/http.py", "Client"): "test_the_github_and_growi_clients_refuse_to_send_their_token_to_another_origin",
    ("mcp_lib/http.py", "AsyncClient"): "test_the_relays_dispatch_follows_no_redirect",
    ("mcp_lib/platforms/github/api.py", "Authorization"):
        "test_the_github_and_growi_clients_refuse_to_send_their_token_to_another_origin",
    ("mcp_lib/platforms/growi.py", "Authorization"):
        "test_the_github_and_growi_clients_refuse_to_send_their_token_to_another_origin",
    ("mcp_lib/platforms/redmine/session.py", "Redmine"):
        "test_a_redmine_redirect_to_another_origin_goes_without_the_key_and_its_answer_is_not_used",
    ("mcp_lib/platforms/redmine/__init__.py", "Session"): "(helpbot's own per-call Session class, no HTTP)",
    ("mcp_lib/platforms/slack/client.py", "Authorization"):
        "test_a_slack_api_redirect_reaches_the_other_origin_without_the_token",
    ("mcp_lib/platforms/slack/client.py", "build_opener"):
        "test_a_slack_api_redirect_reaches_the_other_origin_without_the_token",
    ("mcp_lib/external.py", "Authorization"): "test_helpbots_own_credentials_never_reach_an_in_house_server",
    ("mcp_lib/external.py", "AsyncClient"): "test_helpbots_own_credentials_never_reach_an_in_house_server",
    ("mcp_lib/external.py", "streamable_http_client"): "test_helpbots_own_credentials_never_reach_an_in_house_server",
    ("mcp_lib/external.py", "stdio_client"): "test_helpbots_own_credentials_never_reach_an_in_house_server",
    ("mcp_lib/external.py", "StdioServerParameters"): "test_helpbots_own_credentials_never_reach_an_in_house_server",
    ("mcp_lib/external.py", "Client"): "(mcp's session over the transports above)",
    ("agent/core/claude.py", "Client"): "test_a_model_endpoint_redirect_is_not_followed",
    ("agent/core/claude.py", "Authorization"): "test_a_model_endpoint_redirect_is_not_followed",
    ("agent/core/claude.py", "x-api-key"): "test_a_model_endpoint_redirect_is_not_followed",
    ("agent/core/claude.py", "authorization"): "test_a_model_endpoint_redirect_is_not_followed",
    ("agent/core/claude.py", "Session"): "(botocore resolving AWS credentials: its STS call carries none of ours)",
    ("agent/slack/relay.py", "Authorization"): "test_the_relays_dispatch_follows_no_redirect",
    ("agent/slack/attachments.py", "Authorization"):
        "test_a_file_url_outside_the_slack_origin_gets_no_token_and_the_run_goes_on",
}
DOORS = "mcp_lib/doors.py"  # where the credential headers are named, to be recognised


def credential_sites(path: Path) -> set[str]:
    """What in one module builds a client or attaches a credential."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if name in CONSTRUCTORS and (name not in ("request", "get", "post") or owner in ("requests", "httpx2")):
                found.add(name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                node.value.lower() in HEADERS or node.value.startswith("Bearer ")):
            found.add("Authorization" if node.value.startswith("Bearer ") else node.value)
    return found


def all_sites() -> set[tuple[str, str]]:
    return {(str(path.relative_to(ROOT)), what)
            for package in ("agent", "mcp_lib") for path in sorted((ROOT / package).rglob("*.py"))
            if str(path.relative_to(ROOT)) != DOORS for what in credential_sites(path)}


def test_every_client_that_can_carry_a_credential_goes_through_its_door() -> None:
    stray = all_sites() - set(SITES)
    assert stray == set(), "build it with mcp_lib.http.door_client / door_async_client (or its door), then list it"


def test_the_list_is_still_needed_and_each_named_test_exists() -> None:
    assert set(SITES) <= all_sites(), set(SITES) - all_sites()
    tests = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "tests").rglob("test_*.py"))
    missing = {test for test in SITES.values() if not test.startswith("(") and f"def {test}(" not in tests}
    assert missing == set()


def test_the_scan_sees_each_kind(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import httpx2, requests\nhttpx2.Client()\nrequests.get('u')\nh = {'X-Api-Key': k}\n"
                      "a = f'Bearer {t}'\nWebClient(token=t)\nclient.get('/x')\n", encoding="utf-8")
    assert credential_sites(sample) == {"Client", "get", "X-Api-Key", "Authorization", "WebClient"}
