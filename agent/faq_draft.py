"""``helpbot faq-draft``: helpbot's well-received answers (at least ``--min-up`` 👍 and no 👎 majority, rated as
``helpbot feedback`` rates them) become draft FAQ entries in the ``faq/`` format, without the participants' names,
through the egress guard; printed, written to ``--out DIR`` or opened as one ``--pr``. Private channels (unless
``HELPBOT_FAQ_PRIVATE``) and questions the FAQ or an earlier draft already asks are skipped and counted."""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

import httpx2
import yaml

from agent import faq_pr, guard
from agent.config import env_bool
from agent.errors import BadInput, UsageError
from agent.slack import ratings
from agent.slack.blocks import MD_LINK, SOURCES_TITLE
from agent.slack.markers import read as read_marker
from agent.slack.ratings import RatedAnswer, Scanner
from agent.slack.readback import read_answer
from mcp_lib import ids
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.config import ConfigError
from mcp_lib.core import ToolError
from mcp_lib.cutting import shorten_at_word, squash_whitespace
from mcp_lib.platforms import faq
from mcp_lib.platforms.slack.reading import NAME_LOOKUPS_FOR_S, person

QUESTION_CHARS = 200
# Slack's <…> end at ">" or at the end of the text: a "<@" left open was read to the end again from every later one
# (quadratic: a 40,000-character message of "<http:" took 5 s).
_MENTION = re.compile(r"<[@!][^>]*(?:>|\Z)")  # <@U123>, <!here>, <!subteam^S1|@team>
_CHANNEL = re.compile(r"<#[A-Z0-9]+(?:\|([^>]*))?(?:>|\Z)")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?(?:>|\Z)")
_ADDRESSED = re.compile(r"^\s*[^\s、,。]{1,12}(?:さん|様|くん|君|ちゃん)\s*[、,:：]?\s*")  # 田中さん、…
# Honorifics and titles a name is written with (田中部長, 鈴木さん); removed with the name.
_HONORIFICS = ("さん", "様", "さま", "くん", "君", "ちゃん", "氏", "殿", "先生", "先輩", "部長", "課長", "係長", "次長",
               "主任", "室長", "所長", "店長", "社長", "専務", "常務", "マネージャー", "リーダー", "san", "-san")
_HONORIFIC = "|".join(map(re.escape, _HONORIFICS))
_USER_ID = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?(?:>|\Z)")
_LINK_LINE = re.compile(r"\s*[-*•]\s*\[[^\]\n]*\]\((?P<url>[^)\s]+)\)\s*")  # a line that is only a link
_AT_NAME = re.compile(r"(?<![A-Za-z0-9@＠])[@＠][\w.\-]+")  # also in _@taro_ or 「@鈴木」; not in an address
_URL_OR_TARGET = re.compile(r"(https?://[^\s<>()]+|\]\([^)\s]*\))")  # captured: re.split keeps them


@dataclass
class Draft:
    id: str
    question: str
    answer: str
    sources: list[dict[str, str]]
    tags: list[str]
    permalink: str | None
    positive: int
    negative: int

    @property
    def file_name(self) -> str:
        return f"{self.id}.md"

    def render(self) -> str:
        """The entry file, through the egress guard (secrets, e-mail addresses, phone numbers masked)."""
        meta = yaml.safe_dump({"id": self.id, "question": self.question, "tags": self.tags}, allow_unicode=True,
                              sort_keys=False, width=10_000).strip()
        origin = f"# draft from a helpbot answer with 👍 {self.positive} / 👎 {self.negative}"
        lines = [self.answer.strip()]
        if self.sources:
            lines += ["", f"## {SOURCES_TITLE}", *(f"- [{s['title']}]({s['url']})" for s in self.sources)]
        return guard.markdown(f"---\n{origin}\n{meta}\n---\n" + "\n".join(lines) + "\n")


def names_of(user: Mapping[str, Any]) -> set[str]:
    """What the workspace calls a person (``users.info``'s ``user``): its and its profile's names, a real name also
    by its parts (「田中 太郎」: 田中, 太郎, 田中太郎)."""
    profile = user.get("profile")
    profile = profile if isinstance(profile, Mapping) else {}
    found: set[str] = set()
    for value in (user.get("real_name"), user.get("name"), profile.get("display_name"), profile.get("real_name")):
        if isinstance(value, str) and value.strip():
            parts = value.split()
            found |= {value.strip(), "".join(parts), *parts}
    return {name for name in found if len(name) >= (3 if name.isascii() else 2)}  # not 林, ``a`` or ``ok``


def _without_names(text: str, names: Iterable[str], gap: str = " ") -> str:
    """Every known name, with its honorific, out of ``text`` (longest first; an ASCII name only as a whole word)."""
    for name in sorted(set(names), key=len, reverse=True):
        body = rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])" if name.isascii() else re.escape(name)
        text = re.sub(rf"[@＠]?{body}(?:\s?(?:{_HONORIFIC}))?", gap, text, flags=re.IGNORECASE)
    return text


def clean_question(text: str, names: Iterable[str] = ()) -> str:
    """The asker's message as an FAQ question: no mentions, names (``names``: the participants' as the workspace
    knows them, wherever they stand; and a leading 「○○さん」) or links to people, one line, bounded."""
    text = _without_names(_MENTION.sub(" ", text), names)
    text = _CHANNEL.sub(lambda m: m.group(1) or "", text)
    text = _LINK.sub(lambda m: "" if m.group(1).startswith("mailto:") else (m.group(2) or m.group(1)), text)
    text = squash_whitespace(_AT_NAME.sub(" ", text))
    text = _ADDRESSED.sub("", text).strip()
    return shorten_at_word(text, QUESTION_CHARS)


class Drafter:
    """Turns qualifying answers into drafts, reading the questions through the same scanner."""

    def __init__(self, scanner: Scanner, index: faq.FaqIndex, *, private_ok: bool, now: datetime):
        self.scanner, self.index, self.private_ok, self.now = scanner, index, private_ok, now
        self.drafts: list[Draft] = []
        self._known: set[str] = set()  # the names of the participants of the thread at hand
        self._own: dict[str, bool] = {}  # link -> helpbot wrote the message

    def _read(self, channel: str, ts: str, root: str | None) -> tuple[Mapping[str, Any] | None, Mapping[str, Any]]:
        """Message ``ts`` of the thread of ``root`` and the thread's root (None, {}: no such message)."""
        data = self.scanner.call("conversations.replies", channel=channel, ts=root or ts, oldest=ts, latest=ts,
                                 inclusive=True, limit=2)  # the root comes first
        messages = data.get("messages") or []
        message = next((m for m in messages if m.get("ts") == ts), None)
        return message, messages[0] if message and messages[0].get("ts") == (root or ts) else message or {}

    def _question(self, answer: RatedAnswer) -> str:
        if not answer.question_ts:
            return ""
        message, root = self._read(answer.channel, answer.question_ts, answer.thread_ts)
        if not message:
            return ""
        text = str(message.get("text") or "")
        people = dict.fromkeys([message.get("user"), *(root.get("reply_users") or []), root.get("user"),
                                *answer.reactors, *_USER_ID.findall(text)])  # who asked, replied, rated, was named
        ctx = self.scanner.ctx
        ctx.client.names_again(ctx.clock.monotonic() + NAME_LOOKUPS_FOR_S)  # MAX_NAME_LOOKUPS each question
        self._known = {n for uid in people if isinstance(uid, str) and uid for n in self._names(uid)}
        return clean_question(text, self._known)

    def _names(self, user_id: str) -> set[str]:
        """The names the workspace knows for a participant (users.info, users:read, asked once); none if unknown."""
        user = person(self.scanner.ctx, user_id, patient=True)
        return set() if user.get("is_bot") else names_of(user)

    def _helpbots(self, url: str) -> bool:
        """``url`` links to a message helpbot wrote (an earlier answer a search found): no source for an FAQ entry."""
        if url not in self._own:
            try:
                link = ids.parse_permalink(url)
                self._own[url] = self.scanner.me.wrote(self._read(link.channel, link.ts, link.thread_ts)[0] or {})
            except (BadInput, ToolError):  # no message link, or one the bot cannot read
                self._own[url] = False
        return self._own[url]

    def _sources(self, text: str, sources: list[dict[str, str]]) -> tuple[str, list[dict[str, str]]]:
        """The text and sources as a draft lists them: each source once (under 参照元, not in the text's own link
        list), helpbot's messages not at all, no participant's name (URLs left whole: a name may be part of one)."""
        listed = {unquote(s["url"]) for s in sources if s.get("url")}
        kept = [line for line in text.split("\n")
                if not ((link := _LINK_LINE.fullmatch(line)) and unquote(link["url"]) in listed)]
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept))
        text = MD_LINK.sub(lambda m: m[1] if self._helpbots(m[2]) else m[0], text)
        pieces = _URL_OR_TARGET.split(text.strip())  # the URLs and link targets at the odd places
        text = "".join(piece if i % 2 else _without_names(piece, self._known, "") for i, piece in enumerate(pieces))
        unique = {unquote(s["url"]): s for s in sources if s.get("url") and not self._helpbots(s["url"])}
        return text, [{"title": squash_whitespace(_without_names(s["title"], self._known, "")) or s["url"],
                       "url": s["url"]} for s in unique.values()]

    def add(self, answer: RatedAnswer, parts: list[Mapping[str, Any]]) -> str | None:
        """The answer's draft added to :attr:`drafts`, or why it was skipped."""
        if not self.private_ok and not self.scanner.is_public(answer.channel):
            return "private channel"
        self._known = set()
        question = self._question(answer)  # and the participants' names (self._known)
        read = read_answer(parts)
        if not question or not read.text.strip():
            return "no question or answer text"
        if (existing := self.index.same_question(question)) is not None:
            return f"already in the FAQ ({existing.id})"
        if any(faq.FaqIndex([faq.Entry(d.id, d.question, d.tags, d.answer, d.file_name)]).same_question(question)
               for d in self.drafts):
            return "same question as another draft"
        marker = read_marker(parts[0]) if parts else None
        tags = list(marker.stats.tags) if marker else []
        key = hashlib.sha256(f"{answer.channel}/{answer.ts}".encode()).hexdigest()[:8]
        text, sources = self._sources(read.text, read.sources)
        draft = Draft(id=f"draft-{self.now:%Y%m%d}-{key}", question=question, answer=text, sources=sources,
                      tags=tags, permalink=answer.permalink, positive=answer.positive, negative=answer.negative)
        with tempfile.TemporaryDirectory(prefix="faq-draft-") as tmp:  # parsed as the faq tool parses its entries
            path = Path(tmp, draft.file_name)
            path.write_text(draft.render(), encoding="utf-8")
            try:
                faq.parse_entry(path)
            except ConfigError:
                return "not a valid FAQ entry"
        self.drafts.append(draft)
        return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    output = ratings.scan_arguments(parser)
    parser.add_argument("--min-up", type=int, default=2, metavar="N", help="👍 an answer needs (default 2)")
    output.add_argument("--out", type=Path, metavar="DIR", help="write one file per draft into DIR")
    output.add_argument("--pr", action="store_true", help="open one pull request with the drafts (HELPBOT_FAQ_PR_TOKEN "
                                                         "or GITHUB_TOKEN with contents and pull-requests write, "
                                                         "GITHUB_REPOSITORY)")


def run(args: argparse.Namespace, env: Mapping[str, str], *, clock: Clock = SYSTEM_CLOCK, out: IO[str] | None = None,
        github_transport: httpx2.BaseTransport | None = None) -> int:
    """The command with its seams: environment, clock (the retries sleep on it), output, GitHub's transport."""
    if args.min_up < 1:
        raise UsageError(f"helpbot faq-draft: --min-up must be at least 1, got {args.min_up}")
    if args.pr and guard.records_public(env):  # anyone reads it, before anyone reviewed it: as the artifact
        guard.err("helpbot faq-draft: no pull request: in a public repository the drafts (Slack questions and "
                  "answers) are not published unless HELPBOT_PUBLIC_RECORDS=true")
        return 0
    if args.out is not None and (problem := guard.unwritable(args.out, folder=True)):
        raise UsageError(f"helpbot faq-draft: --out: cannot write into {str(args.out)!r}: {problem}")
    _, now, since, channels = ratings.scan_window(args, env, "faq-draft", clock)
    private_ok = env_bool(env, "HELPBOT_FAQ_PRIVATE")
    pr_config = faq_pr.load_config(env) if args.pr else None
    index = faq.make_client(faq.load_config(env))

    def draft(scanner: Scanner) -> int:
        found = [pair for channel in channels for pair in scanner.scan(channel, since)]
        candidates = [(a, parts) for a, parts in found if a.positive >= args.min_up and a.negative <= a.positive]
        scanner.add_permalinks(a for a, _ in candidates)
        drafter = Drafter(scanner, index, private_ok=private_ok, now=now)
        why_skipped = Counter(filter(None, (drafter.add(answer, parts) for answer, parts in candidates)))
        skipped = ", ".join(f"{n} {why}" for why, n in why_skipped.most_common())
        summary = (f"helpbot faq-draft: {len(drafter.drafts)} drafts from {len(found)} answers ({len(candidates)} "
                   f"with ≥ {args.min_up} 👍 and no 👎 majority)" + (f"; skipped: {skipped}" if skipped else ""))
        if not drafter.drafts:
            guard.err(summary.replace("0 drafts", "nothing to draft: 0 drafts", 1))
            return 0
        files = {d.file_name: d.render() for d in drafter.drafts}
        if pr_config is not None:
            body = ["helpbot の回答のうち 👍 が多かったものから作った FAQ の下書きです。内容を確認し、"
                    "id・質問・タグを直してからマージしてください。", "", summary, ""]
            body += [f"- `{d.file_name}`: {d.question}" + (f" ([元の回答]({d.permalink}))" if d.permalink else "")
                     for d in drafter.drafts]
            with faq_pr.make_client(pr_config, github_transport) as client:
                url = faq_pr.PullRequestWriter(pr_config, client, clock).open(
                    f"helpbot/faq-drafts-{now:%Y%m%d-%H%M%S}", files,
                    f"FAQ drafts from helpbot answers ({len(files)})", guard.markdown("\n".join(body)))
            guard.out(f"{summary}\nhelpbot faq-draft: opened {url}", file=out)
        elif args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                guard.write_file(args.out / name, text)
            guard.out(f"{summary}\nhelpbot faq-draft: wrote {len(files)} files to {args.out}", file=out)
        else:
            guard.out("\n".join([summary, *(f"\n==> {name}\n{text}" for name, text in files.items())]), file=out)
        return 0

    return ratings.slack_command(env, "faq-draft", draft, clock=clock)


def main(args: argparse.Namespace) -> int:
    return run(args, dict(os.environ))
