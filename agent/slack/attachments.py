"""Files attached to the question or its thread, read for the model: images and PDFs as content blocks, text-like
files as text in the context -- each within the API's limits and helpbot's budget, or named with the reason.

- Which files: the question's own first, then the rest of the thread's (helpbot's messages left out), at most
  :data:`MAX_FILES`; the thread is one the front may read (never a DM; a private channel only when the answer goes
  there), so its files follow the same rules as its messages.
- Where from: ``url_private_download`` with the bot token (scope ``files:read``), only where the Slack tokens'
  door lets it go (:func:`mcp_lib.doors.slack_door`: ``https://files.slack.com`` for Slack's own API, else the
  configured ``SLACK_API_URL``'s origin only -- scheme, host and port); redirects are not followed (Slack
  redirects to its sign-in page when the token may not read the file).
- Limits (Anthropic's vision and PDF guides): an image at most 5 MB in base64 (3.75 MB raw) and 8000 px a side;
  larger images are refused with a note, not downscaled (no imaging library is bundled; the API itself scales
  anything over ~1.15 megapixels down). PDFs count ~4,600 tokens a page; images and PDFs share
  :data:`MEDIA_TOKEN_BUDGET`. Text is cut in the middle (head and tail kept: a log's error is often at its end)
  with a note saying how much was left out.
- A file that cannot be read (deleted, external, hidden by the plan's limit, of a kind helpbot does not read, too
  large, refused by Slack) is listed in the context with the reason; nothing is dropped silently.
- PDFs as document blocks: Anthropic's API takes them; whether Bedrock's InvokeModel does for a given model could
  not be tried here (AWS documents document input for Converse). :func:`ask_with_attachments` therefore asks
  again without the PDFs, saying so in the context, when the model endpoint rejects the first request with a 400.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from agent.core.messages import IMAGE_TOKENS, PDF_PAGE_TOKENS, pdf_pages
from agent.slack.files import IMAGE_TYPES, cut_middle, decode_text, file_kind, image_size
from mcp_lib.doors import Refused, slack_door
from mcp_lib.http import door_client

if TYPE_CHECKING:
    from agent.core.run import Answer
    from agent.slack.handle import Slack, Thread

MAX_FILES = 8  # files looked at per question (the question's own first)
MAX_IMAGE_BYTES = 3_750_000  # 5 MB once base64-encoded: the API's limit per image
MAX_IMAGE_SIDE = 8_000  # px; the API rejects larger images
MAX_PDF_BYTES = 20_000_000
MEDIA_TOKEN_BUDGET = 30_000  # images and PDFs together, out of the request budget (100k by default)
MAX_TEXT_BYTES = 1_000_000  # read at most this much of a text file
TEXT_CHARS = 8_000  # all text attachments together, as context
DOWNLOAD_TIMEOUT_S = 10.0


@dataclass
class Attachments:
    """What the files give the run: media blocks for the question message, and lines for its context."""

    blocks: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # one per file: what it is, or why it was not read
    texts: list[str] = field(default_factory=list)  # text files' contents, each with its header

    def context(self) -> list[str]:
        if not self.lines:
            return []
        return ["添付ファイル:", *self.lines, *self.texts]


PDF_REFUSED_NOTE = ("\n（注: モデルの接続先が PDF の添付を受け付けなかったため、上の添付 PDF は渡せませんでした。"
                    "PDF の内容は参照できていません）")


def without_documents(blocks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks without the PDFs and the labels just before them."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "document":
            if out and out[-1].get("type") == "text":
                out.pop()
            continue
        out.append(block)
    return out


def ask_with_attachments(ask: Callable[[list[dict[str, Any]], str], Answer],
                         blocks: Sequence[dict[str, Any]]) -> Answer:
    """``ask(blocks, context_note)``; when the endpoint rejects the request (400) and PDFs were among the blocks,
    once more without them, with a note for the context. Any other failure is the caller's."""
    from agent.core.model import ModelRequestError

    try:
        return ask(list(blocks), "")
    except ModelRequestError as exc:
        kept = without_documents(blocks)
        if exc.status != 400 or len(kept) == len(blocks):
            raise
    return ask(kept, PDF_REFUSED_NOTE)


class Unreadable(Exception):
    """A file helpbot does not read; the message is the reason, in the context's language."""


def read_attachments(slack: Slack, thread: Thread, *, client: httpx.Client | None = None) -> Attachments:
    """The files of the question (first) and of the rest of its thread, read within the limits."""
    files = _thread_files(slack, thread)
    out = Attachments()
    if not files:
        return out
    reader = _Reader(slack, client)
    try:
        for index, file in enumerate(files[:MAX_FILES], 1):
            reader.read(index, file, out)
    finally:
        reader.close()
    if len(files) > MAX_FILES:
        out.lines.append(f"- ほか {len(files) - MAX_FILES} 件の添付は読んでいません（1 回に {MAX_FILES} 件まで）")
    return out


def _thread_files(slack: Slack, thread: Thread) -> list[dict[str, Any]]:
    """The question's files, then the other messages' (oldest first), each file once."""
    target = str(thread.target.get("ts"))
    others = [m for m in thread.messages if str(m.get("ts")) != target and not slack.me.wrote(m)]
    seen: set[str] = set()
    files: list[dict[str, Any]] = []
    for message in [thread.target, *others]:
        for file in message.get("files") or []:
            if not isinstance(file, dict):
                continue
            key = str(file.get("id") or file.get("name") or len(files))
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files



class _Reader:
    """Reads files one at a time, keeping the per-request counts and budgets."""

    def __init__(self, slack: Slack, client: httpx.Client | None):
        self.slack = slack
        self.token = slack.clients.config.bot_token
        self.door = slack_door(slack.clients.config.api_url, self.token)  # Slack's file hosts, or the fake's origin
        self.client = client or door_client(self.door, timeout=DOWNLOAD_TIMEOUT_S)  # no redirects followed
        self.own_client = client is None
        self.media_tokens = 0
        self.text_chars = 0
        self.images = 0

    def close(self) -> None:
        if self.own_client:
            self.client.close()

    def read(self, index: int, file: dict[str, Any], out: Attachments) -> None:
        name = str(file.get("name") or file.get("title") or file.get("id") or f"file{index}")
        try:
            file = self._details(file)
            name = str(file.get("name") or file.get("title") or name)
            kind = file_kind(file)
            if kind is None:
                what = file.get("pretty_type") or file.get("filetype") or file.get("mimetype") or "不明"
                raise Unreadable(f"この種類のファイルは読みません（{what}）")
            line = getattr(self, f"_{kind}")(name, file, out)
        except Unreadable as exc:
            out.lines.append(f"- {name}: 読めませんでした（{exc}）")
            return
        out.lines.append(f"- {name}: {line}")

    # -- kinds ------------------------------------------------------------------------------------------------
    def _image(self, name: str, file: Mapping[str, Any], out: Attachments) -> str:
        size = int(file.get("size") or 0)
        if size > MAX_IMAGE_BYTES:
            raise Unreadable(f"画像が大きすぎます: {size / 1e6:.1f} MB、上限 {MAX_IMAGE_BYTES / 1e6:.2f} MB。"
                             "縮小して貼り直してください")
        if self.media_tokens + IMAGE_TOKENS > MEDIA_TOKEN_BUDGET:
            raise Unreadable("画像と PDF の合計が 1 回の上限を超えるため省略しました")
        data = self._download(file, MAX_IMAGE_BYTES)
        if len(data) > MAX_IMAGE_BYTES:
            raise Unreadable(f"画像が大きすぎます: 上限 {MAX_IMAGE_BYTES / 1e6:.2f} MB。縮小して貼り直してください")
        found = image_size(data)
        if found is None:
            raise Unreadable("画像として読めません（PNG / JPEG / GIF / WebP ではありません）")
        media_type, width, height = found
        if max(width, height) > MAX_IMAGE_SIDE:
            raise Unreadable(f"画像が大きすぎます: {width}x{height} px、上限 {MAX_IMAGE_SIDE} px。"
                             "縮小して貼り直してください")
        self.images += 1
        self.media_tokens += IMAGE_TOKENS
        label = f"[添付画像 {self.images}]"
        out.blocks += [{"type": "text", "text": label},
                       {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                                    "data": base64.b64encode(data).decode("ascii")}}]
        return f"{label} として質問の前に添付（{IMAGE_TYPES[media_type].upper()}、{width}x{height} px）"

    def _pdf(self, name: str, file: Mapping[str, Any], out: Attachments) -> str:
        size = int(file.get("size") or 0)
        if size > MAX_PDF_BYTES:
            raise Unreadable(f"PDF が大きすぎます: {size / 1e6:.1f} MB、上限 {MAX_PDF_BYTES / 1e6:.0f} MB")
        data = self._download(file, MAX_PDF_BYTES)
        if len(data) > MAX_PDF_BYTES:
            raise Unreadable(f"PDF が大きすぎます: 上限 {MAX_PDF_BYTES / 1e6:.0f} MB")
        if not data.startswith(b"%PDF-"):
            raise Unreadable("PDF として読めません")
        pages = pdf_pages(data)
        room = (MEDIA_TOKEN_BUDGET - self.media_tokens) // PDF_PAGE_TOKENS
        if pages > room:
            raise Unreadable(f"PDF が長すぎます: 約 {pages} ページ、この質問で読めるのはあと {max(room, 0)} "
                             "ページまで。必要なページだけを貼ってください")
        self.media_tokens += pages * PDF_PAGE_TOKENS
        label = f"[添付 PDF {sum(b.get('type') == 'document' for b in out.blocks) + 1}]"
        out.blocks += [{"type": "text", "text": label},
                       {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                       "data": base64.b64encode(data).decode("ascii")}}]
        return f"{label} として質問の前に添付（約 {pages} ページ）"

    def _text(self, name: str, file: Mapping[str, Any], out: Attachments) -> str:
        room = TEXT_CHARS - self.text_chars
        if room < 200:
            raise Unreadable("テキスト添付の合計が上限に達したため省略しました")
        data = self._download(file, MAX_TEXT_BYTES)
        truncated = len(data) > MAX_TEXT_BYTES
        if b"\x00" in data[:8192]:
            raise Unreadable("テキストではありません（バイナリ）")
        text, left_out = cut_middle(decode_text(data[:MAX_TEXT_BYTES]).replace("\r\n", "\n"), room)
        self.text_chars += len(text)
        notes = []
        if left_out:
            notes.append(f"長いため中略 {left_out} 文字")
        if truncated:
            notes.append(f"先頭 {MAX_TEXT_BYTES // 1000} KB のみ読み込み")
        note = f"（{'、'.join(notes)}）" if notes else ""
        out.texts += [f"--- {name} の内容{note} ---", text, f"--- {name} ここまで ---"]
        return f"テキストとして下に掲載{note}"

    # -- Slack ------------------------------------------------------------------------------------------------
    def _details(self, file: dict[str, Any]) -> dict[str, Any]:
        """The file's object; files.info when the message carries only a stub (Slack Connect, missing URLs)."""
        from mcp_lib.core import ToolError
        from mcp_lib.platforms.slack import call

        mode = file.get("mode")
        if mode == "tombstone":
            raise Unreadable("削除されています")
        if mode == "hidden_by_limit":
            raise Unreadable("ワークスペースのプランの表示制限により見えません")
        if file.get("file_access") == "check_file_info" or (mode != "external" and not file.get("url_private")):
            if not file.get("id"):
                raise Unreadable("ファイルの情報がありません")
            try:
                file = dict(call(self.slack.ctx, "files.info", file=str(file["id"])).get("file") or {})
            except ToolError as exc:
                raise Unreadable(f"files.info: {exc}") from None
        if file.get("mode") == "external" or file.get("is_external"):
            raise Unreadable("外部サービス（Google Drive など）のファイルは読みません")
        return file

    def _download(self, file: Mapping[str, Any], limit: int) -> bytes:
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        if not self.door.allows(url):
            raise Unreadable("Slack のファイルホスト以外の URL からは読みません")
        if self.token is None:
            raise Unreadable("ボットトークン（SLACK_BOT_TOKEN）がないため読めません")
        try:
            with self.client.stream("GET", url, headers={"Authorization": f"Bearer {self.token}"}) as response:
                if response.is_redirect:
                    raise Unreadable("Slack がダウンロードを拒否しました（ボットトークンに files:read が必要です）")
                if response.status_code != 200:
                    raise Unreadable(f"ダウンロードできません（HTTP {response.status_code}）")
                if "text/html" in response.headers.get("content-type", "") and not str(file.get("mimetype") or
                                                                                         "").startswith("text/html"):
                    raise Unreadable("Slack がサインインページを返しました（ボットトークンに files:read が必要です）")
                return _read_at_most(response.iter_bytes(), limit + 1)  # one byte more: "larger than the limit"
        except Refused:  # the client's door hook (a hop the check above did not see): nothing was sent
            raise Unreadable("Slack のファイルホスト以外の URL からは読みません") from None
        except httpx.HTTPError as exc:
            raise Unreadable(f"ダウンロードできません（{type(exc).__name__}）") from None


def _read_at_most(chunks: Iterable[bytes], limit: int) -> bytes:
    data = bytearray()
    for chunk in chunks:
        data += chunk
        if len(data) >= limit:
            break
    return bytes(data[:limit])
