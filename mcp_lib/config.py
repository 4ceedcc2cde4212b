"""Reading configuration from the environment, with one clear error per bad variable."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar
from urllib.parse import urlparse

from .errors import EXIT_BAD_INPUT, ExitError


class ConfigError(ExitError):
    """Bad configuration: the CLIs print it as one line and exit 2."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, variable: str, problem: str):
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


def env_str(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def env_url(env: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """A base URL without a trailing slash; a value without http(s):// is a ConfigError, not a late crash.

    A URL may carry no credentials (``http://admin:pass@host``): every source link built from it would carry
    them into the answer. Credentials go in their own variables. The error names the variable, never the value.
    """
    value = env_str(env, name) or default
    if value is None:
        return None
    return check_url(name, value).rstrip("/")


def check_url(name: str, value: str) -> str:
    """``value`` when it is an http(s) URL without credentials, else a ConfigError naming ``name`` (a variable,
    or a setting such as ``helpbot.toml mcp_servers[0].url``) and never the value: the one URL check."""
    try:
        parsed = urlparse(value.strip())
        _ = parsed.port  # raises on a port that is not a number
    except ValueError:
        raise ConfigError(name, "is not a URL; expected something like https://host/path") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(name, "is not a URL; expected something like https://host/path")
    if "@" in parsed.netloc:
        raise ConfigError(name, "must not carry a user name or password (user:pass@host); give the credentials "
                                "in their own variable (the token or API key) and the URL without them")
    return value


N = TypeVar("N", int, float)


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    return _env_number(env, name, int, "a whole number", default, minimum)


def env_float(env: Mapping[str, str], name: str, default: float, minimum: float = 0.0) -> float:
    return _env_number(env, name, float, "a number", default, minimum)


def _env_number(env: Mapping[str, str], name: str, parse: Callable[[str], N], kind: str, default: N,
                minimum: N) -> N:
    raw = env_str(env, name)
    if raw is None:
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise ConfigError(name, f"{raw!r} is not {kind}") from None
    if value != value:  # NaN passes every "at least" check and then disables the limit it sets
        raise ConfigError(name, f"{raw!r} is not {kind}")
    if value < minimum:
        raise ConfigError(name, f"must be at least {minimum}, got {value}")
    return value


def env_list(env: Mapping[str, str], name: str) -> list[str]:
    """Comma- or space-separated list; empty when unset."""
    raw = env_str(env, name) or ""
    return [part for part in raw.replace(",", " ").split() if part]


def env_datetime(env: Mapping[str, str], name: str) -> datetime | None:
    """An ISO 8601 date-time (``2026-11-30T09:00+09:00``; without an offset it is naive); None when unset."""
    raw = env_str(env, name)
    if raw is None:
        return None
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        raise ConfigError(name, f"{raw!r} is not an ISO 8601 date-time like 2026-11-30T09:00+09:00") from None


def env_bool(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = env_str(env, name)
    if raw is None:
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(name, f"{raw!r} is not a boolean (use true or false)")


# -- the declaration -------------------------------------------------------------------------------------------
# Every environment variable mcp_lib reads, once: the tools' platforms, their limits, and what they take from the
# runner. An application declares its own beside these (helpbot: agent/config.py, which generates the docs tables
# and workflow env from both); a test fails on a variable read in mcp_lib/ that is not declared here.


@dataclass(frozen=True)
class Variable:
    """One environment variable: name, meaning, default (as documented), and whether it is a secret."""

    name: str
    meaning: str
    default: str = ""
    secret: bool = False


_v = Variable

VARIABLES: tuple[Variable, ...] = (
    _v("HELPBOT_TIMEZONE", "time zone of dates in answers and reports", "Asia/Tokyo"),
    # tools
    _v("HELPBOT_TOOL_MAX_ITEMS", "items per tool result (set explicitly: also caps tools' own limits)", "20"),
    _v("HELPBOT_TOOL_MAX_FIELD_CHARS", "characters per field of a tool result", "1500"),
    _v("HELPBOT_TOOL_MAX_RESULT_CHARS", "characters per tool result", "16000"),
    _v("HELPBOT_TOOL_BUDGET_S", "one tool call, retries included", "45"),
    _v("HELPBOT_HTTP_TIMEOUT_S", "one HTTP request of the GitHub and Growi tools", "20"),
    _v("HELPBOT_CONFIG", "the helpbot.toml with tags and in-house MCP servers", "./helpbot.toml"),
    # faq
    _v("HELPBOT_FAQ_PATH", "the FAQ directory", "faq/"),
    _v("HELPBOT_FAQ_BASE_URL", "where FAQ entries link to", "the repository, in Actions"),
    _v("HELPBOT_FAQ_CACHE_DIR", "where the built FAQ index is kept", "~/.cache/helpbot/faq"),
    _v("HELPBOT_FAQ_CACHE_KEY", "the FAQ content's key, from the workflow's hashFiles (the index is then "
       "found without hashing the FAQ)", "hashed by helpbot"),
    _v("HELPBOT_FAQ_SEMANTIC", "FAQ search by meaning too: `auto` (when the `semantic` extra is installed), "
       "`on`, `off`", "auto"),
    _v("XDG_CACHE_HOME", "the system's cache directory (the FAQ index when HELPBOT_FAQ_CACHE_DIR is unset)"),
    _v("HOME", "the system's home directory (`~/.cache`, when XDG_CACHE_HOME is unset too)"),
    # slack
    _v("SLACK_BOT_TOKEN", "bot token `xoxb-…`: read threads, post, react", secret=True),
    _v("SLACK_USER_TOKEN", "user token `xoxp-…` with `search:read`: Slack search", secret=True),
    _v("SLACK_API_URL", "another Slack API base (the tests' fake)", "https://slack.com/api/"),
    # redmine
    _v("REDMINE_URL", "the Redmine platform (with REDMINE_API_KEY)"),
    _v("REDMINE_API_KEY", "Redmine API key", secret=True),
    _v("HELPBOT_REDMINE_PROJECTS", "allowlist of project identifiers", "every project"),
    _v("HELPBOT_REDMINE_MAX_JOURNALS", "journals per issue", "10"),
    _v("HELPBOT_REDMINE_MAX_NOTE_CHARS", "characters per journal note", "1000"),
    _v("HELPBOT_REDMINE_TIMEOUT", "one Redmine request's timeout (s)", "10"),
    _v("HELPBOT_REDMINE_RETRY_BUDGET", "seconds of retries per Redmine call", "30"),
    # github
    _v("GITHUB_TOKEN", "read-only token of the GitHub platform (in Actions: the secret HELPBOT_GITHUB_TOKEN); the "
       "relay's dispatch token when HELPBOT_DISPATCH_TOKEN is unset", secret=True),
    _v("HELPBOT_GITHUB_REPOS", "repositories the GitHub platform may read, `owner/a owner/b`"),
    _v("GITHUB_API_URL", "GitHub API base (GitHub Enterprise)", "https://api.github.com"),
    _v("HELPBOT_GITHUB_MAX_BODY_CHARS", "characters of an issue or file body", "6000"),
    _v("HELPBOT_GITHUB_MAX_COMMENTS", "comments per issue", "10"),
    _v("HELPBOT_GITHUB_MAX_FILES", "files per pull request", "20"),
    _v("HELPBOT_GITHUB_MAX_PATCH_CHARS", "characters per patch", "1500"),
    # growi
    _v("GROWI_URL", "the Growi platform (with GROWI_ACCESS_TOKEN)"),
    _v("GROWI_ACCESS_TOKEN", "Growi access token", secret=True),
    _v("HELPBOT_GROWI_PATHS", "allowlist of page path prefixes", "every page"),
    _v("HELPBOT_GROWI_MAX_BODY_CHARS", "characters of a page body", "6000"),
    # from the runner: the FAQ's links, tracebacks
    _v("HELPBOT_DEBUG", "`1`: tracebacks instead of one-line errors"),
    _v("GITHUB_REPOSITORY", "`owner/repo` to dispatch to (Actions sets it for the FAQ links)"),
    _v("GITHUB_SERVER_URL", "the run link and the FAQ links"),
    _v("GITHUB_SHA", "the commit the FAQ links point at"),
)

DECLARED: Mapping[str, Variable] = {variable.name: variable for variable in VARIABLES}
