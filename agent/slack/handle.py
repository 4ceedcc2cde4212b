"""The front's one handle on Slack: the platform's clients, the registry the agent's tools use (the same clients),
who helpbot is, and the one read path (the Slack platform's retries and error messages). Writes go through
:class:`agent.slack.post.SlackOut` on ``Slack.writer``. slack-sdk is imported inside: ``--help`` never loads it."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from agent.errors import ConfigError, RunFailed
from agent.slack.markers import Me
from mcp_lib.clock import Clock

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from mcp_lib import Registry, ToolContext
    from mcp_lib.platforms.slack import SlackClients

T = TypeVar("T")
THREAD_PAGES = 5  # x 200 messages: enough for any real thread, bounded for a runaway one


@dataclass
class Thread:
    channel: str
    root: str
    target: dict[str, Any]  # the reacted message
    messages: list[dict[str, Any]]  # parent first, then replies, with metadata


class Slack:
    """Slack as the front sees it; ``answer_channel`` is where the answer goes (its privacy rule for the tools),
    ``need_bot``: the run posts, so the bot token is required."""

    def __init__(self, env: Mapping[str, str], *, answer_channel: str, need_bot: bool, clock: Clock,
                 configured_user_id: str | None = None):
        from agent import guard
        from mcp_lib import Caller, Registry
        from mcp_lib.platforms import slack
        from mcp_lib.platforms.slack.client import web_client

        config = slack.load_config(env)
        if config is None or (need_bot and config.bot_token is None):
            raise ConfigError("SLACK_BOT_TOKEN", "not set; helpbot answer reads the thread and posts with the "
                                                 "bot token (xoxb-)")
        self.clients: SlackClients = slack.make_client(config)
        self.registry: Registry = Registry(env, caller=Caller(answer_channel=answer_channel),
                                           clients={"slack": self.clients}, clock=clock, server_log=guard.server_err)
        self.ctx: ToolContext = self.registry.context("slack")
        self.bot: WebClient | None = self.clients.bot  # reads (with the platform's retries); None without a token
        # Writes: the same token, no retry handlers -- agent.slack.post retries them within the run's budget.
        self.writer: WebClient | None = (web_client(config, config.bot_token, retry_handlers=[])
                                         if config.bot_token is not None else None)
        self._configured_user_id = configured_user_id
        self._me: Me | None = None
        self._ahead: dict[object, Future[Any]] = {}

    def call(self, api: str, **params: Any) -> dict[str, Any]:
        """One read; rejected credentials are ConfigError (exit 2), anything else a one-line RunFailed (exit 1)."""
        from mcp_lib.platforms import slack

        return self._read(lambda: slack.call(self.ctx, api, **params))

    def _read(self, read: Callable[[], T]) -> T:
        from mcp_lib.core import CredentialsError, ToolError

        try:
            return read()
        except CredentialsError as exc:
            raise ConfigError(self.clients.reader().variable, str(exc)) from None
        except ToolError as exc:
            raise RunFailed(str(exc)) from None

    def read_ahead(self, channel: str, ts: str, *, thread_if: Callable[[Mapping[str, Any]], bool]) -> None:
        """Who helpbot is and the channel's info asked at once, the thread as soon as the info says ``thread_if``
        (two round trips to Slack before 👀, not three; a thread that may not be read is not). :attr:`me`,
        :meth:`channel` and :meth:`thread` then take them, each raising its own error in the order the front asks."""
        from mcp_lib.core import in_background

        if self.bot is not None and self.clients.auth is None:
            self._ahead["auth"] = in_background(self._whoami, "helpbot-slack-read")
        info = self._ahead[("channel", channel)] = in_background(lambda: self._channel(channel), "helpbot-slack-read")

        def thread() -> Thread:
            if not thread_if(info.result()):  # fails closed: a caller that asks anyway reads nothing
                raise RunFailed(f"the thread of {channel}/{ts} may not be read")
            return self._thread(channel, ts)

        self._ahead[("thread", channel, ts)] = in_background(thread, "helpbot-slack-read")

    def _taken(self, key: object, read: Callable[[], T]) -> T:
        """What :meth:`read_ahead` started for ``key`` (taken once: a later read asks anew), else ``read()``."""
        ahead = self._ahead.pop(key, None)
        return read() if ahead is None else ahead.result()

    @property
    def me(self) -> Me:
        """Who helpbot is (``auth.test``, once); a dry run without a bot token has only HELPBOT_BOT_USER_ID."""
        if self._me is None:
            who = self.auth() if self.bot is not None else {}
            self._me = Me(who.get("user_id"), who.get("bot_id"), self._configured_user_id, who.get("team_id"))
        return self._me

    def auth(self) -> dict[str, Any]:
        """``auth.test`` (once, :func:`mcp_lib.platforms.slack.whoami`): who helpbot is, and its home team."""
        return self._taken("auth", self._whoami)

    def _whoami(self) -> dict[str, Any]:
        from mcp_lib.platforms import slack

        return self._read(lambda: slack.whoami(self.ctx))

    def channel(self, channel: str) -> dict[str, Any]:
        """The channel's info (name, privacy); only its id when it cannot be looked up -- the message still can."""
        return self._taken(("channel", channel), lambda: self._channel(channel))

    def _channel(self, channel: str) -> dict[str, Any]:
        from mcp_lib.core import ToolError
        from mcp_lib.platforms import slack

        try:
            return slack.channel_info(self.ctx, channel)
        except ToolError:
            return {"id": channel, "name": channel}

    def thread(self, channel: str, ts: str) -> Thread:
        """The message and its whole thread (parent first), metadata included, pagination bounded."""
        return self._taken(("thread", channel, ts), lambda: self._thread(channel, ts))

    def _thread(self, channel: str, ts: str) -> Thread:
        def replies(of: str) -> list[dict[str, Any]]:
            return list(pages(self.call, "conversations.replies", limit=200, max_pages=THREAD_PAGES, channel=channel,
                              ts=of))

        messages = replies(ts)
        target = next((m for m in messages if m.get("ts") == ts), None)
        if target is None:
            raise RunFailed(f"message {channel}/{ts} not found (deleted, or not visible to helpbot)")
        root = str(target.get("thread_ts") or ts)
        if root != ts and messages[0].get("ts") != root:  # asked by a reply ts: from the root
            messages = replies(root)
        return Thread(channel=channel, root=root, target=target, messages=messages)

    def user(self, user: str) -> dict[str, Any]:
        """users.info's user (once per run: the tools' names take it too)."""
        from mcp_lib.platforms import slack

        return self._read(lambda: slack.user_info(self.ctx, user))

    def plain(self, message: Mapping[str, Any]) -> str:
        """A message's text as plain text (mentions, links and channel references resolved)."""
        from mcp_lib.platforms import slack

        return slack.plain(self.ctx, str(message.get("text") or ""))


def pages(call: Callable[..., dict[str, Any]], api: str, *, limit: int, max_pages: int | None = None,
          **params: Any) -> Iterator[dict[str, Any]]:
    """The messages of a paged history or replies read, metadata included."""
    cursor = None
    for _ in range(max_pages) if max_pages is not None else itertools.count():
        data = call(api, limit=limit, include_all_metadata=True, cursor=cursor, **params)
        yield from data.get("messages") or []
        cursor = data["response_metadata"].get("next_cursor")
        if not cursor:
            return


def is_public(info: Mapping[str, Any]) -> bool:
    """Public only when Slack said so: a channel whose info could not be read counts as private."""
    from mcp_lib.platforms import slack

    return "is_private" in info and not (slack.is_dm(info) or slack.is_private(info))

