"""agent.build's configuration check: everything configured, and still nothing of the clients imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what a client or a request needs, not a check: the HTTP client, the FAQ files' reader, python-redmine (and its
# requests), the model's signing and the agent's loop
CLIENT_CODE = ("httpx2", "httpcore2", "yaml", "redminelib", "requests", "botocore", "agent.core.loop",
               "agent.core.claude")
TOML = """\
[[tags]]
name = "在庫"
keywords = ["在庫", "stock"]

[[mcp_servers]]
name = "sales"
command = "python"
args = ["server.py"]
tools = ["get_sales"]
"""


@pytest.mark.scenario
def test_the_configuration_check_of_every_platform_imports_no_client(tmp_path: Path) -> None:
    (tmp_path / "helpbot.toml").write_text(TOML, encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "ANTHROPIC_", "HELPBOT_", "SLACK_", "REDMINE_", "GITHUB_", "GROWI_"))}
    env.update(HELPBOT_CONFIG=str(tmp_path / "helpbot.toml"), SLACK_BOT_TOKEN="xoxb-1", SLACK_USER_TOKEN="xoxp-1",
               REDMINE_URL="https://redmine.example.com", REDMINE_API_KEY="k", GITHUB_TOKEN="t",
               HELPBOT_GITHUB_REPOS="acme/shop", GROWI_URL="https://wiki.example.com", GROWI_ACCESS_TOKEN="g",
               AWS_ACCESS_KEY_ID="AKIA0", AWS_SECRET_ACCESS_KEY="s", AWS_REGION="ap-northeast-1")
    # and no tool's arguments model: pydantic builds those when the tools are first listed
    code = ("import json, os, sys\nimport mcp_lib.core as core\nfrom agent.build import check_configuration\n"
            "from mcp_lib import Registry\nbuilt = []\nreal = core.create_model\n"
            "core.create_model = lambda name, **fields: built.append(name) or real(name, **fields)\n"
            "check_configuration(os.environ)\nchecked = list(built)\nregistry = Registry(os.environ)\n"
            "enabled = sorted(p.name for p in registry.enabled())\n"
            f"imported = [m for m in {CLIENT_CODE!r} if m in sys.modules]\nregistry.tools()\n"
            "print(json.dumps([enabled, imported, checked, len(built)]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    enabled, imported, models, listed = json.loads(done.stdout.splitlines()[-1])
    assert enabled == ["faq", "github", "growi", "redmine", "sales", "slack"]
    assert imported == []
    assert models == [] and listed > 10  # built once listed: the count is of the real models


def test_the_run_keeps_freed_memory_at_glibcs_own_ceilings() -> None:
    from agent.build import hold_freed_memory

    calls: list[tuple[int, int]] = []

    class Glibc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    hold_freed_memory(Glibc())
    assert calls == [(-3, 32 << 20), (-1, 64 << 20)]  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD (malloc.h)


def test_a_c_library_without_mallopt_is_left_as_it_is() -> None:
    from agent.build import hold_freed_memory

    hold_freed_memory(object())  # musl, macOS: nothing to set, nothing raised
    hold_freed_memory()  # this process's own C library
