"""``mcp-lib``: through ``main()`` for speed, and once through the installed console script."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from mcp_lib.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_runs_a_tool_with_positional_and_key_value_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "faq:search", "在庫 同期 遅い", "limit=2")
    assert code == 0
    result = json.loads(out)
    assert result["status"] == "ok" and 1 <= len(result["items"]) <= 2
    assert all(item["url"] and item["title"] for item in result["items"])


def test_json_argument_form_of_the_old_library(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "faq:search", '{"query": "在庫", "limit": 1}')
    assert code == 0 and len(json.loads(out)["items"]) == 1


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["nope:search", "x"], "unknown platform 'nope'"),
        (["faq:nope"], "unknown tool 'faq:nope'"),
        (["faq:search"], "query: field required"),
        (["faq:search", "x", "limit=many"], "limit: input should be a valid integer"),
        (["faq:search", "x", "limit=0"], "limit: input should be greater than or equal to 1"),
        (["faq:search", "x", "bogus=1"], "unknown parameter 'bogus'"),
        (["faq:search", "x", "5", "Shopify", "extra"], "too many arguments"),
        (["faq:search", "{bad json"], "not valid JSON"),
        (["github:searchCode", "inventory"], "platform 'github' is not configured"),
        (["frobnicate"], "unknown command"),
        ([], "usage"),
    ],
)
def test_bad_input_exits_2_with_usage(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert expected in (err + out)
    assert "Traceback" not in err


def test_tool_failure_exits_1_with_an_error_result(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "faq:getEntry", "no-such-entry")
    assert code == 1 and json.loads(out)["status"] == "error"


def test_malformed_faq_file_is_a_clear_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken.md").write_text("no front matter here\n", encoding="utf-8")
    monkeypatch.setenv("HELPBOT_FAQ_PATH", str(tmp_path))
    code, _, err = run(capsys, "faq:search", "x")
    assert code == 2 and "broken.md" in err and "front matter" in err


def test_bad_configuration_names_the_variable(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELPBOT_FAQ_PATH", "/no/such/dir")
    code, _, err = run(capsys, "faq:search", "x")
    assert code == 2 and "HELPBOT_FAQ_PATH" in err


def test_rejected_credentials_exit_2_naming_the_variable(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.github import FakeGitHub, serve

    fake = FakeGitHub(token="the-right-token")
    fake.add_repo("acme/shop")
    with serve(fake.handler) as url:
        monkeypatch.setenv("GITHUB_API_URL", url)
        monkeypatch.setenv("GITHUB_TOKEN", "a-wrong-token")
        monkeypatch.setenv("HELPBOT_GITHUB_REPOS", "acme/shop")
        code, out, err = run(capsys, "github:searchCode", "inventory")
    assert code == 2 and out == ""
    assert "GITHUB_TOKEN" in err and "Traceback" not in err


def test_all_commands_and_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "all-commands")
    assert code == 0
    for heading in ("# FAQ Platform", "## 概要", "## 使用場面", "## セキュリティルール", "faq:search"):
        assert heading in out
    code, out, _ = run(capsys, "schemas", "--only", "faq_search")
    assert code == 0
    assert [t["name"] for t in json.loads(out)] == ["faq_search"]


def test_docs_check_passes_on_the_committed_docs(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "docs", "--check")
    assert code == 0, err


def test_docs_check_fails_when_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "docs", "--write", "--dir", str(tmp_path))[0] == 0
    assert run(capsys, "docs", "--check", "--dir", str(tmp_path))[0] == 0
    (tmp_path / "faq.md").write_text("edited by hand\n", encoding="utf-8")
    (tmp_path / "old.md").write_text("left over\n", encoding="utf-8")
    code, _, err = run(capsys, "docs", "--check", "--dir", str(tmp_path))
    assert code == 1 and "faq.md" in err and "old.md" in err


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_console_script_is_installed() -> None:
    done = subprocess.run(["uv", "run", "--quiet", "mcp-lib", "faq:search", "注文 取り込み", "limit=1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["items"]
