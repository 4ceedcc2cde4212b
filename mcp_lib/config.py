"""Reading configuration from the environment, one clear error per bad variable; the tools' variables, each
declared once with its documented default, which the typed readers fall back on (helpbot's: agent/config.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlparse

from .errors import ConfigError

if TYPE_CHECKING:
    from pydantic import ValidationError


def env_str(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def env_url(env: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """A base URL (:func:`check_url`) without a trailing slash; a bad one is a ConfigError, not a late crash."""
    value = env_str(env, name) or default
    return None if value is None else check_url(name, value).rstrip("/")


def check_url(name: str, value: str) -> str:
    """``value`` when it is an http(s) URL without credentials (every source link built from it would carry them
    into the answer), else a ConfigError naming ``name`` (a variable or a helpbot.toml setting), never the value."""
    try:
        parsed = urlparse(value.strip())
        _ = parsed.port  # raises on a port that is not a number
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(name)
    except ValueError:
        raise ConfigError(name, "is not a URL; expected something like https://host/path") from None
    if "@" in parsed.netloc:
        raise ConfigError(name, "must not carry a user name or password (user:pass@host); give the credentials "
                                "in their own variable (the token or API key) and the URL without them")
    return value


N = TypeVar("N", int, float)
T = TypeVar("T")


def validation_problem(exc: ValidationError, whole: str) -> str:
    """A pydantic error as one line, ``field.path: message`` (``whole`` names the object when no field does)."""
    error = exc.errors()[0]
    return f"{'.'.join(str(part) for part in error['loc']) or whole}: {error['msg']}"


def env_list(env: Mapping[str, str], name: str) -> list[str]:
    """Comma- or space-separated list; empty when unset."""
    return (env_str(env, name) or "").replace(",", " ").split()


def env_datetime(env: Mapping[str, str], name: str) -> datetime | None:
    """An ISO 8601 date-time (``2026-11-30T09:00+09:00``; without an offset it is naive); None when unset."""
    raw = env_str(env, name)
    if raw is None:
        return None
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        raise ConfigError(name, f"{raw!r} is not an ISO 8601 date-time like 2026-11-30T09:00+09:00") from None


@dataclass(frozen=True)
class Variable:
    """One environment variable: name, meaning, default (as documented), and whether it is a secret."""

    name: str
    meaning: str
    default: str = ""
    secret: bool = False


V = TypeVar("V", bound=Variable)


class Declaration(dict[str, V]):
    """Variables by name, and the typed readers: unset (or empty), a variable reads as its declared default, so
    that default lives only in the declaration. ``default=`` is for a name declared without one."""

    def __init__(self, variables: Iterable[V]) -> None:
        super().__init__((variable.name, variable) for variable in variables)

    def value(self, name: str, parse: Callable[[str], T]) -> T:
        """The declared default of ``name``, parsed (for a dataclass field's default, or a description)."""
        declared = self[name].default
        if not declared:
            raise ValueError(f"{name} is declared without a default")
        return parse(declared)

    def describe(self, text: str) -> str:
        """``text`` with each ``{NAME}`` replaced by that variable's declared default (a tool's setup text)."""
        return text.format_map({name: variable.default for name, variable in self.items()})

    def _number(self, env: Mapping[str, str], name: str, parse: Callable[[str], N], kind: str, default: N | None,
                minimum: N) -> N:
        raw = env_str(env, name)
        if raw is None:
            return self.value(name, parse) if default is None else default
        try:
            value = parse(raw)
            if value != value:  # NaN passes every "at least" check and then disables the limit it sets
                raise ValueError(raw)
        except ValueError:
            raise ConfigError(name, f"{raw!r} is not {kind}") from None
        if value < minimum:
            raise ConfigError(name, f"must be at least {minimum}, got {value}")
        return value

    def env_int(self, env: Mapping[str, str], name: str, default: int | None = None, minimum: int = 0) -> int:
        return self._number(env, name, int, "a whole number", default, minimum)

    def env_float(self, env: Mapping[str, str], name: str, default: float | None = None, minimum: float = 0.0) -> float:
        return self._number(env, name, float, "a number", default, minimum)

    def env_bool(self, env: Mapping[str, str], name: str) -> bool:
        raw = env_str(env, name) or self[name].default
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("", "0", "false", "no", "off"):
            return False
        raise ConfigError(name, f"{raw!r} is not a boolean (use true or false)")

    def env_timezone(self, env: Mapping[str, str], name: str) -> str:
        """An IANA time zone name (``Asia/Tokyo``), checked."""
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        zone = env_str(env, name) or self[name].default
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(name, f"{zone!r} is not a time zone name like {self[name].default}") from None
        return zone


# -- the declaration: every variable mcp_lib reads (a test fails on one read in mcp_lib/ that is not here) ------
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

DECLARED = Declaration(VARIABLES)
env_int, env_float, env_bool, env_timezone = (DECLARED.env_int, DECLARED.env_float, DECLARED.env_bool,
                                              DECLARED.env_timezone)
