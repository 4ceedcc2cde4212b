"""The fake Slack's text streaming: ``chat.startStream``, ``chat.appendStream``, ``chat.stopStream``.

As Slack documents them (https://docs.slack.dev/reference/methods/chat.startStream, .../chat.appendStream,
.../chat.stopStream; chunk objects: https://docs.slack.dev/messaging/sending-and-scheduling-messages#text-streaming):

- startStream: ``channel`` and ``thread_ts`` (streamed messages reply to a user's request), ``recipient_user_id``
  and ``recipient_team_id`` (required when streaming to channels; bot-token streams are refused without them in
  DMs too, as integrators report -- stricter), optional ``markdown_text`` / ``chunks``, ``task_display_mode``
  (``timeline`` | ``plan``). A bot token only (a user token: ``not_allowed_token_type``). Answers ``ts``.
- appendStream: ``channel``, ``ts`` of a message in streaming state (else ``message_not_in_streaming_state``),
  ``markdown_text`` or ``chunks``. Tier 4.
- stopStream: ``channel``, ``ts``; optional ``markdown_text`` (appended), ``chunks``, ``blocks`` (rendered at the
  bottom of the finalized message), ``metadata``. Tier 2.
- ``markdown_text`` (the argument or a chunk's) at most 12,000 characters; chunks: ``markdown_text`` {text},
  ``task_update`` {id, title, status pending|in_progress|complete|error, details?, output?, sources? [{type: url,
  url, text}]}, ``plan_update`` {title}, ``blocks`` {blocks}; anything else ``invalid_chunks``.

``Workspace.refuse_streaming`` (an error code such as ``unknown_method`` or ``feature_not_enabled``) makes every
streaming call fail as a workspace without the feature would. A streaming message reads back through
conversations.replies with its text so far (a markdown block) and no metadata; the fake keeps its tasks on
``Message.tasks`` (id -> the task's latest state) for tests. While it streams, chat.update refuses it
(``cant_update_message``; Slack documents nothing here: stricter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.slack import Message, SlackApi, Token

MARKDOWN_LIMIT = 12_000
TITLE_LIMIT = 256
STATUSES = ("pending", "in_progress", "complete", "error")
CHUNK_TYPES = ("markdown_text", "task_update", "plan_update", "blocks")
STREAM_METHODS = ("chat.startStream", "chat.appendStream", "chat.stopStream")  # bot tokens only


def install(api: SlackApi) -> None:
    api.methods.update({"chat.startStream": lambda p, t: start(api, p, t),
                        "chat.appendStream": lambda p, t: append(api, p, t),
                        "chat.stopStream": lambda p, t: stop(api, p, t)})


def _error(code: str, why: str = "") -> Exception:
    from tests.fakes.slack import SlackError

    return SlackError(code, **({"response_metadata": {"messages": [f"[ERROR] {why}"]}} if why else {}))


def _gate(api: SlackApi, token: Token) -> None:
    if api.ws.refuse_streaming:
        raise _error(api.ws.refuse_streaming)
    if token.kind != "bot":
        raise _error("not_allowed_token_type")


def _markdown(value: Any) -> str:
    text = str(value)
    if len(text) > MARKDOWN_LIMIT:
        raise _error("msg_too_long", "markdown_text must be 12000 characters or fewer")
    return text


def _chunks(api: SlackApi, value: Any) -> list[dict[str, Any]]:
    from tests.fakes.slack import _json_value

    chunks = _json_value(value, "invalid_chunks")
    if not isinstance(chunks, list) or not chunks:
        raise _error("invalid_chunks", "chunks must be a non-empty array")
    for chunk in chunks:
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        if kind not in CHUNK_TYPES:
            raise _error("invalid_chunks", f"unknown chunk type {kind!r}")
        if kind == "markdown_text":
            if not isinstance(chunk.get("text"), str):
                raise _error("invalid_chunks", "markdown_text chunk needs text")
            _markdown(chunk["text"])
        elif kind == "task_update":
            title = chunk.get("title")
            if not isinstance(chunk.get("id"), str) or chunk.get("status") not in STATUSES:
                raise _error("invalid_chunks", "task_update needs id and a status")
            if title is not None and (not isinstance(title, str) or len(title) > TITLE_LIMIT):
                raise _error("invalid_chunks", "task_update title must be a string of 256 characters or fewer")
            for key in ("details", "output"):
                if key in chunk and not isinstance(chunk[key], str):
                    raise _error("invalid_chunks", f"task_update {key} must be a string")
            for source in chunk.get("sources") or []:
                if not (isinstance(source, dict) and source.get("type") == "url" and source.get("url")
                        and source.get("text")):
                    raise _error("invalid_chunks", "a source is {type: url, url, text}")
        elif kind == "plan_update" and not isinstance(chunk.get("title"), str):
            raise _error("invalid_chunks", "plan_update needs a title")
        elif kind == "blocks":
            api._check_blocks(chunk.get("blocks"))
    return chunks


def _apply(message: Message, chunks: list[dict[str, Any]], markdown_text: str | None) -> None:
    if markdown_text:
        message.text += markdown_text
    for chunk in chunks:
        if chunk["type"] == "markdown_text":
            message.text += chunk["text"]
        elif chunk["type"] == "task_update":
            task = message.tasks.setdefault(chunk["id"], {})
            task.update({k: v for k, v in chunk.items() if k != "type"})
    message.blocks = [{"type": "markdown", "text": message.text}] if message.text else None


def _streaming(api: SlackApi, params: dict[str, Any], token: Token) -> Message:
    from tests.fakes.slack import _required

    channel = api._writable(params, token)
    message = api._message(channel, _required(params, "ts"))
    if message.user != token.user:
        raise _error("cant_update_message")
    if not message.streaming:
        raise _error("message_not_in_streaming_state")
    return message


def start(api: SlackApi, params: dict[str, Any], token: Token) -> dict[str, Any]:
    from tests.fakes.slack import _required

    _gate(api, token)
    channel = api._writable(params, token)
    parent = api.ws.message(channel.id, _required(params, "thread_ts"))
    if parent is None:
        raise _error("thread_not_found")
    for name in ("recipient_user_id", "recipient_team_id"):
        if not params.get(name):
            raise _error(f"missing_{name}", f"{name} is required when streaming to channels")
    if params["recipient_team_id"] != api.ws.team_id:
        raise _error("team_not_found")
    if params["recipient_user_id"] not in api.ws.users:
        raise _error("user_not_found")
    if params.get("task_display_mode") not in (None, "timeline", "plan"):
        raise _error("invalid_arguments", "task_display_mode must be timeline or plan")
    chunks = _chunks(api, params["chunks"]) if params.get("chunks") else []
    markdown = _markdown(params["markdown_text"]) if params.get("markdown_text") else None
    message = api.ws.post(channel.id, "", user=token.user, thread_ts=parent.thread_ts or parent.ts,
                          bot_id=api.ws.bot_id, app_id=api.ws.app_id)
    message.streaming = True
    _apply(message, chunks, markdown)
    return {"channel": channel.id, "ts": message.ts}


def append(api: SlackApi, params: dict[str, Any], token: Token) -> dict[str, Any]:
    _gate(api, token)
    message = _streaming(api, params, token)
    if not params.get("markdown_text") and not params.get("chunks"):
        raise _error("no_text")
    chunks = _chunks(api, params["chunks"]) if params.get("chunks") else []
    _apply(message, chunks, _markdown(params["markdown_text"]) if params.get("markdown_text") else None)
    return {"channel": message.channel, "ts": message.ts}


def stop(api: SlackApi, params: dict[str, Any], token: Token) -> dict[str, Any]:
    _gate(api, token)
    message = _streaming(api, params, token)
    chunks = _chunks(api, params["chunks"]) if params.get("chunks") else []
    content = api._content({k: params[k] for k in ("blocks", "metadata") if params.get(k) not in (None, "")},
                           required=False)
    _apply(message, chunks, _markdown(params["markdown_text"]) if params.get("markdown_text") else None)
    message.streaming = False
    message.blocks = [*(message.blocks or []), *content.get("blocks", [])] or None
    if message.blocks:
        api._check_blocks(message.blocks)
    if "metadata" in content:
        message.metadata = content["metadata"]
    return {"channel": message.channel, "ts": message.ts,
            "message": api.ws.message_to_api(message, include_metadata=True)}
