"""A credential helpbot holds, pasted where a tool reads it, never reaches the model to be encoded.

The egress guard masks the exact value of every credential helpbot holds, whatever its length -- but only as
written. A model that reads the value can write it reversed, spaced, hex- or base64-encoded, which no mask can
recognise. So the value never reaches the model: tool results mask the held credentials too (mcp_lib, with the
same :func:`mcp_lib.external.credential_values` as the guard), also a value no pattern knows.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from agent.core.model import Request
from tests.fakes.model import calls
from tests.fakes.outward import outward_env, run
from tests.fakes.slack import FakeSlack, Workspace

HELD = "q7Zr2mKx9w"  # an in-house server's token: no pattern knows it, only its value does


def encodings(value: str) -> list[str]:
    return [value, value[::-1], " ".join(value), value.encode().hex(), base64.b64encode(value.encode()).decode(),
            value.upper()]


def test_a_held_credential_in_a_public_message_never_reaches_the_model(
        fake: FakeSlack, ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {**outward_env(fake), "SALES_MCP_TOKEN": HELD}
    ws.post("C0ECSUP", f"共有: 営業DBの接続キーは {HELD} です", user="U0SUZUKI")
    seen: list[str] = []

    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("slack_getConversationHistory", {"channel": "C0ECSUP"}),
                         ("slack_searchMessages", {"query": "接続キー"}))
        if request.round == 2:
            seen.extend(r["content"] for r in request.tool_results())
            text = " ".join(json.loads(r["content"]).get("items", [{}])[0].get("text", "")
                            for r in request.tool_results())
            read = text.split("接続キーは ")[1].split(" ")[0] if "接続キーは " in text else "none"
            return "キー: " + " / ".join(encodings(read))
        return "以上"

    out = run(env, ws, fake, tmp_path, capsys, script, with_feedback=True)
    assert seen and all(HELD not in content for content in seen), seen
    assert any("接続キーは [REDACTED]" in content for content in seen)
    out.assert_nowhere(*encodings(HELD))
