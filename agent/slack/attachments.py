"""Files attached to the question or its thread, read for the model: images and PDFs as content blocks, text files
as context, each within the API's limits and the run's budget, or named with why it was not read. A file is read only
where ``files.info`` says it is shared in a conversation the answer may show, through the Slack door (no redirects).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import httpx2

from agent.core.tokens import IMAGE_TOKENS, PDF_PAGE_TOKENS, pdf_pages
from agent.errors import ModelRequestError, Unreadable
from agent.slack import files
from mcp_lib.cutting import keep_start_and_end
from mcp_lib.doors import slack_door
from mcp_lib.errors import Refused
from mcp_lib.http import door_client
from mcp_lib.media import IMAGE_TYPES, MAX_IMAGE_BYTES, MAX_IMAGE_SIDE
from mcp_lib.payload import count

if TYPE_CHECKING:
    from agent.core.run import Answer
    from agent.slack.handle import Slack, Thread

MAX_FILES = 8  # files looked at per question (the question's own first)
MAX_IMAGE_DOWNLOAD = 30_000_000  # an image larger than this is not downloaded to be downscaled
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


MediaKind = Literal["image", "document"]


def without_media(blocks: Sequence[dict[str, Any]], kinds: Collection[MediaKind]) -> tuple[list[dict[str, Any]], str]:
    """The blocks without those of ``kinds`` (and the labels just before them), and the note saying so."""
    out: list[dict[str, Any]] = []
    dropped: dict[str, int] = dict.fromkeys(kinds, 0)
    for block in blocks:
        if block.get("type") in dropped:
            dropped[block["type"]] += 1
            if out and out[-1].get("type") == "text":
                out.pop()
            continue
        out.append(block)
    what = "と".join(f"{label} {dropped[kind]} 件" for kind, label in (("image", "画像"), ("document", "PDF"))
                    if dropped.get(kind))
    return out, (f"\n（注: モデルの接続先が添付を受け付けなかったため、上の添付 {what} は渡せませんでした。"
                 "その内容は参照できていません）") if what else ""


def suspects(error: str) -> tuple[MediaKind, ...]:
    """The media a 400 names (``messages.0.content.1.image.source``, ``unexpected 'document'``); both if neither."""
    text = error.lower()
    words: dict[MediaKind, tuple[str, ...]] = {"image": ("image",), "document": ("document", "pdf")}
    return tuple(kind for kind, names in words.items() if any(name in text for name in names)) or ("image", "document")


def ask_with_attachments(ask: Callable[[list[dict[str, Any]], str], Answer],
                         blocks: Sequence[dict[str, Any]]) -> Answer:
    """``ask(blocks, context_note)``; after a 400, once more without the media it names (:func:`suspects`), noted."""
    try:
        return ask(list(blocks), "")
    except ModelRequestError as exc:
        kept, note = without_media(blocks, suspects(str(exc)))
        if exc.status != 400 or not note:
            raise
    return ask(kept, note)


def read_attachments(slack: Slack, thread: Thread) -> Attachments:
    """The question's files, then the rest of the thread's (oldest first), each once, read within the limits."""
    target = str(thread.target.get("ts"))
    others = [m for m in thread.messages if str(m.get("ts")) != target and not slack.me.wrote(m)]
    by_key: dict[str, dict[str, Any]] = {}
    for file in (f for message in [thread.target, *others] for f in message.get("files") or []):
        if isinstance(file, dict):
            by_key.setdefault(str(file.get("id") or file.get("name") or len(by_key)), file)
    found = list(by_key.values())
    out = Attachments()
    if not found:
        return out
    reader = _Reader(slack)
    with reader.client:
        for index, file in enumerate(found[:MAX_FILES], 1):
            reader.read(index, file, out)
    reader.fit_images(out)
    if len(found) > MAX_FILES:
        out.lines.append(f"- ほか {len(found) - MAX_FILES} 件の添付は読んでいません（1 回に {MAX_FILES} 件まで）")
    return out


def declared_size(file: Mapping[str, Any]) -> int:
    """The bytes Slack says a file has: 0 when it is no number, and at most what a float holds (400 digits overflow)."""
    return min(count(file.get("size")), 2**53)


@dataclass
class _Image:
    """A downloaded image waiting for its share of the request's bytes."""

    line: int  # its line in Attachments.lines
    name: str
    picture: files.Picture


class _Reader:
    """Reads files one at a time, keeping the per-request counts and budgets."""

    def __init__(self, slack: Slack):
        self.slack = slack
        self.token = slack.clients.config.bot_token
        self.door = slack_door(slack.clients.config.api_url, self.token)  # Slack's file hosts, or the fake's origin
        self.client = door_client(self.door, timeout=DOWNLOAD_TIMEOUT_S)  # no redirects followed
        self.media_tokens = 0
        self.media_bytes = 0  # base64 of the PDFs taken; the images share what is left
        self.text_chars = 0
        self.images: list[_Image] = []
        self.documents = 0

    def read(self, index: int, file: dict[str, Any], out: Attachments) -> None:
        name = str(file.get("name") or file.get("title") or file.get("id") or f"file{index}")  # as the message shows
        try:
            file = self._details(file)
            if not self._shared_here(file):
                raise Unreadable("この回答先で共有されていないファイルのため読みません")
            name = str(file.get("name") or file.get("title") or name)
            if file.get("mode") == "external" or file.get("is_external"):
                raise Unreadable("外部サービス（Google Drive など）のファイルは読みません")
            kind = files.file_kind(file)
            if kind is None:
                what = file.get("pretty_type") or file.get("filetype") or file.get("mimetype") or "不明"
                raise Unreadable(f"この種類のファイルは読みません（{what}）")
            line = getattr(self, f"_{kind}")(name, file, out)
        except Unreadable as exc:
            out.lines.append(f"- {name}: 読めませんでした（{exc}）")
            return
        out.lines.append(f"- {name}: {line}")

    def _image(self, name: str, file: Mapping[str, Any], out: Attachments) -> str:
        """Downloaded now, fitted by :meth:`fit_images` once every file's share is known."""
        size = declared_size(file)
        if size > MAX_IMAGE_DOWNLOAD:
            raise Unreadable(f"画像が大きすぎます: {size / 1e6:.1f} MB、上限 {MAX_IMAGE_DOWNLOAD / 1e6:.0f} MB")
        if self.media_tokens + IMAGE_TOKENS > MEDIA_TOKEN_BUDGET:
            raise Unreadable("画像と PDF の合計が 1 回の上限を超えるため省略しました")
        data = self._download(file, MAX_IMAGE_DOWNLOAD)
        if len(data) > MAX_IMAGE_DOWNLOAD:
            raise Unreadable(f"画像が大きすぎます: 上限 {MAX_IMAGE_DOWNLOAD / 1e6:.0f} MB")
        picture = files.read_image(data)
        self.media_tokens += IMAGE_TOKENS
        self.images.append(_Image(len(out.lines), name, picture))
        return "（画像: 確認中）"  # replaced by fit_images

    def fit_images(self, out: Attachments) -> None:
        """The images into what the PDFs left of ``MEDIA_BYTES``, smallest first, each within an equal share."""
        side = MAX_IMAGE_SIDE if len(self.images) <= files.MANY_IMAGES else files.MANY_IMAGE_SIDE
        left = files.MEDIA_BYTES - self.media_bytes
        fitted: dict[int, files.Picture] = {}  # by line
        for done, image in enumerate(sorted(self.images, key=lambda im: len(im.picture.data))):
            share = left // (len(self.images) - done)
            try:
                picture = files.fit_image(image.picture, max_bytes=min(MAX_IMAGE_BYTES, share // 4 * 3), max_side=side)
            except Unreadable as exc:
                out.lines[image.line] = f"- {image.name}: 読めませんでした（{exc}）"
                continue
            left -= files.base64_size(len(picture.data))
            fitted[image.line] = picture
        shown_images = [(image, fitted[image.line]) for image in self.images if image.line in fitted]
        for number, (image, result) in enumerate(shown_images, 1):
            label = f"[添付画像 {number}]"
            out.blocks += [{"type": "text", "text": label},
                           {"type": "image", "source": {"type": "base64", "media_type": result.media_type,
                                                        "data": base64.b64encode(result.data).decode("ascii")}}]
            shown = f"{IMAGE_TYPES[result.media_type].upper()}、{result.width}x{result.height} px"
            if result.original:
                shown += f"。元の {result.original[0]}x{result.original[1]} px から上限に合わせて縮小"
            out.lines[image.line] = f"- {image.name}: {label} として質問の前に添付（{shown}）"

    def _pdf(self, name: str, file: Mapping[str, Any], out: Attachments) -> str:
        size = declared_size(file)
        if size > files.MAX_PDF_BYTES:
            raise Unreadable(f"PDF が大きすぎます: {size / 1e6:.1f} MB、上限 {files.MAX_PDF_BYTES / 1e6:.1f} MB")
        if self.documents >= files.MAX_DOCUMENTS:
            raise Unreadable(f"PDF は 1 回に {files.MAX_DOCUMENTS} 件までです")
        data = self._download(file, files.MAX_PDF_BYTES)
        if len(data) > files.MAX_PDF_BYTES:
            raise Unreadable(f"PDF が大きすぎます: 上限 {files.MAX_PDF_BYTES / 1e6:.1f} MB")
        try:
            pages = pdf_pages(data) if data.startswith(b"%PDF-") else 0
        except ValueError:
            pages = 0
        if not pages:
            raise Unreadable("PDF として読めません（壊れているか、パスワードが掛かっています）")
        room = (MEDIA_TOKEN_BUDGET - self.media_tokens) // PDF_PAGE_TOKENS
        if pages > room:
            raise Unreadable(f"PDF が長すぎます: {pages} ページ、この質問で読めるのはあと {max(room, 0)} "
                             "ページまで。必要なページだけを貼ってください")
        if self.media_bytes + files.base64_size(len(data)) > files.MEDIA_BYTES:
            raise Unreadable("画像と PDF の合計が 1 回の上限を超えるため省略しました")
        self.media_tokens += pages * PDF_PAGE_TOKENS
        self.media_bytes += files.base64_size(len(data))
        self.documents += 1
        label = f"[添付 PDF {self.documents}]"
        out.blocks += [{"type": "text", "text": label},
                       {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                       "data": base64.b64encode(data).decode("ascii")}}]
        return f"{label} として質問の前に添付（{pages} ページ）"

    def _text(self, name: str, file: Mapping[str, Any], out: Attachments) -> str:
        room = TEXT_CHARS - self.text_chars
        if room < 200:
            raise Unreadable("テキスト添付の合計が上限に達したため省略しました")
        data = self._download(file, MAX_TEXT_BYTES)
        if files.is_binary(data[:MAX_TEXT_BYTES]):
            raise Unreadable("テキストではありません（バイナリ）")
        text, left_out = keep_start_and_end(files.decode_text(data[:MAX_TEXT_BYTES]).replace("\r\n", "\n"), room)
        self.text_chars += len(text)
        notes = [f"長いため中略 {left_out} 文字"] if left_out else []
        notes += [f"先頭 {MAX_TEXT_BYTES // 1000} KB のみ読み込み"] if len(data) > MAX_TEXT_BYTES else []
        note = f"（{'、'.join(notes)}）" if notes else ""
        out.texts += [f"--- {name} の内容{note} ---", text, f"--- {name} ここまで ---"]
        return f"テキストとして下に掲載{note}"

    def _details(self, file: dict[str, Any]) -> dict[str, Any]:
        """The file's object from files.info: only it says where the file is shared."""
        from mcp_lib.core import ToolError
        from mcp_lib.platforms.slack import call

        gone = {"tombstone": "削除されています", "hidden_by_limit": "ワークスペースのプランの表示制限により見えません"}
        if file.get("mode") in gone:
            raise Unreadable(gone[file["mode"]])
        if not file.get("id"):
            raise Unreadable("ファイルの情報がありません")
        try:
            return dict(call(self.slack.ctx, "files.info", file=str(file["id"])).get("file") or {})
        except ToolError as exc:
            raise Unreadable(f"files.info: {exc}") from None

    def _shared_here(self, file: Mapping[str, Any]) -> bool:
        """Shared in a conversation whose messages the answer may show (:func:`mcp_lib.platforms.slack.allowed`;
        an id private anywhere is private); where Slack is not among the run's sources, only the answer's own."""
        from mcp_lib.platforms.slack import allowed

        shares: Mapping[str, Any] = file["shares"] if isinstance(file.get("shares"), dict) else {}

        def ids(*values: Any) -> set[str]:
            return {str(v) for value in values if isinstance(value, list | dict) for v in value}

        dms = ids(file.get("ims"))
        private = ids(file.get("groups"), shares.get("private")) - dms
        public = ids(file.get("channels"), shares.get("public")) - private - dms
        if "slack" not in self.slack.registry.platforms():  # a shared channel's answer: no other channel is a source
            return self.slack.ctx.caller.answer_channel in private | public
        where = ([{"id": c, "is_im": True} for c in dms] + [{"id": c, "is_private": True} for c in private]
                 + [{"id": c, "is_private": False} for c in public])
        return any(allowed(self.slack.ctx, conversation) for conversation in where)

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
                html = "text/html" in response.headers.get("content-type", "")
                if html and not str(file.get("mimetype") or "").startswith("text/html"):
                    raise Unreadable("Slack がサインインページを返しました（ボットトークンに files:read が必要です）")
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > limit:  # one byte more than the limit says "larger than the limit"
                        break
                return bytes(data[:limit + 1])
        except Refused:  # the client's door hook (a hop the check above did not see): nothing was sent
            raise Unreadable("Slack のファイルホスト以外の URL からは読みません") from None
        except httpx2.HTTPError as exc:
            raise Unreadable(f"ダウンロードできません（{type(exc).__name__}）") from None
