"""The public surface of both packages, pinned: a name added or dropped here is a deliberate change."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import agent
import mcp_lib

AGENT = ["Agent", "Answer", "ExitError", "Progress", "Request", "Turn", "Usage", "build_agent"]
MCP_LIB = ["ArgumentError", "Caller", "Limits", "Platform", "Registry", "Result", "Tool", "ToolContext", "ToolError",
           "default_registry", "get_mcp"]


def test_agent_public_names_are_pinned_and_resolve() -> None:
    assert sorted(agent.__all__) == AGENT == sorted(agent._WHERE)
    for name in AGENT:  # each resolves to the one definition (ExitError is mcp_lib's, the root of both trees)
        module = importlib.import_module(agent._WHERE[name])
        assert getattr(agent, name) is getattr(module, name)


def test_mcp_lib_public_names_are_pinned_and_resolve() -> None:
    assert sorted(mcp_lib.__all__) == MCP_LIB
    for name in MCP_LIB:
        assert getattr(mcp_lib, name).__name__ == name


@pytest.mark.scenario
def test_importing_agent_stays_light() -> None:
    probe = "import sys, agent; print(sorted(m for m in ('anthropic', 'slack_sdk', 'mcp_lib') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
