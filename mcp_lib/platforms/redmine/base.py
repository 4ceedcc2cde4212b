"""The light half of the redmine platform: its configuration and errors (python-redmine is not imported)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...config import DECLARED, env_float, env_int, env_list, env_str, env_url
from ...core import ToolError

PROJECT_IDENT = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class RedmineConfig:
    url: str
    api_key: str = field(repr=False)
    projects: tuple[str, ...] = ()  # the allowlist; empty = every project the key can see
    max_journals: int = DECLARED.value("HELPBOT_REDMINE_MAX_JOURNALS", int)
    max_note_chars: int = DECLARED.value("HELPBOT_REDMINE_MAX_NOTE_CHARS", int)
    timeout_s: float = DECLARED.value("HELPBOT_REDMINE_TIMEOUT", float)
    retry_budget_s: float = DECLARED.value("HELPBOT_REDMINE_RETRY_BUDGET", float)


def load_config(env: Mapping[str, str]) -> RedmineConfig | None:
    url = env_url(env, "REDMINE_URL")  # a value without http(s):// is a ConfigError even before the key is set
    key = env_str(env, "REDMINE_API_KEY")
    if url is None or key is None:
        return None
    return RedmineConfig(
        url=url,
        api_key=key,
        projects=tuple(env_list(env, "HELPBOT_REDMINE_PROJECTS")),
        max_journals=env_int(env, "HELPBOT_REDMINE_MAX_JOURNALS", minimum=1),
        max_note_chars=env_int(env, "HELPBOT_REDMINE_MAX_NOTE_CHARS", minimum=100),
        timeout_s=env_float(env, "HELPBOT_REDMINE_TIMEOUT", minimum=0.1),
        retry_budget_s=env_float(env, "HELPBOT_REDMINE_RETRY_BUDGET", minimum=0.0),
    )


class NotFound(ToolError):
    """Redmine answered 404 (or the key's user may not see the thing)."""


class Redirected(ToolError):
    """Redmine redirected to another path (a renamed or moved wiki page); ``path`` is where it landed."""

    def __init__(self, path: str):
        super().__init__(f"Redmine redirected the request to {path}")
        self.path = path


