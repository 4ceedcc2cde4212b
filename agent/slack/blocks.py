"""Everything helpbot posts to Slack, as ready-to-send payloads: placeholder, progress, answer, failure notice.

A payload is ``{"text": fallback, "blocks": [...], "metadata"?: {...}}`` and goes unchanged to
``chat_postMessage(channel=, thread_ts=, **payload, **POST_OPTIONS)`` or ``chat_update(channel=, ts=, **payload)``.

- The answer (markdown from Claude) goes into ``markdown`` blocks. Slack allows 12,000 characters of markdown
  per payload, cumulative; a longer answer is split into several payloads at paragraph, then line, then
  sentence boundaries, and never inside a code block without closing the fence and reopening it (same info
  string) in the next part. Lengths are counted in UTF-16 code units: that is what Slack's limits count, it is
  never less than the number of code points, and a Japanese character counts as one (not three UTF-8 bytes).
- Every string that leaves here has passed :func:`guard_public`: secrets and (unless configured otherwise)
  e-mail addresses and phone numbers are masked, and @channel/@here broadcasts are defused.
- The first answer payload carries message metadata (``event_type: helpbot_answer``) naming the question it
  answers; :func:`find_answer` recognises it in ``conversations.replies(..., include_all_metadata=True)`` --
  but only on a message helpbot itself wrote: any app can attach metadata of any event type.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlparse

from mcp_lib.config import env_bool, env_str
from mcp_lib.redact import redact_personal, redact_secrets

MARKDOWN_LIMIT = 12_000  # per payload, all markdown blocks together
MAX_ANSWER_PARTS = 5  # a runaway answer must not flood the thread
MAX_SOURCES = 15
MAX_TITLE_CHARS = 150
MAX_SOURCES_CHARS = 4_000
FALLBACK_CHARS = 600
METADATA_EVENT_TYPE = "helpbot_answer"
FAILURE_EVENT_TYPE = "helpbot_failure"
METADATA_VERSION = 1

SECTION_LIMIT = 3_000  # the text of one section block
SOURCES_TITLE = "参照元"
SOURCES_HEADING = f"**{SOURCES_TITLE}**"  # how the sources block starts; thread.split_sources reads it back

PLACEHOLDER = "調べています…"
FEEDBACK_LINE = "役に立ちましたか？ 👍 / 👎 のリアクションで教えてください。"
DEGRADED_LABEL = (
    "> ⚠️ **AIによる回答ではありません。** AIモデルを利用できなかったため、"
    "質問で検索した結果の上位をそのまま載せています。"
)
TRUNCATED_NOTE = "\n\n…（回答が長すぎるため、以降を省略しました）"
POST_OPTIONS = {"unfurl_links": False, "unfurl_media": False}  # many source links must not unfurl

PLATFORM_LABELS = {"faq": "FAQ", "slack": "Slack", "redmine": "Redmine", "github": "GitHub", "growi": "Growi"}


def slack_len(text: str) -> int:
    """Length as Slack counts it (UTF-16 code units): one per Japanese character, two per emoji."""
    return len(text.encode("utf-16-le")) // 2


# -- the public guard -------------------------------------------------------------------------------------------
_BROADCAST_TAG = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>|<!subteam\^[A-Z0-9]+(?:\|@?([^>]*))?>")
_BROADCAST_WORD = re.compile(r"(?<![\w@＠])@(here|channel|everyone)\b")


def guard_public(text: str, mask_personal: bool = True) -> str:
    """The last step before anything is posted: mask secrets and personal data, defuse broadcasts."""
    text = redact_secrets(text)
    if mask_personal:
        text = redact_personal(text)
    text = _BROADCAST_TAG.sub(lambda m: "＠" + (m.group(1) or m.group(2) or "team"), text)
    return _BROADCAST_WORD.sub(lambda m: "＠" + m.group(1), text)


def mask_personal_from_env(env: Mapping[str, str]) -> bool:
    """``HELPBOT_MASK_PERSONAL=false`` turns off e-mail/phone masking (secrets are always masked)."""
    return env_bool(env, "HELPBOT_MASK_PERSONAL", True)


def run_url(env: Mapping[str, str]) -> str | None:
    """Link to this Actions run, when running in Actions."""
    server, repo, run_id = (env_str(env, k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if not (server and repo and run_id):
        return None
    return f"{server.rstrip('/')}/{repo}/actions/runs/{run_id}"


# -- splitting ----------------------------------------------------------------------------------------------------
_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_SENTENCE_END = re.compile(r"[。！？!?]|[.;:,、，](?=\s)|\s")


@dataclass
class _Segment:
    """A paragraph, a fenced code block or a table: split only inside, repeating ``head``/``tail``."""

    lines: list[str]
    head: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.head + self.lines + self.tail)


def _segments(text: str) -> list[_Segment]:
    segments: list[_Segment] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            if len(para) >= 2 and para[0].lstrip().startswith("|") and _TABLE_RULE.match(para[1]):
                segments.append(_Segment(para[2:], head=para[:2]))
            else:
                segments.append(_Segment(list(para)))
            para.clear()

    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        opener = _FENCE_OPEN.match(line)
        if opener and not (opener.group(1)[0] == "`" and "`" in opener.group(2)):
            flush()
            fence = opener.group(1)
            body: list[str] = []
            i += 1
            closing = None
            while i < len(lines):
                stripped = lines[i].strip()
                if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                    closing = lines[i]
                    break
                body.append(lines[i])
                i += 1
            # An unterminated fence (the model stopped mid-block) is closed, so every part stays balanced.
            indent = line[: len(line) - len(line.lstrip())]
            segments.append(_Segment(body, head=[line], tail=[closing if closing is not None else indent + fence]))
            i += 1
            continue
        if line.strip():
            para.append(line)
        else:
            flush()
        i += 1
    flush()
    return segments


def _unbreakable_before(text: str, pos: int) -> bool:
    """True where a cut at ``pos`` would separate a character from its combining mark / ZWJ / modifier."""
    if pos <= 0 or pos >= len(text):
        return False
    nxt, prev = text[pos], text[pos - 1]
    return (
        unicodedata.combining(nxt) != 0
        or unicodedata.category(nxt) in ("Mn", "Me")
        or nxt in "\u200d\ufe0e\ufe0f" or prev == "\u200d"
        or 0x1F3FB <= ord(nxt) <= 0x1F3FF  # skin tones
        or 0xE0020 <= ord(nxt) <= 0xE007F  # tag sequences (flags)
    )


def _hard_split(line: str, budget: int) -> list[str]:
    """Cut one over-long line: after a sentence end or a space when possible, never inside a grapheme."""
    pieces = []
    while slack_len(line) > budget:
        end, used = 0, 0
        while end < len(line) and used + slack_len(line[end]) <= budget:
            used += slack_len(line[end])
            end += 1
        window_start = max(1, end * 6 // 10)
        best = None
        for match in _SENTENCE_END.finditer(line, window_start, end):
            best = match.end()
        cut = best if best and best > 0 else end
        while cut > 1 and _unbreakable_before(line, cut):
            cut -= 1
        pieces.append(line[:cut].rstrip())
        line = line[cut:].lstrip() if best else line[cut:]
    pieces.append(line)
    return [p for p in pieces if p]


def _split_segment(segment: _Segment, limit: int, first_limit: int | None = None) -> list[str]:
    """The segment whole if it fits, else pieces of at most ``limit`` (the first at most ``first_limit``)."""
    whole = segment.text()
    if slack_len(whole) <= limit:
        return [whole]
    frame = slack_len("\n".join([*segment.head, ""])) + slack_len("\n".join(["", *segment.tail]))
    budget = max(limit - frame, 1)
    lines: list[str] = []
    for line in segment.lines:
        lines += _hard_split(line, budget) if slack_len(line) > budget else [line]
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    room = budget if first_limit is None else first_limit - frame
    for line in lines:
        cost = slack_len(line) + (1 if current else 0)
        if used + cost > room:
            if current:
                pieces.append("\n".join(segment.head + current + segment.tail))
            current, used, room = [], 0, budget
            cost = slack_len(line)
        current.append(line)
        used += cost
    if current or not pieces:
        pieces.append("\n".join(segment.head + current + segment.tail))
    return pieces


def split_markdown(text: str, limit: int = MARKDOWN_LIMIT) -> list[str]:
    """Split markdown into parts of at most ``limit`` UTF-16 units, each with balanced code fences.

    A paragraph, code block or table that fits in a part is never cut; one that does not fit in any part
    is cut at line (then sentence) boundaries, its first piece filling what is left of the current part.
    """
    if limit < 40:
        raise ValueError("limit too small to split markdown sensibly")
    parts: list[str] = []
    current = ""
    for segment in _segments(text):
        room = limit - slack_len(current) - 2 if current else limit
        for piece in _split_segment(segment, limit, room if room >= limit // 4 else None):
            candidate = f"{current}\n\n{piece}" if current else piece
            if slack_len(candidate) <= limit:
                current = candidate
            else:
                parts.append(current)
                current = piece
    if current or not parts:
        parts.append(current)
    return parts


# -- pieces of a message ------------------------------------------------------------------------------------------
def _markdown_block(text: str) -> dict[str, Any]:
    return {"type": "markdown", "text": text}


def _context_block(*texts: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": t} for t in texts]}


def mrkdwn_escape(text: str) -> str:
    """Slack's control characters in mrkdwn/plain ``text`` (stops ``<!here>``-style injections too)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_MD_LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]+)\)")
_MD_NOISE = re.compile(r"(\*\*|__|^#{1,6}\s+|^>\s?|^\s*(```|~~~)\S*\s*$)", re.M)


def plain_fallback(markdown: str, limit: int = FALLBACK_CHARS) -> str:
    """The ``text`` that notifications and screen readers use: roughly de-marked-up, escaped, short."""
    text = _MD_LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})", markdown)
    text = _MD_NOISE.sub("", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    if slack_len(text) > limit:
        text = _hard_split(text, limit - 1)[0] + "…"
    return mrkdwn_escape(text)


def _safe_url(url: str) -> str | None:
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return None
    return quote(url.strip(), safe=":/?#@!$&'*+,;=%-._~[]")  # spaces, parentheses and <> encoded


def _title(title: str) -> str:
    title = " ".join(title.split()).replace("[", "［").replace("]", "］")
    if len(title) > MAX_TITLE_CHARS:
        title = title[: MAX_TITLE_CHARS - 1] + "…"
    return title or "(無題)"


def sources_markdown(sources: Iterable[Mapping[str, Any]]) -> str:
    """「参照元」 with each title linked, de-duplicated by URL, bounded in count and length."""
    seen: set[str] = set()
    lines: list[str] = []
    left_out = 0
    for source in sources:
        url = str(source.get("url") or "")
        safe = _safe_url(url) if url else None
        key = safe or url or str(source.get("title"))
        if key in seen:
            continue
        seen.add(key)
        title = _title(str(source.get("title") or url or ""))
        line = f"- [{title}]({safe})" if safe else f"- {title}"
        if len(lines) >= MAX_SOURCES or slack_len("\n".join([*lines, line])) > MAX_SOURCES_CHARS:
            left_out += 1
            continue
        lines.append(line)
    if not lines:
        return ""
    if left_out:
        lines.append(f"- ほか {left_out} 件")
    return f"{SOURCES_HEADING}\n" + "\n".join(lines)


def platform_label(tool_name: str) -> str:
    """``slack_searchMessages`` -> ``Slack``; unknown prefixes (external MCP servers) are shown as they are."""
    prefix = tool_name.split("_", 1)[0]
    return PLATFORM_LABELS.get(prefix, prefix)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def format_cost(cost_usd: float) -> str:
    if cost_usd < 0.001:
        return "<$0.001"
    return f"${cost_usd:.2f}" if cost_usd >= 1 else f"${cost_usd:.3f}"


def footer_text(*, rounds: int, tool_names: Sequence[str], cost_usd: float | None, degraded: bool,
                run_link: str | None, tags: Sequence[str] = ()) -> str:
    """One small line: rounds, tools, the question's tags, estimated cost, link to the Actions run (mrkdwn, for
    a context block)."""
    parts = []
    if degraded:
        parts.append("検索のみ（AI生成ではありません）")
    else:
        parts.append(f"ラウンド {rounds}")
    platforms = _unique(platform_label(n) for n in tool_names)
    tools = f"ツール {len(tool_names)} 回"
    parts.append(f"{tools}（{'・'.join(platforms)}）" if platforms else tools)
    if tags:
        parts.append(f"タグ {'・'.join(tags)}")
    if cost_usd is not None and not degraded:
        parts.append(f"推定コスト {format_cost(cost_usd)}")
    text = mrkdwn_escape(" ・ ".join(parts))
    if run_link and _safe_url(run_link):
        text += f" ・ <{_safe_url(run_link)}|実行ログ>"
    return text


# -- payloads -----------------------------------------------------------------------------------------------------
def placeholder_payload() -> dict[str, Any]:
    return {"text": PLACEHOLDER, "blocks": [_context_block(f":hourglass_flowing_sand: {PLACEHOLDER}")]}


def progress_text(round_no: int, max_rounds: int, tool_names: Sequence[str] = ()) -> str:
    """「調べています…（ラウンド 2/10：Slack・Redmine を検索中）」."""
    platforms = _unique(platform_label(n) for n in tool_names)
    detail = f"ラウンド {round_no}/{max_rounds}"
    if platforms:
        detail += f"：{'・'.join(platforms)} を検索中"
    return f"{PLACEHOLDER}（{detail}）"


def progress_payload(round_no: int, max_rounds: int, tool_names: Sequence[str] = ()) -> dict[str, Any]:
    text = guard_public(progress_text(round_no, max_rounds, tool_names))
    return {"text": mrkdwn_escape(text),
            "blocks": [_context_block(f":hourglass_flowing_sand: {mrkdwn_escape(text)}")]}


_URL = re.compile(r"\(?(?:url: )?https?://\S+")


def failure_payload(what: str, run_link: str | None = None, *, channel: str | None = None,
                    question_ts: str | None = None) -> dict[str, Any]:
    """The notice that replaces silence: what failed (one line, no URLs: the run log has the details), and where
    to look."""
    what = " ".join(_URL.sub("", guard_public(what)).split()) or "不明なエラー"
    if slack_len(what) > 300:
        what = _hard_split(what, 299)[0] + "…"
    text = f":warning: 回答を作成できませんでした（{mrkdwn_escape(what)}）。"
    safe = _safe_url(run_link) if run_link else None
    if safe:
        text += f" 詳細は<{safe}|実行ログ>を確認してください。"
    else:
        text += " 時間をおいて、もう一度リアクションしてください。"
    payload: dict[str, Any] = {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                                                      "text": text}}]}
    if question_ts:
        payload["metadata"] = {"event_type": FAILURE_EVENT_TYPE,
                               "event_payload": _drop_none({"question_channel": channel,
                                                            "question_ts": question_ts,
                                                            "version": METADATA_VERSION})}
    return payload


def question_payload(question: str, actor: str | None = None, *, limit: int = SECTION_LIMIT) -> dict[str, Any]:
    """A free question (workflow_dispatch) reposted as the thread root: escaped, so ``<url|label>`` cannot become a
    disguised link or a broadcast, and split into section blocks of at most ``limit`` characters (Slack's 3,000
    per section; the question itself may have up to 4,000)."""
    head = f"❓ *質問*（GitHub Actions から{f'・{mrkdwn_escape(actor)}' if actor else ''}）"
    lines = [mrkdwn_escape(line) for line in question.strip().splitlines() if line.strip()] or ["（本文なし）"]
    quoted = "\n".join(f">{line}" for line in lines)
    pieces = [p if p.startswith(">") else f">{p}"  # a cut inside a line keeps the quote
              for p in _hard_split(quoted, limit - slack_len(head) - 2)]
    texts = [f"{head}\n{pieces[0]}", *pieces[1:]]
    fallback = f"{head}\n{pieces[0]}"
    if slack_len(fallback) > FALLBACK_CHARS:
        fallback = _hard_split(fallback, FALLBACK_CHARS - 1)[0] + "…"
    return {"text": fallback, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": t}} for t in texts]}


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def answer_metadata(result: Mapping[str, Any], *, channel: str | None, question_ts: str | None,
                    parts: int) -> dict[str, Any]:
    """Slack message metadata marking a helpbot answer (how "already answered" and feedback find it)."""
    tool_names = [str(c.get("name", "")) for c in result.get("tool_calls") or []]
    return {
        "event_type": METADATA_EVENT_TYPE,
        "event_payload": _drop_none({
            "version": METADATA_VERSION,
            "question_channel": channel,
            "question_ts": question_ts,
            "rounds": int(result.get("rounds") or 0),
            "tool_calls": len(tool_names),
            "tools": ",".join(_unique(tool_names)),
            "sources": len(result.get("sources") or []),
            "cost_usd": round(float(result["cost_usd"]), 6) if result.get("cost_usd") is not None else None,
            "degraded": bool(result.get("degraded")),
            "parts": parts,
            "tags": ",".join(result.get("tags") or []) or None,
        }),
    }


def answer_payloads(result: Mapping[str, Any], *, channel: str | None = None, question_ts: str | None = None,
                    run_link: str | None = None, mask_personal: bool = True,
                    limit: int = MARKDOWN_LIMIT) -> list[dict[str, Any]]:
    """The answer as one or more payloads; the first carries the metadata, the last sources and footer.

    ``result`` has the ``helpbot ask --json`` shape: ``answer``, ``sources`` ([{title, url}] -- the ones the
    answer relied on), ``rounds``, ``tool_calls`` ([{name, ...}]), ``degraded``, and optionally ``cost_usd``.
    """
    answer = str(result.get("answer") or "").strip() or "（回答を生成できませんでした）"
    degraded = bool(result.get("degraded"))
    if degraded and not answer.startswith("⚠️"):  # the loop labels its own degraded answers
        answer = f"{DEGRADED_LABEL}\n\n{answer}"
    answer = guard_public(answer, mask_personal)
    chunks = split_markdown(answer, limit - slack_len(TRUNCATED_NOTE))
    if len(chunks) > MAX_ANSWER_PARTS:
        chunks = chunks[:MAX_ANSWER_PARTS]
        chunks[-1] += TRUNCATED_NOTE
    sources = guard_public(sources_markdown(result.get("sources") or []), mask_personal)
    tool_names = [str(c.get("name", "")) for c in result.get("tool_calls") or []]
    footer = guard_public(footer_text(
        rounds=int(result.get("rounds") or 0), tool_names=tool_names,
        cost_usd=float(result["cost_usd"]) if result.get("cost_usd") is not None else None,
        degraded=degraded, run_link=run_link, tags=[str(t) for t in result.get("tags") or []]), mask_personal)

    block_lists: list[list[dict[str, Any]]] = [[_markdown_block(c)] for c in chunks]
    if sources:
        if slack_len(chunks[-1]) + slack_len(sources) <= limit:
            block_lists[-1].append(_markdown_block(sources))
        else:
            block_lists.append([_markdown_block(sources)])
    block_lists[-1].append(_context_block(footer, FEEDBACK_LINE))

    payloads: list[dict[str, Any]] = []
    for index, blocks in enumerate(block_lists):
        first_text = blocks[0]["text"] if blocks[0]["type"] == "markdown" else ""
        payload: dict[str, Any] = {"text": plain_fallback(first_text), "blocks": blocks}
        if index == 0:
            payload["metadata"] = answer_metadata(result, channel=channel, question_ts=question_ts,
                                                  parts=len(block_lists))
        payloads.append(payload)
    return payloads


def find_answer(messages: Iterable[Mapping[str, Any]], question_ts: str, channel: str | None = None, *,
                is_ours: Callable[[Mapping[str, Any]], bool]) -> Mapping[str, Any] | None:
    """helpbot's earlier answer to ``question_ts`` among thread messages (fetched with include_all_metadata).

    ``is_ours`` says whether helpbot wrote a message: metadata alone proves nothing, so another app could
    otherwise plant a fake "answer" that silences helpbot for that message."""
    for message in messages:
        if not is_ours(message):
            continue
        metadata = message.get("metadata") or {}
        if metadata.get("event_type") != METADATA_EVENT_TYPE:
            continue
        payload = metadata.get("event_payload") or {}
        if payload.get("question_ts") != question_ts:
            continue
        if channel and payload.get("question_channel") not in (None, channel):
            continue
        return message
    return None
