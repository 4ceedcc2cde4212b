"""The credentials' doors (mcp_lib.doors): where each credential may go, and the library's clients keeping to it --
refusing another origin before anything is sent, and carrying nothing on a redirect (two real servers on
loopback, ports chosen by the OS)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from slack_sdk.errors import SlackApiError

from agent.config import VARIABLES
from mcp_lib.config import ConfigError
from mcp_lib.core import ToolError
from mcp_lib.doors import NEVER_SENT, WHERE, door, origin, slack_door
from mcp_lib.errors import Refused
from mcp_lib.external import server_entries
from mcp_lib.platforms import github, growi
from mcp_lib.platforms.redmine import RedmineConfig
from mcp_lib.platforms.redmine.session import make_client as redmine_client
from mcp_lib.platforms.slack.client import SlackConfig, web_client
from tests.fakes.origins import Recorder, recording, redirect_to, refusing

BOT = "xoxb-1-door-secret"
KEY = "redmine-door-secret-0123456789"


# -- where each credential may go ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "allowed"), [
    ("https://files.slack.com/files-pri/T0-F0/download/a.log", True),
    ("https://files.slack.com:443/files-pri/T0-F0/a.log", True),  # the scheme's default port is the same origin
    ("https://FILES.Slack.com./files-pri/T0-F0/a.log", True),  # case and the trailing dot: the same host
    ("https://slack.com/api/files.info", True),
    ("https://files.slack.com:8443/files-pri/T0-F0/a.log", False),  # another port
    ("http://files.slack.com/files-pri/T0-F0/a.log", False),  # a downgrade
    ("https://slack.com.evil.test/files-pri/T0-F0/a.log", False),  # a look-alike
    ("https://files.slack.com@evil.test/files-pri/a.log", False),  # userinfo: the host is evil.test
    ("https://evil@files.slack.com/files-pri/a.log", False),  # userinfo on the right host: refused all the same
    ("https://files.slack.com\\@evil.test/a.log", False),  # parsers disagree on the backslash
    ("https://files.slack.com%2eevil.test/a.log", False),
    ("https://f\u0456les.slack.com/a.log", False),  # a Cyrillic i: IDNA makes it another name
    ("https://evil.test/?u=https://files.slack.com/", False),
    ("https://slack-files.com/T0-F0-abc/a.log", False),  # public permalinks need no token
    ("files.slack.com/a.log", False),
    ("ftp://files.slack.com/a.log", False),
])
def test_the_slack_tokens_go_to_slacks_api_and_file_hosts_on_443_only(url: str, allowed: bool) -> None:
    assert slack_door("https://slack.com/api/", BOT).allows(url) is allowed


def test_a_slack_api_url_pointed_elsewhere_is_the_only_origin() -> None:
    fake = slack_door("http://127.0.0.1:5555/api/", BOT)
    assert fake.allows("http://127.0.0.1:5555/files-pri/T0-F0/a.log")
    for url in ("http://127.0.0.1:5556/files-pri/T0-F0/a.log", "https://127.0.0.1:5555/files-pri/a.log",
                "https://files.slack.com/files-pri/T0-F0/a.log", "http://localhost:5555/files-pri/a.log"):
        assert not fake.allows(url), url


def test_origins_compare_scheme_host_and_port_with_the_default_port_filled_in() -> None:
    assert origin("https://h") == origin("https://H:443/x") != origin("https://h:8443")
    assert origin("http://h") == origin("http://h:80") != origin("https://h:80")
    assert origin("https://b\u00fccher.example/") == origin("https://xn--bcher-kva.example")
    assert [origin(u) for u in ("https://u:p@h/", "https://h:99999/", "https://:443/", "mailto:a@h")] == [None] * 4
    assert str(origin("https://api.github.com:443/repos")) == "https://api.github.com"


def test_every_declared_secret_has_a_door_or_is_never_sent() -> None:
    declared = {variable.name for variable in VARIABLES}
    assert {v.name for v in VARIABLES if v.secret} == set(WHERE) | set(NEVER_SENT)
    assert set(WHERE.values()) <= declared


def test_a_refusal_names_the_credential_and_the_origins_never_the_value() -> None:
    github_door = door("GITHUB_TOKEN", "https://api.github.com", "ghp_door_secret")
    with pytest.raises(Refused) as refused:
        github_door.guard("https://api.github.com:8443/user", [("Authorization", "Bearer ghp_door_secret")])
    assert str(refused.value) == ("refused: GITHUB_TOKEN is sent only to https://api.github.com, not to "
                                  "https://api.github.com:8443")
    github_door.guard("https://elsewhere.test/", [("Accept", "application/json")])  # no credential: no door


def test_a_credential_in_the_query_string_is_a_credential_too() -> None:
    growi_door = door("GROWI_ACCESS_TOKEN", "https://wiki.example.test", "growi-secret/+=")
    with pytest.raises(Refused):
        growi_door.guard("https://wiki.example.test.evil.test/_api/search?access_token=growi-secret%2F%2B%3D", [])
    growi_door.guard("https://wiki.example.test/_api/search?access_token=growi-secret%2F%2B%3D", [])


# -- the clients refuse another origin, before anything is sent --------------------------------------------------
@pytest.fixture
def elsewhere() -> Iterator[Recorder]:
    """Another origin on loopback (its own port): it answers whatever is asked with an error."""
    with recording(refusing) as recorder:
        yield recorder


@pytest.fixture
def redirecting(elsewhere: Recorder) -> Iterator[Recorder]:
    """The configured origin: it redirects every request to the same path on ``elsewhere``."""
    with recording(redirect_to(elsewhere)) as recorder:
        yield recorder


def github_client(url: str) -> httpx2.Client:
    config = github.load_config({"GITHUB_TOKEN": "ghp_door_secret", "HELPBOT_GITHUB_REPOS": "acme/shop",
                                 "GITHUB_API_URL": url})
    assert config is not None
    return github.make_client(config)


def growi_client(url: str) -> httpx2.Client:
    config = growi.load_config({"GROWI_URL": url, "GROWI_ACCESS_TOKEN": "growi-door-secret"})
    assert config is not None
    return growi.make_client(config)


@pytest.mark.parametrize("make", [github_client, growi_client])
def test_the_github_and_growi_clients_refuse_to_send_their_token_to_another_origin(
        make: Callable[[str], httpx2.Client], elsewhere: Recorder) -> None:
    configured = elsewhere.url.replace("127.0.0.1", "localhost")  # the same port, another host
    port = elsewhere.url.rsplit(":", 1)[1]
    with make(configured) as client:
        for url in (elsewhere.url, f"https://localhost:{port}/", f"http://localhost.:{int(port) + 1}/"):
            with pytest.raises(Refused):
                client.get(url)
    assert elsewhere.seen == []


@pytest.mark.parametrize("make", [github_client, growi_client])
def test_the_github_and_growi_clients_follow_no_redirect(make: Callable[[str], httpx2.Client],
                                                        redirecting: Recorder, elsewhere: Recorder) -> None:
    with make(redirecting.url) as client:
        assert client.get("/repos/acme/shop").status_code == 302
    assert len(redirecting.seen) == 1 and elsewhere.seen == []


def test_redmine_refuses_to_send_its_key_to_another_origin(elsewhere: Recorder) -> None:
    client = redmine_client(RedmineConfig(url=elsewhere.url.replace("127.0.0.1", "localhost"), api_key=KEY))
    with pytest.raises(Refused):
        client.api.engine.request("get", f"{elsewhere.url}/issues.json")
    assert elsewhere.seen == []


def test_a_redmine_redirect_to_another_origin_goes_without_the_key_and_its_answer_is_not_used(
        redirecting: Recorder, elsewhere: Recorder) -> None:
    client = redmine_client(RedmineConfig(url=redirecting.url, api_key=KEY))
    with pytest.raises(ToolError, match=r"redirected the request to another origin \(http://127\.0\.0\.1:\d+\)"):
        client.api.user.get("current")
    assert redirecting.seen[0].headers["X-Redmine-API-Key"] == KEY  # the configured origin got it
    assert len(elsewhere.seen) == 1 and elsewhere.credentials(KEY) == []


def slack_client(url: str) -> Any:
    return web_client(SlackConfig(api_url=f"{url}/api/", bot_token=BOT), BOT, retry_handlers=[])


def test_a_slack_api_redirect_reaches_the_other_origin_without_the_token(redirecting: Recorder,
                                                                         elsewhere: Recorder) -> None:
    """urllib follows a 302 to a POST with a GET, and copies the request's headers, Authorization included."""
    with pytest.raises(SlackApiError):
        slack_client(redirecting.url).auth_test()
    assert redirecting.seen[0].headers["Authorization"] == f"Bearer {BOT}"
    assert len(elsewhere.seen) == 1 and elsewhere.credentials(BOT) == []


def test_the_slack_client_refuses_another_origin(elsewhere: Recorder) -> None:
    client = slack_client(elsewhere.url.replace("127.0.0.1", "localhost"))
    client.base_url = f"{elsewhere.url}/api/"  # as if a caller pointed it elsewhere after construction
    with pytest.raises(Refused):
        client.auth_test()
    assert elsewhere.seen == []


# -- in-house MCP servers ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("setting", ['env = ["SALES_DB_PATH", "SLACK_BOT_TOKEN"]',
                                     'url = "https://mcp.example.test/mcp"\nheader_env = "GITHUB_TOKEN"'])
def test_helpbots_own_credentials_never_reach_an_in_house_server(tmp_path: Path, setting: str) -> None:
    """A child's environment holds only the variables its entry names, and never one of helpbot's own
    credentials: those go to their services' origins only. An HTTP server's header token is its own."""
    transport = "" if "url =" in setting else 'command = "python"\n'
    (tmp_path / "helpbot.toml").write_text(f'[[mcp_servers]]\nname = "sales"\n{transport}{setting}\n'
                                           'tools = ["get_sales"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"may not be passed to an MCP server: it goes only to its own service"):
        server_entries({"HELPBOT_CONFIG": str(tmp_path / "helpbot.toml")})


def test_the_hook_refuses_a_redirect_hop_that_would_carry_a_credential() -> None:
    """The backstop for a client that follows redirects: httpx strips Authorization on a hop to another origin
    (the hop goes, without it), but keeps ``x-api-key`` (the hop is refused); the door's hook sees every hop."""
    anthropic_door = door("ANTHROPIC_API_KEY", "https://api.anthropic.com", "sk-ant-door")
    arrived: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        arrived.append(request)
        if request.url.host == "api.anthropic.com":
            return httpx2.Response(307, headers={"Location": "https://api.anthropic.com.evil.test/v1/x"})
        return httpx2.Response(200)

    with httpx2.Client(transport=httpx2.MockTransport(answer), follow_redirects=True,
                      event_hooks={"request": [anthropic_door.hook()]}) as client:
        with pytest.raises(Refused):
            client.get("https://api.anthropic.com/v1/x", headers={"x-api-key": "sk-ant-door"})
        assert [r.url.host for r in arrived] == ["api.anthropic.com"]
        client.get("https://api.anthropic.com/v1/x", headers={"Authorization": "Bearer sk-ant-door"})
    hop = arrived[-1]
    assert hop.url.host == "api.anthropic.com.evil.test" and "authorization" not in hop.headers
