"""What an image shown to the model may be (an attached file, or an in-house MCP server's image): the Messages
API's media types and limits (Anthropic's vision guide, Bedrock's), with the type read from the bytes, never
taken from the sender. Per result and per run the tool images are capped too: an image stays in the transcript,
and a hostile server must not carry a request past Bedrock's 20 MB or the token budget. An image is shown only when
it decodes whole (:func:`decoded_image`)."""

from __future__ import annotations

import base64
import binascii
import io
import struct
from typing import Literal, cast

ImageType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]

IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
MAX_IMAGE_BYTES = 3_750_000  # 5 MB once base64-encoded: the API's limit per image
MAX_IMAGE_SIDE = 8_000  # px; the API rejects larger images
MAX_RESULT_IMAGES = 3
MAX_RESULT_IMAGE_BYTES = MAX_IMAGE_BYTES  # all images of one tool result, raw
MAX_RUN_IMAGES = 6
MAX_RUN_IMAGE_BYTES = MAX_IMAGE_BYTES  # all tool images of one run, raw: 5 MB of the 20 MB request
MAX_DECODE_PIXELS = 80_000_000  # all frames together; larger images are not decoded (memory; Pillow warns past 89 MP)
FRAME_PIXELS = 2_048  # a frame counts at least this: one of 1 px takes as long to read (~17 us)
NOT_AN_IMAGE = "not a PNG, JPEG, GIF or WebP image"
TOO_LARGE = f"over {MAX_DECODE_PIXELS // 1_000_000} megapixels, not decoded"
CORRUPT = "it does not decode (corrupt or cut short)"


def decoded_image(data: bytes) -> tuple[ImageType, int, int] | str:
    """(media type, width, height) of an image Pillow decodes whole, every frame, as the type its header says, else
    why not: Bedrock refuses every request holding an image it cannot decode, and it stays in the transcript. Pixels
    are counted before any is decoded (a bomb declares billions in a few bytes); Pillow is imported here, as the
    relay's Lambda package (pyproject.toml's relay group) imports this module without it."""
    found = _header(data)
    if found is None:
        return NOT_AN_IMAGE
    media_type, width, height = found
    if width * height > MAX_DECODE_PIXELS:
        return TOO_LARGE
    from PIL import Image, ImageSequence

    pixels = 0
    try:
        with Image.open(io.BytesIO(data), formats=[IMAGE_TYPES[media_type].upper()]) as image:
            width, height = image.size
            for frame in ImageSequence.Iterator(image):
                pixels += max(frame.width * frame.height, FRAME_PIXELS)  # Pillow's size (a JPEG may declare two)
                if pixels > MAX_DECODE_PIXELS:
                    return TOO_LARGE
                frame.load()
    except Exception:  # any decoder failure on an attacker's bytes means the same
        return CORRUPT
    return cast(ImageType, media_type), width, height


def _header(data: bytes) -> tuple[str, int, int] | None:
    """(media type, width, height) as the header declares them (PNG, JPEG, GIF, WebP); None when it is none."""
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


def check_base64_image(data: str, undecoded: str | None = None) -> tuple[ImageType, int, int, int] | str:
    """(media type, width, height, raw bytes) of a base64 image the model may be shown, or why it may not;
    ``undecoded``, when given, is the answer for one that passes every check before the decode (none is made)."""
    if len(data) > (MAX_IMAGE_BYTES + 2) // 3 * 4 + 4:  # refused before decoding: 5 MB of base64 at most
        return f"larger than {MAX_IMAGE_BYTES / 1e6:.2f} MB"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "not valid base64"
    if len(raw) > MAX_IMAGE_BYTES:
        return f"larger than {MAX_IMAGE_BYTES / 1e6:.2f} MB"
    declared = _header(raw)
    if declared is not None and max(declared[1:]) > MAX_IMAGE_SIDE:
        return f"{declared[1]}x{declared[2]} px (at most {MAX_IMAGE_SIDE} px a side)"
    found = undecoded if undecoded is not None and declared is not None else decoded_image(raw)
    if isinstance(found, str):
        return found
    media_type, width, height = found
    if max(width, height) > MAX_IMAGE_SIDE:  # Pillow's reading of the size (a JPEG may declare two)
        return f"{width}x{height} px (at most {MAX_IMAGE_SIDE} px a side)"
    return media_type, width, height, len(raw)
