"""Which images the model may be shown (mcp_lib/media.py): only those Pillow decodes whole, as the type their header
says, within the pixel cap counted before decoding; a tool's image refused is named in the result's notes."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest
from mcp import types

from mcp_lib.media import (
    CORRUPT,
    FRAME_PIXELS,
    MAX_DECODE_PIXELS,
    MAX_RESULT_IMAGES,
    NOT_AN_IMAGE,
    TOO_LARGE,
    check_base64_image,
    decoded_image,
)
from mcp_lib.result import from_call_result
from tests.fakes.attachments import corrupt, photo, png

KINDS = ["PNG", "JPEG", "GIF", "WEBP"]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def shown(*images: bytes) -> tuple[list[str], list[str]]:
    """What an in-house server's images become: the images' data shown, and the result's notes."""
    called = types.CallToolResult(content=[types.ImageContent(type="image", data=b64(data), mime_type="image/png")
                                           for data in images])
    result = from_call_result("x", called)
    return [image.data for image in result.images], result.notes


def gif(side: int, frames: int) -> bytes:
    """A GIF of a ``side`` px square screen and ``frames`` frames of one pixel each: a few bytes a frame."""
    frame = b"\x2c" + struct.pack("<HHHH", 0, 0, 1, 1) + b"\x00\x02\x02\x44\x01\x00"  # LZW: clear, 0, end
    return b"GIF89a" + struct.pack("<HH", side, side) + b"\x80\x00\x00" + b"\x00" * 3 + b"\xff" * 3 + \
        frame * frames + b"\x3b"


@pytest.mark.parametrize("kind", KINDS)
def test_a_real_small_image_of_each_type_passes_unchanged(kind: str) -> None:
    data = photo(kind)
    media_type = f"image/{kind.lower()}"
    assert decoded_image(data) == (media_type, 64, 48)
    assert check_base64_image(b64(data)) == (media_type, 64, 48, len(data))
    assert shown(data) == ([b64(data)], [f"image 1: {media_type}, 64x48 px"])


@pytest.mark.parametrize("kind", ["PNG", "JPEG"])
def test_a_header_valid_image_with_a_corrupt_body_is_not_shown(kind: str) -> None:
    """Bedrock refuses the whole request for it, and every later one of the run: the image stays in the transcript."""
    assert check_base64_image(b64(corrupt(kind))) == CORRUPT
    assert shown(corrupt(kind), png(3, 2)) == ([b64(png(3, 2))], [
        "image 1: image/png, 3x2 px", "[1 image not shown: it does not decode (corrupt or cut short)]"])


@pytest.mark.parametrize(("kind", "frames"), [*((kind, 1) for kind in KINDS), ("GIF", 3), ("WEBP", 3)])
def test_a_truncated_image_is_refused(kind: str, frames: int) -> None:
    data = photo(kind, frames=frames)
    assert decoded_image(data[:-40]) == CORRUPT  # of an animation, its last frame only


def test_a_decompression_bomb_is_refused_by_its_header_before_pillow_reads_it() -> None:
    """A tiny file declaring billions of pixels: past Pillow's own limit open() itself raises (that would be
    CORRUPT), so TOO_LARGE is the header's count; 9000x9000 (81 MP, under Pillow's 89) would decode."""
    def grey(side: int, rows: int) -> bytes:  # a real PNG's first ``rows`` rows of zeros
        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        pixels = zlib.compressobj(9)
        idat = b"".join(pixels.compress(b"\x00" * (side + 1)) for _ in range(rows)) + pixels.flush()
        header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")

    jpeg = bytearray(photo("JPEG"))
    at = jpeg.index(b"\xff\xc0") + 5
    jpeg[at:at + 4] = struct.pack(">HH", 60_000, 60_000)
    webp = bytearray(photo("WEBP"))
    webp[26:30] = struct.pack("<HH", 16_383, 16_383)  # a VP8 frame's 14-bit sizes, the largest
    bombs = [grey(100_000, 1), grey(9000, 9000), bytes(jpeg), bytes(webp), gif(60_000, 1)]
    assert all(len(bomb) < 100_000 for bomb in bombs)
    assert [decoded_image(bomb) for bomb in bombs] == [TOO_LARGE] * 5
    assert shown(bombs[0])[1] == ["[1 image not shown: 100000x100000 px (at most 8000 px a side)]"]  # undecoded


def test_a_result_decodes_at_most_max_result_images_of_its_images() -> None:
    """Each decode may be 80 megapixels (0.7 s of CPU and 240 MB for an RGB PNG of 230 KB) and a server sends as
    many images as it likes: the ones past the first MAX_RESULT_IMAGES are over the result's limit undecoded,
    refused ones counting too (only shown ones did, so every refused one was decoded)."""
    assert shown(*[corrupt("PNG")] * MAX_RESULT_IMAGES, png(3, 2), png(3, 2)) == ([], [
        "[3 images not shown: it does not decode (corrupt or cut short)]",
        "[2 images not shown: over the limit of one result (3 images, 3.75 MB)]"])
    assert len(shown(*[b"garbage", b"BM bitmap"] * 3, png(3, 2))[0]) == 1  # refused undecoded: not counted




def test_the_pixel_cap_counts_every_frame() -> None:
    assert decoded_image(gif(2000, 20)) == ("image/gif", 2000, 2000)  # 80 MP together: at the cap
    assert decoded_image(gif(2000, 21)) == TOO_LARGE


def test_the_pixel_cap_counts_a_frame_at_least_as_its_reading_costs() -> None:
    """A frame of one pixel takes as long to read as some 2,000 (17 us): a 30 MB attachment of 1-pixel GIF frames
    (800,000 of them) was 14 s of CPU, eight of them two minutes before the question was asked."""
    assert decoded_image(gif(1, MAX_DECODE_PIXELS // FRAME_PIXELS + 1)) == TOO_LARGE
    assert decoded_image(gif(1, 3)) == ("image/gif", 1, 1)


def test_only_the_types_the_api_takes_and_sizes_it_takes_pass() -> None:
    bitmap = photo("BMP")
    assert decoded_image(bitmap) == NOT_AN_IMAGE  # Pillow decodes it; the API does not take it
    assert check_base64_image(b64(png(9000, 2))) == "9000x2 px (at most 8000 px a side)"
