"""How helpbot marks its own messages in a thread (Slack message metadata): written and read here only.

A marker names its question and the ``run`` that posted it; an answer's also carries its numbers and its buttons'
``votes``. It counts only on a message helpbot wrote (any app can attach any metadata); readers accept every
``version`` and tolerate garbage (:mod:`mcp_lib.payload`). Stdlib only, as that is: help.yml runs ``python -m
agent.slack.markers failure --channel C --ts TS`` for a notice's metadata when the run broke before helpbot was
installed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp_lib.payload import count, number

MarkerKind = Literal["answer", "progress", "failure"]
EVENT_TYPES: dict[MarkerKind, str] = {"answer": "helpbot_answer", "progress": "helpbot_progress",
                                "failure": "helpbot_failure"}
_KINDS: dict[str, MarkerKind] = {event_type: kind for kind, event_type in EVENT_TYPES.items()}
VERSION = 1
Vote = Literal["+1", "-1"]  # a feedback button's vote, stored as the reaction it counts as (👍, 👎)
VOTES: tuple[Vote, ...] = ("+1", "-1")
MAX_VOTES = 500  # voters one answer keeps: a message's metadata is bounded


@dataclass(frozen=True)
class Me:
    """Who helpbot is (``auth.test``'s ids, HELPBOT_BOT_USER_ID): the one answer to "did helpbot write this?"."""

    user_id: str | None = None
    bot_id: str | None = None
    configured_user_id: str | None = None
    team_id: str | None = None  # the workspace (a streamed reply's recipient_team_id)

    def wrote(self, message: Mapping[str, Any]) -> bool:
        return bool(self.bot_id and message.get("bot_id") == self.bot_id) or self.is_me(message.get("user"))

    def is_me(self, user: str | None) -> bool:
        """``user`` (a reaction's or a message's author) is helpbot."""
        return bool(user) and user in (self.user_id, self.configured_user_id)


@dataclass(frozen=True)
class AnswerStats:
    """An answer's numbers in its marker (tool names as written: a reader shows only registered ones)."""

    rounds: int = 0
    tool_calls: int = 0
    tools: tuple[str, ...] = ()  # distinct, in the order first used
    sources: int = 0
    cost_usd: float | None = None
    degraded: bool = False
    tags: tuple[str, ...] = ()
    parts: int = 1

    def fields(self) -> dict[str, Any]:
        """For :func:`metadata` (None and empty fields are left out)."""
        return {"rounds": self.rounds, "tool_calls": self.tool_calls, "tools": ",".join(self.tools),
                "sources": self.sources, "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
                "degraded": self.degraded, "parts": self.parts, "tags": ",".join(self.tags) or None}


@dataclass(frozen=True)
class Marker:
    """A marker read back from a message."""

    kind: MarkerKind
    question_ts: str | None
    question_channel: str | None
    payload: Mapping[str, Any]

    @property
    def parts(self) -> int:
        """How many messages make up the answer (at least its first)."""
        return max(1, count(self.payload.get("parts")))

    @property
    def run(self) -> str | None:
        run = self.payload.get("run")
        return str(run) if run else None

    @property
    def votes(self) -> dict[str, Vote]:
        """An answer's feedback-button votes: the voter's user id -> 👍 or 👎 (anything else is no vote)."""
        raw = self.payload.get("votes")
        return {str(user): vote for user, vote in raw.items() if vote in VOTES} if isinstance(raw, dict) else {}

    @property
    def stats(self) -> AnswerStats:
        def names(key: str) -> tuple[str, ...]:
            value = self.payload.get(key)
            return tuple(n for n in value.split(",") if n) if isinstance(value, str) else ()

        get = self.payload.get
        return AnswerStats(rounds=count(get("rounds")), tool_calls=count(get("tool_calls")), tools=names("tools"),
                           sources=count(get("sources")), cost_usd=number(get("cost_usd")),
                           degraded=get("degraded") is True, tags=names("tags"), parts=self.parts)


def metadata(kind: MarkerKind, *, channel: str | None, question_ts: str | None, **fields: Any) -> dict[str, Any]:
    """The ``metadata`` of a message of this kind (None fields are left out)."""
    payload = {"version": VERSION, "question_channel": channel, "question_ts": question_ts, **fields}
    return {"event_type": EVENT_TYPES[kind], "event_payload": {k: v for k, v in payload.items() if v is not None}}


def voted(marker: Marker, user: str, vote: Vote) -> dict[str, Any]:
    """An answer's metadata with ``user``'s vote: one per person, a later click replaces the earlier one."""
    return {"event_type": EVENT_TYPES["answer"],
            "event_payload": {**marker.payload, "votes": {**marker.votes, user: vote}}}


def stamped(payload: Mapping[str, Any], run: str) -> dict[str, Any]:
    """``payload`` (helpbot's, with its marker) naming ``run`` too, so this run can find its own message again."""
    data = payload["metadata"]
    return {**payload, "metadata": {**data, "event_payload": {**data["event_payload"], "run": run}}}


def read(message: Mapping[str, Any]) -> Marker | None:
    """The marker a message carries, whoever wrote it (use :func:`ours` to trust it)."""
    data = message.get("metadata")
    data = data if isinstance(data, dict) else {}
    kind = _KINDS.get(str(data.get("event_type")))
    if kind is None:
        return None
    payload = data.get("event_payload")
    payload = payload if isinstance(payload, dict) else {}
    ts, channel = payload.get("question_ts"), payload.get("question_channel")
    return Marker(kind, str(ts) if ts else None, str(channel) if channel else None, payload)


def ours(message: Mapping[str, Any], me: Me) -> Marker | None:
    """The marker of a message helpbot wrote; None for anyone else's, whatever its metadata says."""
    return read(message) if me.wrote(message) else None


def find_answer(messages: Iterable[Mapping[str, Any]], question_ts: str, channel: str | None = None, *,
                me: Me) -> Mapping[str, Any] | None:
    """helpbot's answer to ``question_ts`` among thread messages (fetched with include_all_metadata)."""
    return next((m for m in messages if (marker := ours(m, me)) is not None and marker.kind == "answer"
                 and marker.question_ts == question_ts
                 and (channel is None or marker.question_channel in (None, channel))), None)


def of_run(messages: Iterable[Mapping[str, Any]], question_ts: str, run: str, kind: MarkerKind, *, me: Me) -> list[str]:
    """The ts of helpbot's messages of ``kind`` for ``question_ts`` that ``run`` posted, oldest first."""
    return [str(m.get("ts")) for m in messages if (marker := ours(m, me)) is not None and marker.kind == kind
            and marker.question_ts == question_ts and marker.run == run]


def answers_in_sequence(messages: Sequence[Mapping[str, Any]], me: Me
                        ) -> list[tuple[Marker, Mapping[str, Any], list[Mapping[str, Any]]]]:
    """helpbot's answers among thread messages: (marker, first message, its parts -- helpbot's next messages
    without a marker, people's replies in between skipped, up to the ``parts`` the marker names)."""
    found = []
    for index, message in enumerate(messages):
        marker = ours(message, me)
        if marker is None or marker.kind != "answer":
            continue
        parts = [message]
        for later in messages[index + 1:]:
            if len(parts) >= marker.parts:
                break
            if not me.wrote(later):
                continue
            if read(later) is not None:
                break  # helpbot's next answer, placeholder or failure notice
            parts.append(later)
        found.append((marker, message, parts))
    return found


STALE_AFTER_S = 900.0  # a placeholder older than the longest run (Actions timeout-minutes: 15) is a dead run's


@dataclass(frozen=True)
class Claim:
    """What a run learns from the thread after posting its placeholder: the thread is the lock."""

    won: bool
    earlier: list[str]  # ts of placeholders and notices of dead or finished runs for this question (to clean up)
    reason: str = ""  # why the run lost


def claim(messages: Iterable[Mapping[str, Any]], question_ts: str, mine: str, me: Me, *, run: str,
          count_answers: bool = True) -> Claim:
    """Whether the run whose placeholder is ``mine`` answers ``question_ts``: the oldest live placeholder wins
    (Slack's ts order is the same for every reader), and an answer posted meanwhile (unless ``--force``). The
    winner cleans up the ``earlier`` ones: dead runs' placeholders (older than STALE_AFTER_S), failure notices,
    and this ``run``'s own placeholders whose post was retried after Slack took it."""
    rival = False
    earlier: list[str] = []
    for message in messages:
        marker = ours(message, me)
        ts = str(message.get("ts") or "")
        if marker is None or marker.question_ts != question_ts or ts == mine:
            continue
        if marker.kind == "progress" and marker.run == run:
            earlier.append(ts)
            continue
        age = float(mine) - float(ts)
        if marker.kind == "answer" and count_answers and age > 0:
            return Claim(False, [], f"message {question_ts} was answered meanwhile (answer {ts})")
        if marker.kind == "progress" and age < STALE_AFTER_S:
            rival = rival or age > 0
        elif marker.kind in ("progress", "failure") and age > 0:
            earlier.append(ts)
    return Claim(False, [], "another run is answering") if rival else Claim(True, earlier)


def main(argv: list[str] | None = None) -> int:
    """``python -m agent.slack.markers failure --channel C --ts TS``: the notice's metadata as JSON."""
    parser = argparse.ArgumentParser(prog="python -m agent.slack.markers")
    parser.add_argument("kind", choices=["failure"])
    parser.add_argument("--channel", required=True)
    parser.add_argument("--ts", required=True)
    args = parser.parse_args(argv)
    print(json.dumps(metadata(args.kind, channel=args.channel, question_ts=args.ts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
