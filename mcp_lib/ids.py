"""Slack ids, message timestamps and message links (permalinks), defined once; every check a whole-value
``fullmatch``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlparse

from .errors import BadInput

CHANNEL_RE = re.compile(r"[CGD][A-Z0-9]{2,20}")
USER_RE = re.compile(r"[UWB][A-Z0-9]{2,20}")
TS_RE = re.compile(r"\d{10}\.\d{6}")
TEAM_RE = re.compile(r"[TE][A-Z0-9]{2,20}")  # a workspace (T…) or an Enterprise Grid organisation (E…)
SLACK_HOSTS = ("slack.com", "slack-gov.com")
_PERMALINK_PATH_RE = re.compile(r"/archives/([^/]+)/p(\d{16})/?")


def is_channel_id(value: str) -> bool:
    """A Slack conversation id (``C…``, ``G…``, ``D…``), the whole value."""
    return CHANNEL_RE.fullmatch(value) is not None


def is_dm_id(channel: str) -> bool:
    """A direct message by its id alone (group DMs have C/G ids: only conversations.info tells them)."""
    return channel.startswith("D")


def is_ts(value: str) -> bool:
    """A Slack message timestamp like ``1700000000.123456``."""
    return TS_RE.fullmatch(value) is not None


@dataclass(frozen=True)
class Permalink:
    channel: str
    ts: str
    thread_ts: str | None = None


def parse_permalink(url: str, where: str = "url") -> Permalink:
    """``https://x.slack.com/archives/C123/p1700000000123456?thread_ts=1700000000.000100&cid=C123``; anything
    else is one BadInput line naming ``where`` and the URL, and saying what is wrong (a trigger's exit 2)."""

    def bad(problem: str) -> BadInput:
        return BadInput(f"{where} {url[:200]!r} {problem}")

    try:
        parsed = urlparse(url.strip())
    except ValueError:  # an unclosed [ in the host
        raise bad("is not a URL") from None
    host = (parsed.hostname or "").rstrip(".")  # lower-case already
    if parsed.scheme != "https" or not any(host == base or host.endswith("." + base) for base in SLACK_HOSTS):
        raise bad("is not a Slack message link (https://WORKSPACE.slack.com/archives/...)")
    match = _PERMALINK_PATH_RE.fullmatch(parsed.path)
    if not match:
        raise bad("is not a Slack message link; expected /archives/CHANNEL/pTIMESTAMP")
    channel, digits = match.groups()
    if not is_channel_id(channel):
        raise bad(f"has channel {channel[:80]!r}, not a Slack channel ID like C0123456789")
    query = parse_qs(parsed.query)
    thread_ts = query.get("thread_ts", [None])[0]  # parse_qs drops blank values
    if thread_ts is not None and not is_ts(thread_ts):
        raise bad(f"has thread_ts {thread_ts[:80]!r}, not a Slack timestamp like 1700000000.123456")
    cid = query.get("cid", [None])[0]
    if cid is not None and cid != channel:
        raise bad(f"whose cid {cid[:80]!r} disagrees with the channel {channel!r}")
    return Permalink(channel=channel, ts=f"{digits[:10]}.{digits[10:]}", thread_ts=thread_ts)


def permalink(workspace_url: str, channel: str, ts: str, thread_ts: str | None = None) -> str:
    """The link to a message, as Slack writes it (``workspace_url`` from ``auth.test``, ending in ``/``)."""
    link = f"{workspace_url.removesuffix('/')}/archives/{channel}/p{ts.replace('.', '')}"
    if thread_ts and thread_ts != ts:
        link += f"?thread_ts={thread_ts}&cid={channel}"
    return link
