"""Bad event files, end to end through the CLI: a symlink to /dev/urandom, a file just over the 1 MB cap, a NUL
byte, 50,000 nested objects, a 500,000-digit number, a BOM -- one line, exit 2, nothing posted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.cli import main
from tests.fakes.front import question_of
from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack, Workspace


def make(kind: str, tmp_path: Path, ts: str) -> str:
    path = tmp_path / "event.json"
    good = json.dumps({"action": "slack-help", "client_payload": {"channel": "C0ECSUP", "ts": ts}})
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink-to-zero":
        path.symlink_to("/dev/zero")
    elif kind == "symlink-to-urandom":
        path.symlink_to("/dev/urandom")
    elif kind == "dangling-symlink":
        path.symlink_to(tmp_path / "nowhere")
    elif kind == "just-over-1mb":
        path.write_text(good[:-1] + ', "pad": "' + "x" * (1024 * 1024) + '"}', encoding="utf-8")
    elif kind == "invalid-utf8":
        path.write_bytes(b'{"client_payload": {"channel": "C0ECSUP", "ts": "\xff\xfe"}}')
    elif kind == "nul":
        path.write_bytes(good.encode()[:20] + b"\x00" + good.encode()[20:])
    elif kind == "deep-objects":
        path.write_text('{"a":' * 50_000 + "1" + "}" * 50_000, encoding="utf-8")
    elif kind == "huge-number":
        path.write_text('{"client_payload": {"channel": "C0ECSUP", "ts": ' + "9" * 500_000 + "}}", encoding="utf-8")
    elif kind == "lone-surrogate":
        path.write_text('{"client_payload": {"channel": "C0ECSUP\\ud800", "ts": "' + ts + '"}}', encoding="utf-8")
    elif kind == "unreadable":
        path.write_text(good, encoding="utf-8")
        path.chmod(0)
    elif kind == "utf8-bom":
        path.write_bytes(b"\xef\xbb\xbf" + b"[" * 10)
    return str(path)


# beyond tests/agent/slack/test_front_faults.py's (directory, /dev/zero, not UTF-8, over 1 MB, dangling, deep arrays,
# surrogates, a 5,000-digit number)
KINDS = ["symlink-to-urandom", "just-over-1mb", "nul", "deep-objects", "huge-number", "utf8-bom"]
if os.geteuid() != 0:
    KINDS.append("unreadable")


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_event_file_is_one_line_exit_2_and_nothing_posted(
        kind: str, ws: Workspace, fake: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_USER_TOKEN": USER_TOKEN,
                        "SLACK_API_URL": fake.url}.items():
        monkeypatch.setenv(name, value)
    path = make(kind, tmp_path, question_of(ws).ts)
    code = main(["answer", "--event", path])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert fake.requests == []
