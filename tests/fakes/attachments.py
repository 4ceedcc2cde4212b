"""Attachments as Slack serves them (real images and PDFs, and images broken past their header), and what a scripted
model's request holds of them."""

from __future__ import annotations

import io
import random
import struct
import zlib
from typing import Any

from PIL import Image
from pypdf import PdfWriter

from tests.fakes.front import answer_scripted
from tests.fakes.model import Request
from tests.fakes.slack import Workspace


def png(width: int, height: int) -> bytes:
    """A real (tiny, grey) PNG of the given size."""
    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def photo(kind: str, size: tuple[int, int] = (64, 48), frames: int = 1) -> bytes:
    """A real image of noise as Pillow writes it: ``kind`` PNG, JPEG, GIF or WEBP; GIF and WEBP animate with
    ``frames``."""
    shots = [Image.frombytes("RGB", size, random.Random(n).randbytes(size[0] * size[1] * 3)) for n in range(frames)]
    out = io.BytesIO()
    shots[0].save(out, format=kind, **({"save_all": True, "append_images": shots[1:]} if frames > 1 else {}))
    return out.getvalue()


def corrupt(kind: str) -> bytes:
    """A PNG or JPEG whose header is whole (type and size readable) and whose pixel data is not: a PNG's IDAT of
    noise (its CRC right), a JPEG's scan of start-of-image markers."""
    if kind == "PNG":
        good = png(40, 20)
        at = good.index(b"IDAT") - 4
        noise = random.Random(0).randbytes(500)
        return good[:at] + struct.pack(">I", len(noise)) + b"IDAT" + noise + \
            struct.pack(">I", zlib.crc32(b"IDAT" + noise)) + good[-12:]
    good = photo("JPEG")
    scan = good.index(b"\xff\xda") + 14  # the scan header of 3 components
    return good[:scan] + b"\xff\xd8" * ((len(good) - scan) // 2) + b"\xff\xd9"


def pdf(pages: int, *, object_streams: bool = False) -> bytes:
    """A real PDF of blank pages (pypdf writes it); ``object_streams``: built by hand with its page objects inside
    a compressed object stream, as PDF 1.5 writers do (pypdf reads such files but does not write them)."""
    if not object_streams:
        writer = PdfWriter()
        for _ in range(pages):
            writer.add_blank_page(width=595, height=842)
        out = io.BytesIO()
        writer.write(out)
        return out.getvalue()
    # objects 2 (Pages) and 3.. (Page) inside one compressed object stream, found through an xref stream
    kids = " ".join(f"{n} 0 R" for n in range(3, 3 + pages))
    inner = [(2, f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>")]
    inner += [(n, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>") for n in range(3, 3 + pages)]
    offsets, body = [], b""
    for number, text in inner:
        offsets.append(f"{number} {len(body)}")
        body += text.encode() + b"\n"
    header = " ".join(offsets).encode() + b"\n"
    stream = zlib.compress(header + body)
    objstm, xref = 3 + pages, 4 + pages
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    at = {1: len(out)}
    out += b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
    at[objstm] = len(out)
    out += (f"{objstm} 0 obj\n<< /Type /ObjStm /N {len(inner)} /First {len(header)} /Filter /FlateDecode "
            f"/Length {len(stream)} >>\nstream\n").encode() + stream + b"\nendstream\nendobj\n"
    at[xref] = len(out)
    rows = b"\x00" + (0).to_bytes(4, "big") + b"\xff\xff"
    for number in range(1, xref + 1):
        if number in at:
            rows += b"\x01" + at[number].to_bytes(4, "big") + b"\x00\x00"
        else:
            rows += b"\x02" + objstm.to_bytes(4, "big") + (number - 2).to_bytes(2, "big")
    out += (f"{xref} 0 obj\n<< /Type /XRef /Size {xref + 1} /W [1 4 2] /Root 1 0 R /Length {len(rows)} >>\n"
            "stream\n").encode() + rows + b"\nendstream\nendobj\n"
    out += f"startxref\n{at[xref]}\n%%EOF\n".encode()
    return bytes(out)


def question_text(request: Request) -> str:
    return "\n".join(b["text"] for b in request.messages[-1]["content"] if b.get("type") == "text")


def media(request: Request) -> list[dict[str, Any]]:
    return [b for b in request.messages[-1]["content"] if b.get("type") in ("image", "document")]


def ask(ws: Workspace, env: dict[str, str], files: list[dict[str, Any]], script: Any, *,
        text: str = "このエラーの原因は？", channel: str = "C0ECSUP") -> tuple[int, Any, Any]:
    asked = ws.post(channel, text, user="U0TANAKA", files=files)
    code, model = answer_scripted(env, script, channel=channel, ts=asked.ts)
    return code, model, asked


def blocks_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
