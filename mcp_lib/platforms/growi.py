"""growi: placeholder declaration until its tools land (issue 3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import Platform


def load_config(env: Mapping[str, str]) -> Any | None:
    return None


PLATFORM = Platform(
    name="growi",
    overview="(not yet implemented)",
    scenes=[],
    security_rules=[],
    load_config=load_config,
    make_client=lambda config: None,
)
