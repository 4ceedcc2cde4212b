"""Everything helpbot posts to Slack as ready payloads, ``{"text": fallback, "blocks": [...], "metadata"?}``:
placeholder, progress, answer, notices. An answer over Slack's 12,000 markdown characters is split into parts, the
first with its marker (:mod:`agent.slack.markers`), the last with its sources, footer and buttons. Text cut here
is guarded before the cut, so that no secret straddles one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlparse

from agent import guard
from agent.slack import markers
from mcp_lib.config import env_str
from mcp_lib.cutting import MARKDOWN_LIMIT, shorten_at_word, slack_len, split_line, split_markdown, squash_whitespace

if TYPE_CHECKING:
    from agent.core.run import Answer

MAX_ANSWER_PARTS = 5  # a runaway answer must not flood the thread
MAX_SOURCES = 15
MAX_TITLE_CHARS = 150
MAX_SOURCES_CHARS = 4_000
FALLBACK_CHARS = 600
FALLBACK_EMPTY = "helpbot の回答"  # notifications and screen readers need a text, even for an answer of markup only

SECTION_LIMIT = 3_000  # the text of one section block
SOURCES_TITLE = "参照元"  # the sources block's heading; readback.read_answer finds the sources by it

PLACEHOLDER = "調べています…"
# A configuration mistake, told to the asker only (nothing else shows in Slack): the variable, for the operator.
CONFIG_NOTICE = ("helpbot の設定に誤りがあるため回答できませんでした（{variable}）。管理者にお伝えください{link}。"
                 "（この表示はあなたにだけ見えています）")
FEEDBACK_LINE = "役に立ちましたか？ 👍 / 👎 のリアクションで教えてください。"
BUTTONS_LINE = "役に立ちましたか？ 下の 👍 / 👎 で教えてください。"
FEEDBACK_ACTION = "helpbot_feedback"  # the 👍/👎 buttons' action_id: the relay takes the clicks of no other
DEGRADED_LABEL = ("> ⚠️ **AIによる回答ではありません。** AIモデルを利用できなかったため、"
                  "質問で検索した結果の上位をそのまま載せています。")
TRUNCATED_NOTE = "\n\n…（回答が長すぎるため、以降を省略しました）"
POST_OPTIONS = {"unfurl_links": False, "unfurl_media": False}  # many source links must not unfurl

PLATFORM_LABELS = {"faq": "FAQ", "slack": "Slack", "redmine": "Redmine", "github": "GitHub", "growi": "Growi"}


def run_url(env: Mapping[str, str]) -> str | None:
    """Link to this Actions run, when running in Actions."""
    server, repo, run_id = (env_str(env, k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    return f"{server.rstrip('/')}/{repo}/actions/runs/{run_id}" if server and repo and run_id else None


def _context_block(*texts: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": t} for t in texts]}


def mrkdwn_escape(text: str) -> str:
    """Slack's control characters in mrkdwn/plain ``text`` (stops ``<!here>``-style injections too)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# [label](url), also read by faq_draft; neither part reads past a "[" (quadratic in "[x](" repeated, as guard's)
MD_LINK = re.compile(r"\[([^\[\]\n]*)\]\(([^)\s\[]+)\)")
_MD_NOISE = re.compile(r"(\*\*|__|^#{1,6}\s+|^>\s?|^\s*(```|~~~)\S*\s*$)", re.M)


def plain_fallback(markdown: str) -> str:
    """The ``text`` that notifications and screen readers use: roughly de-marked-up, escaped, short."""
    text = _MD_NOISE.sub("", MD_LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})", markdown))
    return mrkdwn_escape(shorten_at_word(re.sub(r"\n{3,}", "\n\n", text).strip(), FALLBACK_CHARS))


def _safe_url(url: str) -> str | None:
    try:
        parsed = urlparse(url.strip())
    except ValueError:  # "http://[x": a source's URL is a peer's (a bracket not an IPv6 host)
        return None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return None
    return quote(url.strip(), safe=":/?#@!$&'*+,;=%-._~[]")  # spaces, parentheses and <> encoded


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
        title = shorten_at_word(squash_whitespace(guard.markdown(str(source.get("title") or url or "")))
                                .replace("[", "［").replace("]", "］"), MAX_TITLE_CHARS) or "(無題)"
        line = f"- [{title}]({safe})" if safe else f"- {title}"
        if len(lines) >= MAX_SOURCES or slack_len("\n".join([*lines, line])) > MAX_SOURCES_CHARS:
            left_out += 1
            continue
        lines.append(line)
    lines += [f"- ほか {left_out} 件"] if left_out else []
    return f"**{SOURCES_TITLE}**\n" + "\n".join(lines) if lines else ""


def platform_label(tool_name: str) -> str:
    """``slack_searchMessages`` -> ``Slack``; other registered prefixes as they are, else ``unknown_tool``."""
    name = guard.current().name(tool_name)
    prefix = name.partition("_")[0]
    return name if name == guard.UNKNOWN_TOOL else PLATFORM_LABELS.get(prefix, prefix)


def _platforms(tool_names: Sequence[str]) -> str:
    """The platforms the tools searched, each once: 「Slack・Redmine」."""
    return "・".join(dict.fromkeys(filter(None, map(platform_label, tool_names))))


def format_cost(cost_usd: float) -> str:
    if cost_usd < 0.001:
        return "<$0.001"
    return f"${cost_usd:.2f}" if cost_usd >= 1 else f"${cost_usd:.3f}"


def _footer(answer: Answer, run_link: str | None) -> str:
    """One small mrkdwn line (a context block): rounds, tools, the question's tags, estimated cost, the run link."""
    platforms = _platforms([call.name for call in answer.tool_calls])
    parts = ["検索のみ（AI生成ではありません）" if answer.degraded else f"ラウンド {answer.rounds}",
             f"ツール {len(answer.tool_calls)} 回" + (f"（{platforms}）" if platforms else ""),
             *([f"タグ {'・'.join(answer.tags)}"] if answer.tags else []),
             *([f"推定コスト {format_cost(answer.cost_usd)}"] if answer.cost_usd is not None and not answer.degraded
               else []),
             *(["費用上限に達したため、それまでに集めた情報で回答"] if answer.stop == "cost_limit" else [])]
    safe = _safe_url(run_link) if run_link else None
    return mrkdwn_escape(" ・ ".join(parts)) + (f" ・ <{safe}|実行ログ>" if safe else "")


def placeholder_payload(text: str = PLACEHOLDER) -> dict[str, Any]:
    return {"text": mrkdwn_escape(text), "blocks": [_context_block(f":hourglass_flowing_sand: {mrkdwn_escape(text)}")]}


def progress_payload(round_no: int, max_rounds: int, tool_names: Sequence[str] = ()) -> dict[str, Any]:
    """「調べています…（ラウンド 2/10：Slack・Redmine を検索中）」."""
    platforms = _platforms(tool_names)
    detail = f"ラウンド {round_no}/{max_rounds}" + (f"：{platforms} を検索中" if platforms else "")
    return placeholder_payload(f"{PLACEHOLDER}（{detail}）")


_TASK_VERBS = (("search", "を検索"), ("list", "を一覧"), ("get", "を参照"), ("read", "を参照"), ("fetch", "を参照"))
_TASK_ARGUMENTS = ("query", "q", "keywords", "path", "url", "id", "issue_id", "number", "page_id", "channel")


def task_title(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """A tool call as a task of the streamed reply, 「FAQを検索: 在庫同期」 (the argument is guarded at the door)."""
    label = platform_label(tool_name)
    name = guard.current().name(tool_name).lower()
    verb = next((v for word, v in _TASK_VERBS if word in name), "を実行")
    if label == guard.UNKNOWN_TOOL:
        label, verb = "ツール", "を実行"
    value = next((arguments[k] for k in _TASK_ARGUMENTS if isinstance(arguments.get(k), str | int)
                  and not isinstance(arguments.get(k), bool) and str(arguments[k]).strip()), None)
    title = f"{label}{verb}"
    return f"{title}: {squash_whitespace(str(value))}" if value is not None else title


_URL = re.compile(r"\(?(?:url: )?https?://\S+")


def failure_payload(what: str, run_link: str | None = None, *, channel: str | None = None,
                    question_ts: str | None = None) -> dict[str, Any]:
    """The notice that replaces silence: what failed (one line, no URLs: the run log has them), and where to look."""
    what = shorten_at_word(squash_whitespace(_URL.sub("", guard.markdown(what))), 300) or "不明なエラー"
    safe = _safe_url(run_link) if run_link else None
    where = (f" 詳細は<{safe}|実行ログ>を確認してください。" if safe
             else " 時間をおいて、もう一度リアクションしてください。")
    text = f":warning: 回答を作成できませんでした（{mrkdwn_escape(what)}）。{where}"
    payload: dict[str, Any] = {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
    if question_ts:
        payload["metadata"] = markers.metadata("failure", channel=channel, question_ts=question_ts)
    return payload


def question_payload(question: str, actor: str | None = None) -> dict[str, Any]:
    """A free question (workflow_dispatch) as the thread's root, escaped (no disguised ``<url|label>`` or broadcast)."""
    head = f"❓ *質問*（GitHub Actions から{f'・{mrkdwn_escape(actor)}' if actor else ''}）"
    lines = [mrkdwn_escape(line) for line in question.strip().splitlines() if line.strip()] or ["（本文なし）"]
    quoted = "\n".join(f">{line}" for line in lines)
    pieces = [p if p.startswith(">") else f">{p}"  # a cut inside a line keeps the quote
              for p in split_line(quoted, SECTION_LIMIT - slack_len(head) - 2)]
    texts = [f"{head}\n{pieces[0]}", *pieces[1:]]
    fallback = shorten_at_word(f"{head}\n{pieces[0]}", FALLBACK_CHARS)
    return {"text": fallback, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": t}} for t in texts]}


def feedback_block() -> dict[str, Any]:
    """👍/👎 buttons, Slack's ``feedback_buttons`` in a ``context_actions`` block (a click is a vote)."""
    from slack_sdk.models.blocks import ContextActionsBlock, FeedbackButtonObject, FeedbackButtonsElement

    up, down = (FeedbackButtonObject(text=emoji, value=vote, accessibility_label=label) for emoji, vote, label in
                (("👍", markers.VOTES[0], "役に立った"), ("👎", markers.VOTES[1], "役に立たなかった")))
    buttons = FeedbackButtonsElement(action_id=FEEDBACK_ACTION, positive_button=up, negative_button=down)
    return ContextActionsBlock(elements=[buttons]).to_dict()


def answer_metadata(answer: Answer, *, channel: str | None, question_ts: str | None, parts: int) -> dict[str, Any]:
    """The marker of a helpbot answer (how "already answered", feedback and votes find it)."""
    tools = tuple(dict.fromkeys(call.name for call in answer.tool_calls if call.name))
    stats = markers.AnswerStats(rounds=answer.rounds, tool_calls=len(answer.tool_calls), tools=tools,
                                sources=len(answer.sources), cost_usd=answer.cost_usd, degraded=answer.degraded,
                                tags=tuple(answer.tags), parts=parts)
    return markers.metadata("answer", channel=channel, question_ts=question_ts, **stats.fields())


def answer_payloads(answer: Answer, *, channel: str | None = None, question_ts: str | None = None,
                    run_link: str | None = None, limit: int = MARKDOWN_LIMIT,
                    buttons: bool = False) -> list[dict[str, Any]]:
    """The answer's payloads: the first with its marker, the last with sources, footer and (``buttons``) 👍/👎."""
    text = answer.text.strip() or "（回答を生成できませんでした）"
    if answer.degraded and not text.startswith("⚠️"):  # the loop labels its own degraded answers
        text = f"{DEGRADED_LABEL}\n\n{text}"
    chunks = split_markdown(guard.markdown(text), limit - slack_len(TRUNCATED_NOTE))
    if len(chunks) > MAX_ANSWER_PARTS:
        chunks = chunks[:MAX_ANSWER_PARTS]
        chunks[-1] += TRUNCATED_NOTE
    sources = sources_markdown(answer.sources)
    footer = _footer(answer, run_link)

    block_lists: list[list[dict[str, Any]]] = [[{"type": "markdown", "text": c}] for c in chunks]
    if sources:
        if slack_len(chunks[-1]) + slack_len(sources) <= limit:
            block_lists[-1].append({"type": "markdown", "text": sources})
        else:
            block_lists.append([{"type": "markdown", "text": sources}])
    block_lists[-1] += [_context_block(footer, BUTTONS_LINE if buttons else FEEDBACK_LINE),
                        *([feedback_block()] if buttons else [])]

    payloads: list[dict[str, Any]] = [{"text": plain_fallback(blocks[0]["text"]) or FALLBACK_EMPTY, "blocks": blocks}
                                      for blocks in block_lists]  # every part starts with a markdown block
    payloads[0]["metadata"] = answer_metadata(answer, channel=channel, question_ts=question_ts, parts=len(payloads))
    return payloads
