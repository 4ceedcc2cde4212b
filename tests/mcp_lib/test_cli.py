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
        (["faq:search", "x", "bogus=1"], "faq:search has no parameter 'bogus'"),
        (["faq:search", "x", "limit=²"], "limit: input should be a valid integer"),
        (["faq:search", "x", "limit=--1"], "limit: input should be a valid integer"),
        (["faq:search", "x", "limit=" + "9" * 5000], "limit: unable to parse input string as an integer"),
        (["faq:search", "x", "limit=" + "9" * 30], "limit: input should be less than or equal to 20"),
        (["faq:search", '{"query": "x", "limit": ' + "9" * 5000 + "}"], "not valid JSON"),
        (["faq:search", "x", "tags=[" + "9" * 5000 + "]"], "not valid JSON"),
        (["faq:search", "x", "tags=[1,"], "not valid JSON"),
        (["faq:search", "x", "tags=" + "[" * 100_000 + "]" * 100_000], "not valid JSON"),  # deeper than json goes
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


def test_an_empty_list_argument_is_an_empty_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "faq:search", "在庫", "tags=")
    assert code == 0, err
    assert json.loads(out)["status"] == "ok"


@pytest.mark.parametrize("query", ["在庫=0になる", "stock=0", "a=b=c"])
def test_a_value_with_an_equals_sign_is_a_value(capsys: pytest.CaptureFixture[str], query: str) -> None:
    """Only ``name=value`` with one of the tool's parameter names sets a parameter."""
    code, out, err = run(capsys, "faq:search", query, "limit=1")
    assert code == 0, err
    assert json.loads(out)["status"] == "ok"


def test_parse_keeps_unknown_key_value_tokens_as_values() -> None:
    from mcp_lib import Registry
    from mcp_lib.cli import parse_tool_args

    tool = Registry(env={}).find("faq:search")
    assert parse_tool_args(tool, ["在庫=0になる", "limit=3"]) == {"query": "在庫=0になる", "limit": 3}
    assert parse_tool_args(tool, ["limit=3", "query=a=b"]) == {"limit": 3, "query": "a=b"}
    assert parse_tool_args(tool, ["x", "tags= Shopify , 在庫 ,"]) == {"query": "x", "tags": ["Shopify", "在庫"]}


@pytest.mark.parametrize(("only", "expected"), [("nosuch", "unknown name in --only: nosuch"),
                                                ("faq,nosuch_tool", "unknown name in --only: nosuch_tool"),
                                                ("redmine", "not configured here: redmine"),
                                                (" , ", "names nothing")])
def test_only_with_unknown_names_exits_2_listing_the_known(capsys: pytest.CaptureFixture[str], only: str,
                                                          expected: str) -> None:
    code, out, err = run(capsys, "schemas", "--only", only)
    assert code == 2 and out == "" and expected in err and "faq_search" in err


def test_only_names_are_stripped(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schemas", "--only", " faq_search , faq:getEntry ")
    assert code == 0 and [t["name"] for t in json.loads(out)] == ["faq_search", "faq_getEntry"]


def test_docs_has_no_only_option_and_reports_an_unwritable_directory(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["docs", "--check", "--only", "faq"])
    assert stopped.value.code == 2 and "unrecognized arguments: --only" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    code, _, err = run(capsys, "docs", "--write", "--dir", str(blocker / "docs"))
    assert code == 2 and "cannot write" in err and "Traceback" not in err and err.count("\n") == 1


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
    assert run(capsys, "docs", "--write", "--dir", str(tmp_path))[0] == 0  # rewrites faq.md, removes old.md
    assert not (tmp_path / "old.md").exists() and run(capsys, "docs", "--check", "--dir", str(tmp_path))[0] == 0


@pytest.mark.scenario
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_console_script_is_installed() -> None:
    done = subprocess.run(["uv", "run", "--quiet", "mcp-lib", "faq:search", "注文 取り込み", "limit=1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["items"]
