"""The relay's dependency group (what bench/lambda_package.py and docs/slack-setup.md package for Lambda) holds
everything the relay imports: the relay runs with every other installed distribution made unimportable."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import lambda_package

ROOT = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: only the stdlib, helpbot's own packages and the allowed distributions' modules can
# be imported. An optional import (httpx tries click, rich, brotli, zstandard, ...) gets the ImportError it would
# get on Lambda, where they are not installed; a required one fails the run.
CHILD = """
import hashlib, hmac, importlib.abc, json, sys, time
allowed = set(json.loads(sys.argv[1])) | set(sys.stdlib_module_names) | {"agent", "mcp_lib"}
class OnlyThePackage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top not in allowed and not top.startswith("_"):
            raise ModuleNotFoundError(f"not in the relay package: {name}", name=name)
        return None

sys.meta_path.insert(0, OnlyThePackage())
import os, socket
refusing = socket.socket()  # bound, never listening: GitHub refuses, so the dispatch fails and is logged
refusing.bind(("127.0.0.1", 0))
os.environ["GITHUB_API_URL"] = f"http://127.0.0.1:{refusing.getsockname()[1]}"
from agent.slack.relay import lambda_handler

def deliver(payload):
    body = json.dumps(payload)
    stamp = str(int(time.time()))
    signature = "v0=" + hmac.new(b"s", f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return lambda_handler({"headers": {"x-slack-request-timestamp": stamp, "x-slack-signature": signature},
                           "body": body, "isBase64Encoded": False,
                           "requestContext": {"http": {"method": "POST"}}}, None)

def reaction(name, event_id):
    return {"type": "event_callback", "event_id": event_id, "event": {
        "type": "reaction_added", "user": "U0TANAKA", "reaction": name, "item_user": "U0SUZUKI",
        "item": {"type": "message", "channel": "C0123ABCD", "ts": "1700000000.123456"}}}

answers = [deliver({"type": "url_verification", "challenge": "c"}),
           deliver(reaction("thumbsup", "Ev01")),  # not helpbot's reaction: ignored, and logged
           deliver(reaction("help", "Ev02"))]  # dispatched: GitHub refuses, logged, 502 so that Slack retries
print(json.dumps(answers))
"""


def group_distributions() -> set[str]:
    exported = subprocess.run(["uv", "export", "--frozen", "--only-group", lambda_package.GROUP, "--no-emit-project",
                               "--no-hashes", "--format", "requirements-txt"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
    return {line.split("==")[0].strip().lower().replace("_", "-") for line in exported.splitlines()
            if line and not line.startswith((" ", "#"))}


@pytest.mark.scenario
def test_the_relay_runs_with_only_its_group_installed() -> None:
    group = group_distributions()
    assert {"anyio", "httpx2", "pydantic", "slack-sdk", "tenacity"} <= group
    assert not {"boto3", "anthropic", "mcp"} & group
    modules = {module for module, dists in importlib.metadata.packages_distributions().items()
               if any(d.lower().replace("_", "-") in group for d in dists)}
    env = {"SLACK_SIGNING_SECRET": "s", "GITHUB_REPOSITORY": "acme/helpbot", "HELPBOT_DISPATCH_TOKEN": "x",
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(sorted(modules))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr  # an import the group lacks fails here
    challenge, ignored, dispatched = json.loads(done.stdout)
    assert challenge["statusCode"] == 200 and json.loads(challenge["body"]) == {"challenge": "c"}
    assert ignored["statusCode"] == 200 and dispatched["statusCode"] == 502
