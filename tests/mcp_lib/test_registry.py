"""The registry loads what a run needs: declaring the platforms must not import their client libraries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.scenario
def test_a_registry_without_redmine_never_imports_python_redmine() -> None:
    probe = ("import sys; from mcp_lib import Registry; r = Registry(env={}); r.enabled(); r.tools(); "
             "print(sorted(m for m in ('redminelib', 'requests') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.scenario
def test_a_configured_redmine_client_does_import_it() -> None:
    probe = ("import sys; from mcp_lib import Registry; "
             "r = Registry(env={'REDMINE_URL': 'http://redmine.test', 'REDMINE_API_KEY': 'k'}); r.context('redmine'); "
             "print('redminelib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
