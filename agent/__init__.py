"""helpbot's agent: Claude (on Bedrock) investigates with mcp_lib's tools and answers with sources. ``core`` is the
agent (start at ``core/loop.py``), ``slack`` the Slack front, the top level the commands and their shared wiring
(``build.py``). The public names below are imported on first use, so ``helpbot --help`` stays fast."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .build import build_agent
    from .core.loop import Agent
    from .core.model import Request, Usage
    from .core.run import Answer, Progress, Turn
    from .errors import ExitError

_WHERE = {
    "Agent": "agent.core.loop",
    "Answer": "agent.core.run",
    "ExitError": "agent.errors",
    "Progress": "agent.core.run",
    "Request": "agent.core.model",
    "Turn": "agent.core.run",
    "Usage": "agent.core.model",
    "build_agent": "agent.build",
}
__all__ = ["Agent", "Answer", "ExitError", "Progress", "Request", "Turn", "Usage", "build_agent"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'agent' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
