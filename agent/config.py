"""Every environment variable helpbot reads, once: its own (the model, the loop, the Slack front, the relay, the
runner's) and the tool library's (:data:`mcp_lib.config.VARIABLES`), each with the workflows that pass it. The tables
of docs/configuration.md and docs/slack-setup.md and the workflows' ``env:`` are generated from this
(``helpbot config --write``; ``--check`` in CI), and a test fails on a variable read in agent/ that is not here."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from mcp_lib import config as tools_config
from mcp_lib.config import Declaration, Variable

Workflow = Literal["help", "feedback", "faq-draft", "vote", "doctor"]
WORKFLOWS: tuple[Workflow, ...] = ("help", "feedback", "faq-draft", "vote", "doctor")  # .github/workflows/<name>.yml
Where = Literal["help", "feedback", "faq-draft", "vote", "relay", "runner", "local"]
"""help / feedback / faq-draft / vote: that workflow passes it; relay: the relay's own environment; runner: GitHub
Actions (or an action) sets it; local: for a local run only, no workflow passes it."""

Group = Literal["model", "loop", "tools", "faq", "slack", "redmine", "github", "growi", "front", "relay", "actions"]
CHANNELS: tuple[Where, ...] = ("help", "feedback", "faq-draft", "vote")  # the workflows that read Slack
RUNNER: tuple[Where, ...] = ("runner", "local")


@dataclass(frozen=True)
class Passed(Variable):
    """A variable as helpbot documents and deploys it: its group, who sets it, and from what."""

    group: Group = "tools"
    where: tuple[Where, ...] = ("help",)
    source: str = ""  # the Actions secret or variable it comes from, when that is named differently
    value: str = ""  # the workflow's own expression, when it is not a secret or variable

    def expression(self) -> str:
        """What the workflows put in ``env:`` for it."""
        return self.value or f"${{{{ {'secrets' if self.secret else 'vars'}.{self.source or self.name} }}}}"


_v = Passed  # name, meaning, default, secret, then by keyword: where, source, value


def _tools(*names: str, where: tuple[Where, ...] = ("help",), source: str = "", value: str = "") -> list[Passed]:
    """The tool library's variables, as helpbot passes them."""
    return [Passed(**vars(tools_config.DECLARED[name]), where=where, source=source, value=value) for name in names]


SECTIONS: dict[Group, list[Passed]] = {
    "model": [
        _v("AWS_BEARER_TOKEN_BEDROCK", "Bedrock API key: the simple way to reach Claude", secret=True),
        _v("AWS_ROLE_ARN", "instead of the API key: the IAM role help.yml assumes with GitHub OIDC "
           "(docs/slack-setup.md gives the policies)"),
        _v("AWS_REGION", "region of the Bedrock endpoint", "ap-northeast-1"),
        _v("AWS_DEFAULT_REGION", "used when AWS_REGION is unset", where=RUNNER),
        *(_v(name, "AWS credentials (the OIDC step sets them)", secret=True, where=RUNNER)
          for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")),
        _v("AWS_PROFILE", "an AWS CLI profile instead of keys", where=("local",)),
        _v("AWS_WEB_IDENTITY_TOKEN_FILE", "web identity token file; needs AWS_ROLE_ARN", where=("local",)),
        _v("ANTHROPIC_BEDROCK_BASE_URL", "another Bedrock runtime endpoint (a proxy or a stub)",
           "https://bedrock-runtime.{region}.amazonaws.com"),
        _v("ANTHROPIC_API_KEY", "the Anthropic API directly instead of Bedrock", secret=True, where=("local",)),
        _v("ANTHROPIC_BASE_URL", "another Anthropic API endpoint", where=("local",)),
        _v("HELPBOT_PROVIDER", "`bedrock` or `anthropic` when credentials for both are set", where=("local",)),
        _v("HELPBOT_MODEL", "the answering model's id", "jp.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        _v("HELPBOT_SUMMARY_MODEL", "the model for summaries and tagging",
           "jp.anthropic.claude-haiku-4-5-20251001-v1:0"),
        _v("HELPBOT_MODEL_TIMEOUT_S", "one model request's timeout", "120"),
        _v("HELPBOT_MODEL_MAX_ATTEMPTS", "attempts per model request (throttling, 5xx)", "6"),
    ],
    "loop": [
        _v("HELPBOT_MAX_ROUNDS", "tool rounds before the final answer", "10"),
        _v("HELPBOT_DEADLINE_S", "the run's deadline; the last part is kept for the final answer", "480"),
        _v("HELPBOT_TOOL_TIMEOUT_S", "one tool call's timeout in the loop", "60"),
        _v("HELPBOT_MAX_TOKENS", "the answer's length limit (tokens)", "4096"),
        _v("HELPBOT_SUMMARY_TIMEOUT_S", "a summary request gives up this soon", "25"),
        *_tools("HELPBOT_TIMEZONE", where=CHANNELS),
        _v("HELPBOT_NOW", "the current time as ISO 8601, to replay relative dates (先週); the `now` input of "
           "*Run workflow*", value="${{ inputs.now }}"),
        _v("HELPBOT_REQUEST_BUDGET_TOKENS", "no request to the model is larger (estimated tokens)", "100000"),
        _v("HELPBOT_SUMMARY_THRESHOLD_TOKENS", "the results already read are summarized past this; one result is "
           "capped at an eighth of it (7,500 estimated tokens at most)", "60000"),
        _v("HELPBOT_CLEAR_AFTER_READS", "requests a tool result stays whole in after the model read it; then, in "
           "the first half of the rounds, it is shortened to its sources and first words (a repeated call reads "
           "it whole again); 0: never", "2"),
        _v("HELPBOT_TOOL_RESULT_MAX_CHARS", "the loop's own cap on one tool result", "24000"),
        _v("HELPBOT_PRICE_INPUT", "USD per million input tokens of HELPBOT_MODEL", "list price"),
        _v("HELPBOT_PRICE_OUTPUT", "USD per million output tokens of HELPBOT_MODEL", "list price"),
        _v("HELPBOT_SUMMARY_PRICE_INPUT", "the same for HELPBOT_SUMMARY_MODEL", "list price"),
        _v("HELPBOT_SUMMARY_PRICE_OUTPUT", "the same for HELPBOT_SUMMARY_MODEL", "list price"),
        _v("HELPBOT_MAX_COST_USD", "spend cap per run (estimated USD): once reached, the run answers from what it "
           "gathered and the footer says so; unset: no cap"),
    ],
    "tools": _tools("HELPBOT_TOOL_MAX_ITEMS", "HELPBOT_TOOL_MAX_FIELD_CHARS", "HELPBOT_TOOL_MAX_RESULT_CHARS",
                    "HELPBOT_TOOL_BUDGET_S", "HELPBOT_HTTP_TIMEOUT_S", "HELPBOT_CONFIG"),
    "faq": [
        *_tools("HELPBOT_FAQ_PATH", where=("help", "faq-draft")),
        *_tools("HELPBOT_FAQ_BASE_URL", "HELPBOT_FAQ_CACHE_DIR"),
        *_tools("HELPBOT_FAQ_CACHE_KEY", value="${{ steps.faq.outputs.key }}"),
        _v("HELPBOT_FAQ_PRIVATE", "the FAQ repository is private: `helpbot faq-draft` may draft from private "
           "channels", "false", where=("faq-draft",)),
        _v("HELPBOT_FAQ_PR_TOKEN", "token for `helpbot faq-draft --pr` (contents and pull-requests write on this "
           "repository; GITHUB_TOKEN when unset). faq-draft.yml opens a pull request only when it is set",
           secret=True, where=("faq-draft",)),
        _v("HELPBOT_FAQ_REPO_DIR", "the folder in GITHUB_REPOSITORY that `helpbot faq-draft --pr` writes the "
           "drafts to (relative; `.` for the top)", "faq/", where=("faq-draft",)),
        *_tools("HELPBOT_FAQ_SEMANTIC"),
        *_tools("XDG_CACHE_HOME", "HOME", where=RUNNER),
    ],
    "slack": [*_tools("SLACK_BOT_TOKEN", where=CHANNELS), *_tools("SLACK_USER_TOKEN"),
              *_tools("SLACK_API_URL", where=("local",))],
    "redmine": _tools("REDMINE_URL", "REDMINE_API_KEY", "HELPBOT_REDMINE_PROJECTS", "HELPBOT_REDMINE_MAX_JOURNALS",
                      "HELPBOT_REDMINE_MAX_NOTE_CHARS", "HELPBOT_REDMINE_TIMEOUT", "HELPBOT_REDMINE_RETRY_BUDGET"),
    "github": [*_tools("GITHUB_TOKEN", where=("help", "relay"), source="HELPBOT_GITHUB_TOKEN"),
               *_tools("HELPBOT_GITHUB_REPOS"), *_tools("GITHUB_API_URL", where=("runner", "relay")),
               *_tools("HELPBOT_GITHUB_MAX_BODY_CHARS", "HELPBOT_GITHUB_MAX_COMMENTS", "HELPBOT_GITHUB_MAX_FILES",
                       "HELPBOT_GITHUB_MAX_PATCH_CHARS")],
    "growi": _tools("GROWI_URL", "GROWI_ACCESS_TOKEN", "HELPBOT_GROWI_PATHS", "HELPBOT_GROWI_MAX_BODY_CHARS"),
    "front": [
        _v("HELPBOT_REACTION", "the reaction that asks helpbot", "help", where=("help", "relay")),
        _v("HELPBOT_CHANNELS", "allowlist of channel IDs (`C…`, space or comma separated). **Set it**",
           "every channel the bot is in", where=(*CHANNELS, "relay")),
        _v("HELPBOT_BOT_USER_ID", "helpbot's own user ID: its messages and reactions are never answered",
           where=(*CHANNELS, "relay")),
        _v("HELPBOT_ALLOWED_BOTS", "bot IDs (`B…`) whose messages, mentions and reactions may start a run; every "
           "other bot, app, workflow or integration is ignored", where=("help", "relay")),
        _v("HELPBOT_SHARED_CHANNELS", "channel IDs shared with other organizations (Slack Connect) that helpbot "
           "answers in, from the FAQ and HELPBOT_SHARED_SOURCES only; any other shared channel gets a short notice "
           "to the asker", "none"),
        _v("HELPBOT_SHARED_SOURCES", "platforms offered besides the FAQ in HELPBOT_SHARED_CHANNELS and to askers "
           "from other organizations there (`slack`, `redmine`, `github`, `growi`)", "none"),
        _v("HELPBOT_QUESTION_CHANNEL", "where a free `question` from *Run workflow* is answered",
           "only the job summary"),
        _v("HELPBOT_MASK_PERSONAL", "`false` keeps e-mail addresses and phone numbers in posts", "true",
           where=("help", "feedback", "vote")),
        _v("HELPBOT_FEEDBACK_BUTTONS", "`true`: 👍/👎 buttons under each answer, a click a vote (needs the relay's "
           "interactivity URL and vote.yml; Zapier cannot take clicks)", "false"),
        _v("HELPBOT_PROGRESS_INTERVAL_S", "at most one placeholder update per this many seconds", "5"),
        _v("HELPBOT_TRACE_FILE", "the run's trace (JSON lines); help.yml uploads it",
           value="${{ runner.temp }}/helpbot-trace.jsonl"),
        _v("HELPBOT_FEEDBACK_CHANNEL", "where feedback.yml posts the weekly report (the bot must be in it)",
           where=("feedback",)),
        _v("HELPBOT_PUBLIC_RECORDS", "`true`: a public repository's job summaries, logs and traces keep questions "
           "and answers (by default they keep only how each run ended, as for a private channel)", "false",
           where=CHANNELS),
        *_tools("HELPBOT_DEBUG", where=("local",)),
    ],
    "relay": [
        _v("SLACK_SIGNING_SECRET", "the Slack app's signing secret", secret=True, where=("relay",)),
        _v("HELPBOT_DISPATCH_TOKEN", "token allowed to dispatch to this repository (see the security notes)",
           secret=True, where=("relay",)),
        *_tools("GITHUB_REPOSITORY", where=("relay", "runner")),
    ],
    "actions": [
        _v("GITHUB_ACTIONS", "`true` inside Actions", where=("runner",)),
        _v("HELPBOT_REPOSITORY_VISIBILITY", "`public`, `private` or `internal`: the repository's, from the event "
           "(public: the records keep no question or answer text, see HELPBOT_PUBLIC_RECORDS)", where=CHANNELS,
           value="${{ github.event.repository.visibility }}"),
        _v("GITHUB_ACTOR", "who started a manual run", where=("runner",)),
        _v("GITHUB_RUN_ID", "the run link in notices", where=("runner",)),
        *_tools("GITHUB_SERVER_URL", "GITHUB_SHA", where=("runner",)),
        _v("GITHUB_STEP_SUMMARY", "the job summary file", where=("runner",)),
    ],
}

VARIABLES: tuple[Passed, ...] = tuple(replace(v, group=group) for group, section in SECTIONS.items() for v in section)
DECLARED = Declaration(VARIABLES)
# The typed readers of helpbot's variables (the tools' included), each falling back on its declared default.
env_int, env_float, env_bool, env_timezone = (DECLARED.env_int, DECLARED.env_float, DECLARED.env_bool,
                                              DECLARED.env_timezone)


def passed_by(workflow: Workflow) -> list[Passed]:
    """The variables a workflow passes to helpbot, in declaration order. doctor.yml checks what the others pass
    (but their own expressions, such as an input or a step of theirs; the repository's are every event's)."""
    if workflow == "doctor":
        return [v for v in VARIABLES if set(v.where) & set(CHANNELS)
                and (not v.value or v.value.startswith("${{ github.event.repository."))]
    return [variable for variable in VARIABLES if workflow in variable.where]
