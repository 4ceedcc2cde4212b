"""Configuration values: a URL carries no credentials, and an error names the variable, never the value."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_lib.cli import main
from mcp_lib.config import ConfigError, env_url
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
