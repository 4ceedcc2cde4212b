"""``helpbot faq-draft --pr``: one pull request with FAQ drafts through GitHub's REST API (a branch from the default
branch, one commit per file, then the pull request), the only GitHub writes besides the relay's dispatch. A token that
may not push is a configuration error (exit 2) naming what it needs; whether it may open pull requests no read tells, so
a step failing after the branch exists deletes the branch again."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2

from agent import guard
from agent.config import DECLARED
from agent.errors import ConfigError, ExitError, RunFailed
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.config import env_str, env_url
from mcp_lib.core import ToolContext, ToolError
from mcp_lib.http import error_detail, json_answer, send
from mcp_lib.platforms.github.api import DEFAULT_API_URL, github_client

NEEDS = "a token with contents: write and pull-requests: write on the repository"
DIR_VARIABLE = "HELPBOT_FAQ_REPO_DIR"


@dataclass(frozen=True)
class PrConfig:
    repository: str  # owner/name
    token: str
    api_url: str
    faq_dir: str  # where the entries live in the repository: a relative posix path, "" for the top
    token_name: str = "GITHUB_TOKEN"  # the variable the token came from, named in errors


def repo_dir(env: Mapping[str, str]) -> str:
    """``HELPBOT_FAQ_REPO_DIR`` as a folder inside the repository (``faq/`` -> ``faq``; ``.`` -> the top); an
    absolute path, ``..``, a backslash or a control character is a configuration error."""
    raw = env_str(env, DIR_VARIABLE) or DECLARED[DIR_VARIABLE].default
    if raw.startswith(("/", "~")) or re.match(r"[A-Za-z]:", raw):
        raise ConfigError(DIR_VARIABLE, f"{raw!r} is absolute: give a folder inside the repository, like faq/")
    if "\\" in raw or re.search(r"[\x00-\x1f\x7f]", raw):
        raise ConfigError(DIR_VARIABLE, f"{raw!r} has a backslash or a control character: use / between folders")
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ConfigError(DIR_VARIABLE, f"{raw!r} leaves the folder with '..': give a folder inside the repository")
    return "/".join(parts)


def load_config(env: Mapping[str, str]) -> PrConfig:
    repository = env_str(env, "GITHUB_REPOSITORY")
    if not repository or repository.count("/") != 1:
        raise ConfigError("GITHUB_REPOSITORY", "not set to owner/name: --pr opens the pull request there")
    token_name = "HELPBOT_FAQ_PR_TOKEN" if env_str(env, "HELPBOT_FAQ_PR_TOKEN") else "GITHUB_TOKEN"
    if not (token := env_str(env, token_name)):
        raise ConfigError("HELPBOT_FAQ_PR_TOKEN", f"not set (nor GITHUB_TOKEN): --pr needs {NEEDS}")
    api_url = env_url(env, "GITHUB_API_URL", DEFAULT_API_URL) or DEFAULT_API_URL
    return PrConfig(repository, token, api_url, repo_dir(env), token_name)


def make_client(config: PrConfig, transport: httpx2.BaseTransport | None = None) -> httpx2.Client:
    """Writes allowed (the pull request's calls); the token goes to GITHUB_API_URL's origin only."""
    return github_client(config.token_name, config.api_url, config.token, "helpbot-faq-draft", read_only=False,
                         transport=transport, timeout=20.0)


class PullRequestWriter:
    """The calls, in order; every answer checked, every refusal explained."""

    def __init__(self, config: PrConfig, client: httpx2.Client, clock: Clock = SYSTEM_CLOCK):
        self.config = config
        self.ctx = ToolContext(client=client, config=config, clock=clock)
        self.repo = f"/repos/{config.repository}"

    def _call(self, method: str, path: str, what: str, expect: Sequence[int], *, missing_ok: bool = False,
              **kwargs: Any) -> Any:
        """The JSON answer of a call answered with one of ``expect`` (None for an empty 204, and for a 404 when
        ``missing_ok``); any other answer is the error that explains it."""
        if "json" in kwargs:  # what goes to GitHub passes the egress guard like any other write
            kwargs["json"] = guard.current().masker.deep(kwargs["json"])
        try:
            response = send(self.ctx, "GitHub", method, f"{self.repo}{path}", **kwargs)
        except ToolError as exc:
            raise RunFailed(f"helpbot faq-draft: {exc}") from None
        status = response.status_code
        if (status == 204 and 204 in expect) or (status == 404 and missing_ok):
            return None
        if status in expect:
            return json_answer(response, "GitHub", what, "GITHUB_API_URL")
        detail = error_detail(response)
        if status == 401:
            raise ConfigError(self.config.token_name, f"GitHub rejected the token (HTTP 401{detail})")
        if status in (403, 404):
            raise ConfigError(self.config.token_name, f"no permission to {what} in {self.config.repository} "
                                                      f"(HTTP {status}{detail}); --pr needs {NEEDS}")
        raise RunFailed(f"helpbot faq-draft: GitHub refused to {what} (HTTP {status}{detail})")

    def check(self) -> dict[str, Any]:
        """The repository, read with the token, which may push to it (as far as GitHub shows: a fine-grained or
        App token's pull-requests write shows only when the pull request is opened). ``helpbot doctor`` asks this."""
        info = self._call("GET", "", "read the repository", (200,))
        permissions = info.get("permissions")
        if isinstance(permissions, dict) and not permissions.get("push"):
            raise ConfigError(self.config.token_name, f"no permission to push to {self.config.repository}; --pr needs "
                                              f"{NEEDS}")
        return dict(info)

    def open(self, branch: str, files: Mapping[str, str], title: str, body: str) -> str:
        """Branch, files (name -> text, under the FAQ folder), pull request; returns the pull request's URL."""
        info = self.check()
        base = str(info.get("default_branch") or "main")
        head = self._call("GET", f"/git/ref/heads/{quote(base)}", f"read the branch {base}", (200,))
        paths = {name: f"{self.config.faq_dir}/{name}" if self.config.faq_dir else name for name in files}
        shas = {name: self._blob_sha(path, base) for name, path in paths.items()}  # all reads before any write
        self._call("POST", "/git/refs", f"create the branch {branch}", (201,),
                   json={"ref": f"refs/heads/{branch}", "sha": head["object"]["sha"]})
        github = guard.current().github  # every text GitHub renders: @mentions there notify, so they are defused
        try:
            for name, text in files.items():
                content = base64.b64encode(github(guard.markdown(text)).encode()).decode()  # no door reads base64
                self._call("PUT", f"/contents/{quote(paths[name])}", f"write {paths[name]}", (200, 201),
                           json={"message": github(f"FAQ draft: {name}"), "branch": branch, "content": content,
                                 **({"sha": shas[name]} if shas[name] else {})})  # an update names the blob it replaces
            pull = self._call("POST", "/pulls", "open the pull request", (201,),
                              json={"title": github(title), "head": branch, "base": base, "body": github(body),
                                    "draft": True})
        except (ExitError, ToolError) as exc:
            exc.args = (f"{exc}; {self._delete_branch(branch)}",)
            raise
        return str(pull.get("html_url") or "")

    def _blob_sha(self, path: str, ref: str) -> str | None:
        """The blob ``sha`` of ``path`` on ``ref`` when it exists (the contents API needs it to update a file)."""
        found = self._call("GET", f"/contents/{quote(path)}", f"read {path}", (200,), missing_ok=True,
                           params={"ref": ref})
        if found is None:
            return None
        if not isinstance(found, dict) or found.get("type") != "file" or not found.get("sha"):
            raise RunFailed(f"helpbot faq-draft: {path} in {self.config.repository} is not a file; "
                            f"set {DIR_VARIABLE} to a folder of FAQ entries")
        return str(found["sha"])

    def _delete_branch(self, branch: str) -> str:
        """Remove the branch this run created (its commits go with it); what happened, as the end of a line."""
        try:
            self._call("DELETE", f"/git/refs/heads/{quote(branch)}", f"delete the branch {branch}", (204,))
        except (ExitError, ToolError) as exc:
            return f"the branch {branch} it created could not be deleted ({exc}): delete it by hand"
        return f"the branch {branch} it created was deleted again: nothing is left in {self.config.repository}"
