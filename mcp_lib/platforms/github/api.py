"""GitHub's REST API as the github tools use it: configuration, the read-only client, requests, the allowlist."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ...config import DECLARED, ConfigError, env_float, env_int, env_list, env_str, env_url
from ...core import CredentialsError, ToolContext, ToolError
from ...doors import door
from ...http import door_client, error_detail, json_answer, send

if TYPE_CHECKING:  # the client is mcp_lib.http's: httpx2 is imported when one is built
    import httpx2

DEFAULT_API_URL = DECLARED["GITHUB_API_URL"].default
API_VERSION = "2022-11-28"
JSON_MEDIA = "application/vnd.github+json"

_REPO_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


# -- configuration ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GitHubConfig:
    api_url: str
    token: str
    repos: tuple[str, ...]
    timeout_s: float = DECLARED.value("HELPBOT_HTTP_TIMEOUT_S", float)
    max_body_chars: int = DECLARED.value("HELPBOT_GITHUB_MAX_BODY_CHARS", int)
    max_comments: int = DECLARED.value("HELPBOT_GITHUB_MAX_COMMENTS", int)
    max_comment_chars: int = 1000
    max_files: int = DECLARED.value("HELPBOT_GITHUB_MAX_FILES", int)
    max_patch_chars: int = DECLARED.value("HELPBOT_GITHUB_MAX_PATCH_CHARS", int)
    search_per_page: int = 20

    def allowed(self, repo: str) -> str | None:
        """The allowlist's spelling of ``repo`` (GitHub names are case-insensitive), or None."""
        return next((name for name in self.repos if name.lower() == repo.lower()), None)


def load_config(env: Mapping[str, str]) -> GitHubConfig | None:
    """Enabled when both ``GITHUB_TOKEN`` and ``HELPBOT_GITHUB_REPOS`` are set."""
    token = env_str(env, "GITHUB_TOKEN")
    entries = env_list(env, "HELPBOT_GITHUB_REPOS")
    if not token or not entries:
        return None
    repos: list[str] = []
    for entry in entries:
        name = entry.strip().strip("/")
        if not _REPO_RE.match(name) or name.split("/")[1] in (".", ".."):
            raise ConfigError("HELPBOT_GITHUB_REPOS", f"{entry!r} is not an owner/name repository "
                                                      "(expected e.g. acme/shop-sync, comma-separated)")
        if name.lower() not in (r.lower() for r in repos):
            repos.append(name)
    return GitHubConfig(
        api_url=env_url(env, "GITHUB_API_URL", DEFAULT_API_URL) or DEFAULT_API_URL,
        token=token,
        repos=tuple(repos),
        timeout_s=env_float(env, "HELPBOT_HTTP_TIMEOUT_S", minimum=0.1),
        max_body_chars=env_int(env, "HELPBOT_GITHUB_MAX_BODY_CHARS", minimum=200),
        max_comments=env_int(env, "HELPBOT_GITHUB_MAX_COMMENTS", minimum=1),
        max_files=env_int(env, "HELPBOT_GITHUB_MAX_FILES", minimum=1),
        max_patch_chars=env_int(env, "HELPBOT_GITHUB_MAX_PATCH_CHARS", minimum=100),
    )


def github_client(credential: str, api_url: str, token: str, user_agent: str, **kwargs: Any) -> httpx2.Client:
    """A GitHub REST client whose token (``credential``) goes to api_url's origin only (GET only unless read_only)."""
    headers = {"Accept": JSON_MEDIA, "X-GitHub-Api-Version": API_VERSION, "Authorization": f"Bearer {token}",
               "User-Agent": user_agent}
    return door_client(door(credential, api_url, token), base_url=api_url, headers=headers, **kwargs)


def make_client(config: GitHubConfig, transport: httpx2.BaseTransport | None = None) -> httpx2.Client:
    """The tools' client; tests pass ``transport=httpx2.MockTransport(fake.handler)`` or point api_url at a server."""
    return github_client("GITHUB_TOKEN", config.api_url, config.token, "helpbot-mcp-lib", timeout=config.timeout_s,
                         transport=transport)


# -- requests and answers -----------------------------------------------------------------------------------
def api_get(ctx: ToolContext, path: str, what: str, **kwargs: Any) -> Any:
    """GET under retries; GitHub's error answers become ToolErrors that say what to check."""
    response = send(ctx, "GitHub", "GET", path, **kwargs)
    status = response.status_code
    if status == 200:
        return json_answer(response, "GitHub", what, "GITHUB_API_URL")
    detail = error_detail(response)
    if status == 401:
        raise CredentialsError(f"GitHub rejected GITHUB_TOKEN (HTTP 401{detail}); the token is wrong or expired")
    if 300 <= status < 400:
        raise ToolError(f"GitHub redirected {what} (HTTP {status} to {response.headers.get('location')}); "
                        "the repository may have been renamed: update HELPBOT_GITHUB_REPOS")
    raise ToolError({
        403: f"GitHub refused {what} (HTTP 403{detail}); the token may lack read access to it",
        404: f"{what} was not found on GitHub (HTTP 404{detail}); check the repo, path, ref or number, or whether "
             "the token can see it",
        422: f"GitHub could not process {what} (HTTP 422{detail})",
    }.get(status, f"GitHub answered HTTP {status} for {what}{detail}"))


def check(ctx: ToolContext) -> list[str]:
    """``helpbot doctor``: the token reads every repository of HELPBOT_GITHUB_REPOS (code search needs that too)."""
    config: GitHubConfig = ctx.config
    unreadable = []
    for repo in config.repos:
        try:
            api_get(ctx, repo_path(repo), f"repository {repo}")
        except CredentialsError:
            raise
        except ToolError:
            unreadable.append(repo)
    if unreadable:
        raise ToolError(f"GITHUB_TOKEN cannot read {', '.join(unreadable)} of HELPBOT_GITHUB_REPOS (give the token "
                        "contents and issues read on them, or fix the names)")
    return [f"GITHUB_TOKEN reads all {len(config.repos)} repositories of HELPBOT_GITHUB_REPOS"]


def checked_repo(ctx: ToolContext, repo: str) -> str:
    """The allowlisted spelling of ``repo``, or a refusal that lists what may be read."""
    config: GitHubConfig = ctx.config
    name = config.allowed(repo.strip().strip("/"))
    if name is None:
        raise ToolError(f"repository {repo!r} is not in the allowlist (HELPBOT_GITHUB_REPOS); "
                        f"allowed: {', '.join(config.repos)}")
    return name


def repo_path(repo: str) -> str:
    owner, name = repo.split("/")
    return f"/repos/{quote(owner, safe='')}/{quote(name, safe='')}"
