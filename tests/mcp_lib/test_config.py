"""Configuration values: a URL carries no credentials, and an error names the variable, never the value."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_lib.cli import main
from mcp_lib.config import ConfigError, env_url
from mcp_lib.external import server_entries
from mcp_lib.platforms import github, growi, redmine, slack

PASSWORD = "s3cretPassw0rd"

PLATFORM_URLS = [
    (redmine.load_config, "REDMINE_URL", {"REDMINE_API_KEY": "k"}),
    (growi.load_config, "GROWI_URL", {"GROWI_ACCESS_TOKEN": "t"}),
    (github.load_config, "GITHUB_API_URL", {"GITHUB_TOKEN": "t", "HELPBOT_GITHUB_REPOS": "acme/shop"}),
    (slack.load_config, "SLACK_API_URL", {"SLACK_BOT_TOKEN": "xoxb-1-2-abc"}),
]


@pytest.mark.parametrize("url", [f"http://admin:{PASSWORD}@redmine.test", f"https://admin:{PASSWORD}@r.test/sub",
                                 f"https://{PASSWORD}@r.test", "https://user@r.test:8080/",
                                 f"https://admin:{PASSWORD}@"])
@pytest.mark.parametrize(("load", "variable", "rest"), PLATFORM_URLS)
def test_a_url_with_credentials_is_a_config_error_naming_the_variable(
        load: Callable[[dict[str, str]], object], variable: str, rest: dict[str, str], url: str) -> None:
    with pytest.raises(ConfigError) as err:
        load({variable: url, **rest})
    assert err.value.variable == variable
    assert PASSWORD not in str(err.value) and "admin" not in str(err.value)


@pytest.mark.parametrize("url", ["redmine.test", f"admin:{PASSWORD}@redmine.test", "ftp://r.test",
                                 f"http://r.test:{PASSWORD}/", "not a url at all"])
def test_a_value_that_is_no_url_is_not_echoed(url: str) -> None:
    with pytest.raises(ConfigError) as err:
        env_url({"REDMINE_URL": url}, "REDMINE_URL")
    assert err.value.variable == "REDMINE_URL" and PASSWORD not in str(err.value) and url not in str(err.value)


def test_plain_urls_pass_unchanged() -> None:
    assert env_url({"X": "https://r.test/redmine/"}, "X") == "https://r.test/redmine"
    assert env_url({"X": "http://127.0.0.1:8080"}, "X") == "http://127.0.0.1:8080"
    assert env_url({"X": ""}, "X", "https://default.test") == "https://default.test"  # empty means unset


def test_the_cli_exits_2_with_one_line_and_nothing_else(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDMINE_URL", f"http://admin:{PASSWORD}@127.0.0.1:9")
    monkeypatch.setenv("REDMINE_API_KEY", "k")
    code = main(["redmine:search", "在庫"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "REDMINE_URL" in err and PASSWORD not in err


@pytest.mark.parametrize("url", [f"https://svc:{PASSWORD}@mcp.internal/mcp", f"http://{PASSWORD}@mcp.internal",
                                 "mcp.internal/mcp"])
def test_an_mcp_server_url_gets_the_same_check(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """helpbot.toml's in-house servers: one line, exit 2, naming the setting and never the value."""
    config = tmp_path / "helpbot.toml"
    config.write_text(f'[[mcp_servers]]\nname = "sales"\nurl = "{url}"\ntools = ["get_sales"]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        server_entries({"HELPBOT_CONFIG": str(config)})
    assert err.value.variable == "helpbot.toml mcp_servers[0].url"
    assert PASSWORD not in str(err.value) and "svc" not in str(err.value) and url not in str(err.value)
    if "@" in url:  # through the CLI: one line, exit 2
        monkeypatch.setenv("HELPBOT_CONFIG", str(config))
        code = main(["sales:get_sales"])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert "mcp_servers[0].url" in err and PASSWORD not in err


def test_an_mcp_server_url_without_credentials_passes(tmp_path: Path) -> None:
    config = tmp_path / "helpbot.toml"
    config.write_text('[[mcp_servers]]\nname = "sales"\nurl = "https://mcp.internal/mcp/"\ntools = ["x"]\n',
                      encoding="utf-8")
    assert server_entries({"HELPBOT_CONFIG": str(config)})[0].url == "https://mcp.internal/mcp/"
