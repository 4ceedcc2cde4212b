"""Reading configuration from the environment, with one clear error per bad variable."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeVar
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
# Every environment variable helpbot reads, once. The tables of docs/configuration.md and docs/slack-setup.md and
# the env blocks of the workflows are generated from it (`mcp-lib config --write`; `--check` in CI), and a test fails
# on a variable read in agent/ or mcp_lib/ that is not declared here.

Workflow = Literal["help", "feedback", "faq-draft", "doctor"]
WORKFLOWS: tuple[Workflow, ...] = ("help", "feedback", "faq-draft", "doctor")  # .github/workflows/<name>.yml
Where = Literal["help", "feedback", "faq-draft", "relay", "runner", "local"]
"""help / feedback / faq-draft: that workflow passes it; relay: the relay's own environment; runner: GitHub
Actions (or an action) sets it; local: for a local run only, no workflow passes it."""

Group = Literal["model", "loop", "tools", "faq", "slack", "redmine", "github", "growi", "front", "relay", "actions"]


@dataclass(frozen=True)
class Variable:
    """One environment variable: name, default (as documented), meaning, secret or not, and who sets it."""

    name: str
    group: Group
    meaning: str
    default: str = ""
    secret: bool = False
    where: tuple[Where, ...] = ("help",)
    source: str = ""  # the Actions secret or variable it comes from, when that is named differently
    value: str = ""  # the workflow's own expression, when it is not a secret or variable

    def expression(self) -> str:
        """What the workflows put in ``env:`` for it."""
        if self.value:
            return self.value
        return f"${{{{ {'secrets' if self.secret else 'vars'}.{self.source or self.name} }}}}"


def _v(name: str, group: Group, meaning: str, default: str = "", *, secret: bool = False,
       where: tuple[Where, ...] = ("help",), source: str = "", value: str = "") -> Variable:
    return Variable(name, group, meaning, default, secret, where, source, value)


VARIABLES: tuple[Variable, ...] = (
    # model
    _v("AWS_BEARER_TOKEN_BEDROCK", "model", "Bedrock API key: the simple way to reach Claude", secret=True),
    _v("AWS_ROLE_ARN", "model", "instead of the API key: the IAM role help.yml assumes with GitHub OIDC "
       "(docs/slack-setup.md gives the policies)"),
    _v("AWS_REGION", "model", "region of the Bedrock endpoint", "ap-northeast-1"),
    _v("AWS_DEFAULT_REGION", "model", "used when AWS_REGION is unset", where=("runner", "local")),
    _v("AWS_ACCESS_KEY_ID", "model", "AWS credentials (the OIDC step sets them)", secret=True,
       where=("runner", "local")),
    _v("AWS_SECRET_ACCESS_KEY", "model", "AWS credentials (the OIDC step sets them)", secret=True,
       where=("runner", "local")),
    _v("AWS_SESSION_TOKEN", "model", "AWS credentials (the OIDC step sets them)", secret=True,
       where=("runner", "local")),
    _v("AWS_PROFILE", "model", "an AWS CLI profile instead of keys", where=("local",)),
    _v("AWS_WEB_IDENTITY_TOKEN_FILE", "model", "web identity token file; needs AWS_ROLE_ARN", where=("local",)),
    _v("ANTHROPIC_BEDROCK_BASE_URL", "model", "another Bedrock runtime endpoint (a proxy or a stub)",
       "https://bedrock-runtime.{region}.amazonaws.com"),
    _v("ANTHROPIC_API_KEY", "model", "the Anthropic API directly instead of Bedrock", secret=True, where=("local",)),
    _v("ANTHROPIC_BASE_URL", "model", "another Anthropic API endpoint", where=("local",)),
    _v("HELPBOT_PROVIDER", "model", "`bedrock` or `anthropic` when credentials for both are set", where=("local",)),
    _v("HELPBOT_MODEL", "model", "the answering model's id", "jp.anthropic.claude-sonnet-4-5-20250929-v1:0"),
    _v("HELPBOT_SUMMARY_MODEL", "model", "the model for summaries and tagging",
       "jp.anthropic.claude-haiku-4-5-20251001-v1:0"),
    _v("HELPBOT_MODEL_TIMEOUT_S", "model", "one model request's timeout", "120"),
    _v("HELPBOT_MODEL_MAX_ATTEMPTS", "model", "attempts per model request (throttling, 5xx)", "6"),
    # loop
    _v("HELPBOT_MAX_ROUNDS", "loop", "tool rounds before the final answer", "10"),
    _v("HELPBOT_DEADLINE_S", "loop", "the run's deadline; the last part is kept for the final answer", "480"),
    _v("HELPBOT_TOOL_TIMEOUT_S", "loop", "one tool call's timeout in the loop", "60"),
    _v("HELPBOT_MAX_TOKENS", "loop", "the answer's length limit (tokens)", "4096"),
    _v("HELPBOT_SUMMARY_TIMEOUT_S", "loop", "a summary request gives up this soon", "25"),
    _v("HELPBOT_TIMEZONE", "loop", "time zone of dates in answers and reports", "Asia/Tokyo",
       where=("help", "feedback", "faq-draft")),
    _v("HELPBOT_NOW", "loop", "the current time as ISO 8601, to replay relative dates (先週); the `now` input of "
       "*Run workflow*", value="${{ inputs.now }}"),
    _v("HELPBOT_REQUEST_BUDGET_TOKENS", "loop", "no request to the model is larger (estimated tokens)", "100000"),
    _v("HELPBOT_SUMMARY_THRESHOLD_TOKENS", "loop", "the results already read are summarized past this; one result is "
       "capped at an eighth of it (7,500 estimated tokens at most)", "60000"),
    _v("HELPBOT_CLEAR_AFTER_READS", "loop", "requests a tool result stays whole in after the model read it; then, in "
       "the first half of the rounds, it is shortened to its sources and first words (a repeated call reads it "
       "whole again); 0: never", "2"),
    _v("HELPBOT_TOOL_RESULT_MAX_CHARS", "loop", "the loop's own cap on one tool result", "24000"),
    _v("HELPBOT_PRICE_INPUT", "loop", "USD per million input tokens of HELPBOT_MODEL", "list price"),
    _v("HELPBOT_PRICE_OUTPUT", "loop", "USD per million output tokens of HELPBOT_MODEL", "list price"),
    _v("HELPBOT_SUMMARY_PRICE_INPUT", "loop", "the same for HELPBOT_SUMMARY_MODEL", "list price"),
    _v("HELPBOT_SUMMARY_PRICE_OUTPUT", "loop", "the same for HELPBOT_SUMMARY_MODEL", "list price"),
    _v("HELPBOT_MAX_COST_USD", "loop", "spend cap per run (estimated USD): once reached, the run answers from what "
       "it gathered and the footer says so; unset: no cap"),
    # tools
    _v("HELPBOT_TOOL_MAX_ITEMS", "tools", "items per tool result (set explicitly: also caps tools' own limits)",
       "20"),
    _v("HELPBOT_TOOL_MAX_FIELD_CHARS", "tools", "characters per field of a tool result", "1500"),
    _v("HELPBOT_TOOL_MAX_RESULT_CHARS", "tools", "characters per tool result", "16000"),
    _v("HELPBOT_TOOL_BUDGET_S", "tools", "one tool call, retries included", "45"),
    _v("HELPBOT_HTTP_TIMEOUT_S", "tools", "one HTTP request of the GitHub and Growi tools", "20"),
    _v("HELPBOT_CONFIG", "tools", "the helpbot.toml with tags and in-house MCP servers", "./helpbot.toml"),
    # faq
    _v("HELPBOT_FAQ_PATH", "faq", "the FAQ directory", "faq/", where=("help", "faq-draft")),
    _v("HELPBOT_FAQ_BASE_URL", "faq", "where FAQ entries link to", "the repository, in Actions"),
    _v("HELPBOT_FAQ_CACHE_DIR", "faq", "where the built FAQ index is kept", "~/.cache/helpbot/faq"),
    _v("HELPBOT_FAQ_CACHE_KEY", "faq", "the FAQ content's key, from the workflow's hashFiles (the index is then "
       "found without hashing the FAQ)", "hashed by helpbot", value="${{ steps.faq.outputs.key }}"),
    _v("HELPBOT_FAQ_PRIVATE", "faq", "the FAQ repository is private: `helpbot faq-draft` may draft from private "
       "channels", "false", where=("faq-draft",)),
    _v("HELPBOT_FAQ_PR_TOKEN", "faq", "token for `helpbot faq-draft --pr` (contents and pull-requests write on this "
       "repository; GITHUB_TOKEN when unset). faq-draft.yml opens a pull request only when it is set", secret=True,
       where=("faq-draft",)),
    _v("HELPBOT_FAQ_REPO_DIR", "faq", "the folder in GITHUB_REPOSITORY that `helpbot faq-draft --pr` writes the "
       "drafts to (relative; `.` for the top)", "faq/", where=("faq-draft",)),
    _v("HELPBOT_FAQ_SEMANTIC", "faq", "FAQ search by meaning too: `auto` (when the `semantic` extra is installed), "
       "`on`, `off`", "auto"),
    _v("XDG_CACHE_HOME", "faq", "the system's cache directory (the FAQ index when HELPBOT_FAQ_CACHE_DIR is unset)",
       where=("runner", "local")),
    _v("HOME", "faq", "the system's home directory (`~/.cache`, when XDG_CACHE_HOME is unset too)",
       where=("runner", "local")),
    # slack
    _v("SLACK_BOT_TOKEN", "slack", "bot token `xoxb-…`: read threads, post, react", secret=True,
       where=("help", "feedback", "faq-draft")),
    _v("SLACK_USER_TOKEN", "slack", "user token `xoxp-…` with `search:read`: Slack search", secret=True),
    _v("SLACK_API_URL", "slack", "another Slack API base (the tests' fake)", "https://slack.com/api/",
       where=("local",)),
    # redmine
    _v("REDMINE_URL", "redmine", "the Redmine platform (with REDMINE_API_KEY)"),
    _v("REDMINE_API_KEY", "redmine", "Redmine API key", secret=True),
    _v("HELPBOT_REDMINE_PROJECTS", "redmine", "allowlist of project identifiers", "every project"),
    _v("HELPBOT_REDMINE_MAX_JOURNALS", "redmine", "journals per issue", "10"),
    _v("HELPBOT_REDMINE_MAX_NOTE_CHARS", "redmine", "characters per journal note", "1000"),
    _v("HELPBOT_REDMINE_TIMEOUT", "redmine", "one Redmine request's timeout (s)", "10"),
    _v("HELPBOT_REDMINE_RETRY_BUDGET", "redmine", "seconds of retries per Redmine call", "30"),
    # github
    _v("GITHUB_TOKEN", "github", "read-only token of the GitHub platform (in Actions: the secret "
       "HELPBOT_GITHUB_TOKEN); the relay's dispatch token when HELPBOT_DISPATCH_TOKEN is unset", secret=True,
       where=("help", "relay"), source="HELPBOT_GITHUB_TOKEN"),
    _v("HELPBOT_GITHUB_REPOS", "github", "repositories the GitHub platform may read, `owner/a owner/b`"),
    _v("GITHUB_API_URL", "github", "GitHub API base (GitHub Enterprise)", "https://api.github.com",
       where=("runner", "relay")),
    _v("HELPBOT_GITHUB_MAX_BODY_CHARS", "github", "characters of an issue or file body", "6000"),
    _v("HELPBOT_GITHUB_MAX_COMMENTS", "github", "comments per issue", "10"),
    _v("HELPBOT_GITHUB_MAX_FILES", "github", "files per pull request", "20"),
    _v("HELPBOT_GITHUB_MAX_PATCH_CHARS", "github", "characters per patch", "1500"),
    # growi
    _v("GROWI_URL", "growi", "the Growi platform (with GROWI_ACCESS_TOKEN)"),
    _v("GROWI_ACCESS_TOKEN", "growi", "Growi access token", secret=True),
    _v("HELPBOT_GROWI_PATHS", "growi", "allowlist of page path prefixes", "every page"),
    _v("HELPBOT_GROWI_MAX_BODY_CHARS", "growi", "characters of a page body", "6000"),
    # the Slack front
    _v("HELPBOT_REACTION", "front", "the reaction that asks helpbot", "help", where=("help", "relay")),
    _v("HELPBOT_CHANNELS", "front", "allowlist of channel IDs (`C…`, space or comma separated). **Set it**",
       "every channel the bot is in", where=("help", "feedback", "faq-draft", "relay")),
    _v("HELPBOT_BOT_USER_ID", "front", "helpbot's own user ID: its messages and reactions are never answered",
       where=("help", "feedback", "faq-draft", "relay")),
    _v("HELPBOT_ALLOWED_BOTS", "front", "bot IDs (`B…`) whose messages, mentions and reactions may start a run; "
       "every other bot, app, workflow or integration is ignored", where=("help", "relay")),
    _v("HELPBOT_SHARED_CHANNELS", "front", "channel IDs shared with other organizations (Slack Connect) that "
       "helpbot answers in, from the FAQ and HELPBOT_SHARED_SOURCES only; any other shared channel gets a short "
       "notice to the asker", "none"),
    _v("HELPBOT_SHARED_SOURCES", "front", "platforms offered besides the FAQ in HELPBOT_SHARED_CHANNELS and to "
       "askers from other organizations there (`slack`, `redmine`, `github`, `growi`)", "none"),
    _v("HELPBOT_QUESTION_CHANNEL", "front", "where a free `question` from *Run workflow* is answered",
       "only the job summary"),
    _v("HELPBOT_MASK_PERSONAL", "front", "`false` keeps e-mail addresses and phone numbers in posts", "true",
       where=("help", "feedback")),
    _v("HELPBOT_PROGRESS_INTERVAL_S", "front", "at most one placeholder update per this many seconds", "5"),
    _v("HELPBOT_TRACE_FILE", "front", "the run's trace (JSON lines); help.yml uploads it",
       value="${{ runner.temp }}/helpbot-trace.jsonl"),
    _v("HELPBOT_FEEDBACK_CHANNEL", "front", "where feedback.yml posts the weekly report (the bot must be in it)",
       where=("feedback",)),
    _v("HELPBOT_PUBLIC_RECORDS", "front", "`true`: a public repository's job summaries, logs and traces keep "
       "questions and answers (by default they keep only how each run ended, as for a private channel)", "false",
       where=("help", "feedback", "faq-draft")),
    _v("HELPBOT_DEBUG", "front", "`1`: tracebacks instead of one-line errors", where=("local",)),
    # relay
    _v("SLACK_SIGNING_SECRET", "relay", "the Slack app's signing secret", secret=True, where=("relay",)),
    _v("HELPBOT_DISPATCH_TOKEN", "relay", "token allowed to dispatch to this repository (see the security "
       "notes)", secret=True, where=("relay",)),
    _v("GITHUB_REPOSITORY", "relay", "`owner/repo` to dispatch to (Actions sets it for the FAQ links)",
       where=("relay", "runner")),
    # set by GitHub Actions
    _v("GITHUB_ACTIONS", "actions", "`true` inside Actions", where=("runner",)),
    _v("HELPBOT_REPOSITORY_VISIBILITY", "actions", "`public`, `private` or `internal`: the repository's, from the "
       "event (public: the records keep no question or answer text, see HELPBOT_PUBLIC_RECORDS)",
       where=("help", "feedback", "faq-draft"), value="${{ github.event.repository.visibility }}"),
    _v("GITHUB_ACTOR", "actions", "who started a manual run", where=("runner",)),
    _v("GITHUB_RUN_ID", "actions", "the run link in notices", where=("runner",)),
    _v("GITHUB_SERVER_URL", "actions", "the run link and the FAQ links", where=("runner",)),
    _v("GITHUB_SHA", "actions", "the commit the FAQ links point at", where=("runner",)),
    _v("GITHUB_STEP_SUMMARY", "actions", "the job summary file", where=("runner",)),
)

DECLARED: Mapping[str, Variable] = {variable.name: variable for variable in VARIABLES}


def passed_by(workflow: Workflow) -> list[Variable]:
    """The variables a workflow passes to helpbot, in declaration order. doctor.yml checks what the others pass
    (but their own expressions, such as an input of theirs)."""
    if workflow == "doctor":
        return [v for v in VARIABLES if set(v.where) & {"help", "feedback", "faq-draft"} and not v.value]
    return [variable for variable in VARIABLES if workflow in variable.where]
