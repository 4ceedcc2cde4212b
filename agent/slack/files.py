"""What a file is, from its bytes and Slack's metadata (kind, an image's size, a text's encoding), and what one
request to the model may carry, with images downscaled to fit (per-image limits: :mod:`mcp_lib.media`). No Slack
calls and no downloads: those are :mod:`agent.slack.attachments`'."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agent.errors import Unreadable
from mcp_lib import media
from mcp_lib.media import IMAGE_TYPES, MAX_IMAGE_SIDE

_ENCODINGS = ("utf-8-sig", "cp932")  # UTF-8 with or without BOM, else Shift_JIS as Windows writes it
_TEXT_MIMETYPES = {"application/json", "application/x-yaml", "application/yaml", "application/xml",
                   "application/x-sh", "application/javascript", "application/x-python", "application/sql",
                   "application/x-ndjson", "application/toml"}
_TEXT_FILETYPES = {"text", "log", "csv", "tsv", "json", "markdown", "yaml", "xml", "python", "javascript",
                   "typescript", "shell", "sql", "java", "go", "ruby", "php", "c", "cpp", "csharp", "kotlin",
                   "swift", "rust", "html", "css", "diff", "ini", "toml", "dockerfile", "perl", "scala", "vb",
                   "powershell", "jsx", "tsx", "vue", "groovy", "lua", "r", "matlab", "post", "snippet"}
_TEXT_EXTENSIONS = {"txt", "log", "csv", "tsv", "json", "jsonl", "ndjson", "md", "markdown", "yaml", "yml", "xml",
                    "py", "js", "ts", "tsx", "jsx", "sh", "bash", "sql", "java", "go", "rb", "php", "c", "h", "cc",
                    "cpp", "hpp", "cs", "kt", "swift", "rs", "html", "css", "diff", "patch", "ini", "toml", "cfg",
                    "conf", "env", "properties", "gradle", "tf", "vue", "lua", "pl", "ps1", "bat", "out", "err"}


def file_kind(file: Mapping[str, Any]) -> Literal["image", "pdf", "text"] | None:
    """What helpbot reads the file as, by its mimetype, Slack's filetype or its name; None: not read."""
    mimetype = str(file.get("mimetype") or "").lower()
    filetype = str(file.get("filetype") or "").lower()
    extension = str(file.get("name") or "").rsplit(".", 1)[-1].lower() if "." in str(file.get("name")) else ""
    if mimetype in IMAGE_TYPES:
        return "image"
    if mimetype == "application/pdf" or filetype == "pdf":
        return "pdf"
    if (mimetype.startswith("text/") or mimetype in _TEXT_MIMETYPES or filetype in _TEXT_FILETYPES
            or extension in _TEXT_EXTENSIONS):
        return "text"
    return None


def decode_text(data: bytes) -> str:
    """The first of :data:`_ENCODINGS` that reads it, else UTF-8 with replacements."""
    for encoding in _ENCODINGS:
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode(encoding)
    return data.decode("utf-8", errors="replace")


# What one request may carry, each from its documentation (the smaller where Bedrock's and Anthropic's differ):
# - 20 MB a request (docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-
#   request-response.html);
# - 2000 px a side for every image once a request has more than 20 (docs.anthropic.com/en/docs/build-with-claude/
#   vision); the per-image limits are mcp_lib.media's;
# - 4.5 MB a PDF, 5 PDFs (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Message.html); the 100 pages
#   a request are far beyond the media token budget (agent.slack.attachments).
REQUEST_BYTES = 20_000_000
MEDIA_BYTES = 15_000_000  # base64 of every image and PDF of a request; the rest (prompt, tools, thread, tool
#                           results) is bounded by the token budget, well under the 5 MB left
MANY_IMAGES = 20  # more images than this in one request, and each must fit MANY_IMAGE_SIDE
MANY_IMAGE_SIDE = 2_000
MAX_PDF_BYTES = 4_500_000
MAX_DOCUMENTS = 5
# Downscaling aims at what the model sees: the API itself scales an image whose long edge is over 1568 px, or
# that is over ~1.15 megapixels, down to that (the vision guide), so nothing the model would see is lost.
MODEL_SIDE = 1_568
MODEL_PIXELS = 1_150_000
MIN_SIDE = 200  # the vision guide: images under 200 px a side degrade the answers; smaller than this, refuse
_REFUSED = {media.NOT_AN_IMAGE: "画像として読めません（PNG / JPEG / GIF / WebP ではありません）",
            media.TOO_LARGE: f"画像が大きすぎます: 上限 {media.MAX_DECODE_PIXELS // 10_000} 万画素",
            media.CORRUPT: "画像として読めません（壊れているか、対応していない形式です）"}


def base64_size(raw: int) -> int:
    return (raw + 2) // 3 * 4


@dataclass(frozen=True)
class Picture:
    """An image as it goes to the model; ``original`` is its size as attached when it was downscaled."""

    data: bytes
    media_type: str
    width: int
    height: int
    original: tuple[int, int] | None = None


def read_image(data: bytes) -> Picture:
    """The image as attached, once it decodes whole (:func:`mcp_lib.media.decoded_image`)."""
    found = media.decoded_image(data)
    if isinstance(found, str):
        raise Unreadable(_REFUSED[found])
    return Picture(data, *found)


def fit_image(picture: Picture, *, max_bytes: int, max_side: int = MAX_IMAGE_SIDE) -> Picture:
    """The image within ``max_bytes`` (raw) and ``max_side``: as attached when it fits, else downscaled (aspect
    ratio kept; PNG stays PNG when it fits, else JPEG, transparency kept as PNG)."""
    if len(picture.data) <= max_bytes and max(picture.width, picture.height) <= max_side:
        return picture
    from PIL import Image

    data, media_type, width, height = picture.data, picture.media_type, picture.width, picture.height
    with Image.open(io.BytesIO(data)) as opened:  # decoded whole already: read_image
        alpha = opened.mode in ("RGBA", "LA", "PA") or "transparency" in opened.info
        frame = opened.convert("RGBA" if alpha else "RGB")  # an animated GIF: its first frame
    scale = min(1.0, max_side / max(width, height), MODEL_SIDE / max(width, height),
                (MODEL_PIXELS / (width * height)) ** 0.5)
    while max(width, height) * scale >= MIN_SIDE:
        target = (max(1, round(width * scale)), max(1, round(height * scale)))
        resized = frame.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
        # PNG where the source was not JPEG, unless a PNG this size would be far over (its bytes scale with the
        # pixels: a photo saved as PNG); JPEG unless transparency needs PNG
        png_guess = len(data) * target[0] * target[1] / (width * height) if media_type == "image/png" else 0
        kinds = ("png",) if alpha else ("jpeg",) if media_type == "image/jpeg" or png_guess > 2 * max_bytes \
            else ("png", "jpeg")
        for kind in kinds:
            out = io.BytesIO()
            resized.save(out, format=kind.upper(), **({"quality": 85} if kind == "jpeg" else {}))
            if out.tell() <= max_bytes:
                return Picture(out.getvalue(), f"image/{kind}", *target, original=(width, height))
        scale *= 0.75
    raise Unreadable(f"画像が大きすぎます: 縮小しても 1 回の上限（{max_bytes / 1e6:.2f} MB）に収まりません")


def is_binary(data: bytes) -> bool:
    """Not text: a NUL byte anywhere, or, read as none of :data:`_ENCODINGS`, more than 1 % undecodable."""
    if b"\x00" in data:
        return True
    for encoding in _ENCODINGS:
        try:
            data.decode(encoding)
            return False
        except UnicodeDecodeError as exc:
            if exc.start >= len(data) - 3:  # only a character cut at the end of what was read
                return False
    text = data.decode("utf-8", errors="replace")
    return text.count("\ufffd") > len(text) / 100
