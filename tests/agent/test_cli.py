"""``helpbot ask``: exit codes, one-line errors, the --json shape, degraded mode with zero configuration."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.cli import SUBCOMMANDS, Subcommand, main
from tests.fakes import bedrock as stub_lib
from tests.fakes.bedrock import BedrockStub, answering_with_the_first_faq_hit
from tests.fakes.front import one_line_error

REPO = Path(__file__).resolve().parents[2]
QUESTION = "Shopifyの在庫同期が遅れているときの確認手順は？"


@pytest.mark.parametrize(("argv", "words"), [
    (["ask", ""], "the question is empty"),
    (["ask", "   "], "the question is empty"),
    (["ask", "q", "--max-rounds", "abc"], "'abc' is not a whole number"),
    (["ask", "q", "--max-rounds", "0"], "between 1 and 50"),
    (["ask", "q", "--max-rounds", "51"], "between 1 and 50"),
    (["ask"], "the following arguments are required: question"),
    (["nonsense"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert words in one_line_error(capsys)


@pytest.mark.parametrize(("env", "variable"), [
    ({"AWS_BEARER_TOKEN_BEDROCK": "k", "HELPBOT_MODEL": "gpt-4o"}, "HELPBOT_MODEL"),
    ({"AWS_BEARER_TOKEN_BEDROCK": "k", "AWS_REGION": "tokyo"}, "AWS_REGION"),
    ({"AWS_BEARER_TOKEN_BEDROCK": "k", "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s"},
     "AWS_BEARER_TOKEN_BEDROCK"),
    ({"HELPBOT_MAX_ROUNDS": "many"}, "HELPBOT_MAX_ROUNDS"),
    ({"HELPBOT_FAQ_PATH": "/nonexistent/faq"}, "HELPBOT_FAQ_PATH"),
])
def test_bad_configuration_is_one_line_naming_the_variable_and_exit_2(
        env: dict[str, str], variable: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["ask", "在庫"]) == 2
    error = one_line_error(capsys)
    assert error.startswith("helpbot: configuration error: ") and variable in error


def test_zero_configuration_degrades_to_faq_sources(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", QUESTION]) == 0
    captured = capsys.readouterr()
    assert "これは AI が生成した回答ではありません" in captured.out
    assert "\nSources:\n  1. " in captured.out
    assert "faq" in captured.out.split("Sources:")[1]
    assert "degraded: not AI-generated · rounds 0 · tools 1 (faq_search)" in captured.out
    assert "\n— why not AI-generated: no model credentials are configured\n" in captured.out
    assert "no AI model" in captured.err


def test_zero_configuration_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", QUESTION, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["degraded"] is True and data["rounds"] == 0
    assert data["sources"] and set(data["sources"][0]) == {"title", "url"}
    assert data["tool_calls"] == [{"name": "faq_search", "input": {"query": QUESTION}, "is_error": False}]
    assert data["usage"] == {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0,
                             "cache_creation_input_tokens": 0}


def test_the_full_loop_against_a_bedrock_endpoint(stub: BedrockStub, capsys: pytest.CaptureFixture[str]) -> None:
    stub.responder = answering_with_the_first_faq_hit
    assert main(["ask", QUESTION, "--json", "--max-rounds", "3"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert set(data) >= {"answer", "sources", "rounds", "tool_calls", "usage", "degraded"}
    assert data["degraded"] is False and data["rounds"] == 1
    assert data["tool_calls"] == [{"name": "faq_search", "input": {"query": "Shopify 在庫同期 遅延"},
                                   "is_error": False}]
    assert data["sources"][0]["url"] in data["answer"]
    assert data["usage"] == {"input_tokens": 1200 + 300, "output_tokens": 80 + 120, "cache_read_input_tokens": 2900,
                             "cache_creation_input_tokens": 1500}
    assert data["cost_usd"] > 0
    assert "round 1/3: faq_search" in captured.err
    assert "at most 3 rounds" in stub.requests[0].body["system"][0]["text"]


def test_human_output_has_answer_sources_and_footer(stub: BedrockStub, capsys: pytest.CaptureFixture[str]) -> None:
    stub.responder = answering_with_the_first_faq_hit
    assert main(["ask", QUESTION]) == 0
    out = capsys.readouterr().out
    answer, rest = out.split("\nSources:\n")
    assert answer.startswith("連携ログを確認してください。")
    footer = rest.strip().splitlines()[-1]
    assert footer.startswith("— rounds 1 · tools 1 (faq_search) · tokens in 1,500 (cache read 2,900, write 1,500)")
    assert "est. $" in footer and footer.endswith(" s")


def test_a_rejected_request_is_one_line_and_exit_1(stub: BedrockStub, capsys: pytest.CaptureFixture[str]) -> None:
    stub.script(stub_lib.error(403, "AccessDeniedException", "You don't have access to the model"))
    assert main(["ask", QUESTION]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("helpbot: bedrock rejected the request") and "403 AccessDeniedException" in err[-1]


@pytest.mark.usefixtures("aws_files")
def test_an_unknown_aws_profile_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nope")
    monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", "http://127.0.0.1:9")  # never reached
    assert main(["ask", QUESTION]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("helpbot: configuration error: AWS_PROFILE: ") and "(nope) could not be found" in error


def test_an_unwritable_save_path_fails_before_the_run(stub: BedrockStub, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    stub.responder = answering_with_the_first_faq_hit
    assert main(["ask", QUESTION, "--save", str(tmp_path / "no-such-folder" / "t.json")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("helpbot ask: --save: cannot write") and "does not exist" in error
    assert stub.requests == []  # nothing was paid for


def test_the_answer_is_printed_even_when_saving_fails_after_the_run(stub: BedrockStub, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "t.json"

    def responder(model_id: str, body: dict[str, Any]) -> stub_lib.Reply:
        saved.mkdir(exist_ok=True)  # the path becomes a folder while the run goes on
        return answering_with_the_first_faq_hit(model_id, body)

    stub.responder = responder
    assert main(["ask", QUESTION, "--save", str(saved)]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("連携ログを確認してください。")  # the paid answer is not lost
    assert "helpbot ask: --save: cannot write" in captured.err.strip().splitlines()[-1]


def probe_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--code", type=int, required=True)


def probe_run(args: argparse.Namespace) -> int:
    return int(args.code)


def test_a_subcommand_can_live_in_another_module(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(SUBCOMMANDS, "probe", Subcommand("probe", "A probe.", f"{__name__}:probe_arguments",
                                                         f"{__name__}:probe_run"))
    assert main(["probe", "--code", "7"]) == 7
    assert main(["probe"]) == 2 and "--code" in one_line_error(capsys)
    monkeypatch.setitem(SUBCOMMANDS, "broken", Subcommand("broken", "Never built.", "no.such.module:x", "no:x"))
    assert main(["ask", ""]) == 2  # the other subcommands' modules are not even imported


@pytest.mark.scenario
def test_the_console_script_with_a_bare_environment() -> None:
    """What a fresh clone does: no variables at all, the real process, the bundled FAQ."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    helpbot = Path(sys.executable).with_name("helpbot")
    command = [str(helpbot)] if helpbot.exists() else [sys.executable, "-m", "agent.cli"]
    done = subprocess.run([*command, "ask", QUESTION], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Sources:" in done.stdout and "Traceback" not in done.stderr
    help_run = subprocess.run([*command, "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert help_run.returncode == 0 and "ask" in help_run.stdout


def test_one_error_tree_with_its_exit_codes() -> None:
    import mcp_lib.cli
    from agent import errors
    from mcp_lib.config import ConfigError

    assert errors.BadInput is mcp_lib.cli.BadInput  # one class, whichever entry point raises it
    assert issubclass(ConfigError, errors.ExitError) and issubclass(errors.UsageError, errors.BadInput)
    codes = {errors.UsageError("x"): 2, errors.TranscriptError("x"): 2, ConfigError("V", "x"): 2,
             errors.RunFailed("x"): 1, errors.DispatchError("x"): 1, errors.Terminated(): 130,
             KeyboardInterrupt(): 130, ValueError("x"): 1}
    assert {type(e).__name__: errors.exit_code(e) for e in codes} == {type(e).__name__: c for e, c in codes.items()}


def test_nothing_but_the_entry_point_imports_the_cli() -> None:
    import ast

    root = Path(__file__).resolve().parents[2]
    importers = []
    for path in [*(root / "agent").rglob("*.py"), *(root / "mcp_lib").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if "agent.cli" in names:
                importers.append(str(path.relative_to(root)))
    assert importers == []


# -- the command's exit: no interpreter teardown, nothing lost -------------------------------------------------------
@pytest.mark.scenario
def test_the_console_exit_keeps_the_code_runs_atexit_and_flushes_what_is_buffered() -> None:
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stdout.write('atexit ran\\n'))  # buffered: only a flush brings it out\n"
            "sys.stdout.write('before\\n')\n"
            "sys.argv = ['helpbot', 'answer']\n"
            "from agent.cli import console\n"
            "console()\n"
            "print('not reached')")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe: stdout fully buffered
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2  # bad input: main's exit code, kept through os._exit
    assert done.stdout.splitlines() == ["before", "atexit ran"]
    assert "give one of --event FILE" in done.stderr and "Traceback" not in done.stderr
