"""What a file is, read from its bytes and Slack's metadata: its kind (image, PDF, text), an image's size, a text
file's encoding, and a long text's cut. No Slack calls, no downloads: :mod:`agent.slack.attachments` does those.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Literal

Kind = Literal["image", "pdf", "text"]

IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
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


def file_kind(file: Mapping[str, Any]) -> Kind | None:
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


def image_size(data: bytes) -> tuple[str, int, int] | None:
    """(media type, width, height) from the bytes themselves (PNG, JPEG, GIF, WebP); None when they are none."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return "image/png", width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return "image/gif", width, height
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            return "image/webp", 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        if chunk == b"VP8L":
            bits = int.from_bytes(data[21:25], "little")
            return "image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if chunk == b"VP8 ":
            width, height = struct.unpack("<HH", data[26:30])
            return "image/webp", width & 0x3FFF, height & 0x3FFF
        return None
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[str, int, int] | None:
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            at += 2
            continue
        length = int.from_bytes(data[at + 2:at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return "image/jpeg", width, height
        at += 2 + length
    return None


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM), else CP932 (Shift_JIS as Windows writes it), else UTF-8 with replacements."""
    for encoding in ("utf-8-sig", "cp932"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")


def cut_middle(text: str, limit: int) -> tuple[str, int]:
    """Head and tail of ``text`` within ``limit`` characters, and how many characters were left out between."""
    if len(text) <= limit:
        return text, 0
    head = limit * 2 // 3
    tail = limit - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n…[helpbot: 中略 {left_out} 文字]…\n{text[len(text) - tail:]}", left_out
