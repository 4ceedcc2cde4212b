"""Every request within Bedrock's documented limits (tests/fakes/bedrock.py refuses what Bedrock refuses): images
downscaled to fit the request's bytes and the per-image limits, PDFs counted by their real pages, binary content
found anywhere in a "text" file, and a 400 asked again without the media it names."""

from __future__ import annotations

import base64
import functools
import io
import random
import struct
from pathlib import Path
from typing import Any

import httpx2
import pytest
from PIL import Image

from agent.cli import main
from agent.core.tokens import PDF_PAGE_TOKENS, media_tokens, pdf_pages
from agent.errors import Unreadable
from agent.slack.attachments import suspects, without_media
from agent.slack.files import MEDIA_BYTES, REQUEST_BYTES, Picture, fit_image, is_binary, read_image
from mcp_lib.media import MAX_IMAGE_BYTES
from tests.fakes import bedrock as stub_lib
from tests.fakes.attachments import ask, blocks_of, corrupt, media, pdf, photo, png, question_text
from tests.fakes.bedrock import BedrockStub
from tests.fakes.front import bot_messages, event_file, markdown_of
from tests.fakes.slack import FakeSlack, Workspace
from tests.fakes.slack_files import add_file


@functools.cache
def screenshot(seed: int = 0, size: tuple[int, int] = (1100, 1100)) -> bytes:
    """A PNG that does not compress (noise): 1100x1100 is ~3.63 MB, just within the per-image 3.75 MB."""
    noise = random.Random(seed).randbytes(size[0] * size[1] * 3)
    out = io.BytesIO()
    Image.frombytes("RGB", size, noise).save(out, format="PNG", compress_level=0)
    return out.getvalue()


def encoded(image: Image.Image, kind: str) -> bytes:
    out = io.BytesIO()
    image.save(out, format=kind)
    return out.getvalue()


def answer(ws: Workspace, tmp_path: Path, asked_ts: str) -> int:
    payload = ws.reacted({"channel": "C0ECSUP", "ts": asked_ts, "reaction": "help", "user": "U0TANAKA"})
    return main(["answer", "--event", event_file(tmp_path, payload)])


# -- images: the request's bytes and each image's limits --------------------------------------------------------
def test_eight_large_screenshots_go_in_one_request_under_the_limit_downscaled(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path) -> None:
    """Eight screenshots, each within the per-image limit, are ~39 MB of base64 together: Bedrock refuses that
    body. They are downscaled into one request within 20 MB, the model is told, and the run answers."""
    shots = [screenshot()] * 8  # the same screen pasted eight times: eight files all the same
    assert all(3_600_000 < len(s) <= MAX_IMAGE_BYTES for s in shots)
    files = [add_file(ws, f"shot{n}.png", s, channel="C0ECSUP", user="U0TANAKA", mimetype="image/png",
                      filetype="png") for n, s in enumerate(shots)]
    asked = ws.post("C0ECSUP", "この 8 枚の画面のエラーは？", user="U0TANAKA", files=files)
    stub.script(stub_lib.text("8 枚とも確認しました。"))
    assert answer(ws, tmp_path, asked.ts) == 0
    assert "8 枚とも確認しました" in markdown_of(bot_messages(ws, "C0ECSUP", asked.ts)[-1])
    [request] = stub.requests  # one request, not refused
    assert request.size < REQUEST_BYTES
    images = [b for b in blocks_of(request.body) if b["type"] == "image"]
    assert len(images) == 8
    assert sum(len(b["source"]["data"]) for b in images) <= MEDIA_BYTES
    context = "\n".join(str(b.get("text")) for b in blocks_of(request.body))
    # the smallest first, each in an equal share of what is left: the last one's share holds it as attached
    assert context.count("元の 1100x1100 px から上限に合わせて縮小") == 7


def test_an_image_over_the_pixel_limit_is_downscaled_not_refused(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    wide = add_file(ws, "wide.png", png(9000, 20), channel="C0ECSUP", user="U0TANAKA", mimetype="image/png",
                    filetype="png")
    code, model, _ = ask(ws, env, [wide], lambda r: "確認しました。")
    assert code == 0
    [block] = media(model.requests[0])
    with Image.open(io.BytesIO(base64.b64decode(block["source"]["data"]))) as image:
        assert image.size == (1568, 3)  # the model's own scale (long edge 1568 px), aspect ratio kept
    assert "wide.png: [添付画像 1] として質問の前に添付（PNG、1568x3 px。元の 9000x20 px から上限に合わせて縮小）" \
        in question_text(model.requests[0])


def test_fitting_keeps_what_fits_and_re_encodes_what_does_not() -> None:
    small = png(40, 20)
    assert fit_image(read_image(small), max_bytes=MAX_IMAGE_BYTES).data == small  # as attached
    photo = Image.frombytes("RGB", (1800, 1200), random.Random(1).randbytes(1800 * 1200 * 3))
    fitted = fit_image(read_image(encoded(photo, "JPEG")), max_bytes=500_000)
    assert fitted.media_type == "image/jpeg" and len(fitted.data) <= 500_000 and fitted.original == (1800, 1200)
    assert abs(fitted.width / fitted.height - 1.5) < 0.01
    clear = Image.new("RGBA", (9000, 300), (255, 0, 0, 0))
    kept = fit_image(read_image(encoded(clear, "PNG")), max_bytes=MAX_IMAGE_BYTES)
    assert kept.media_type == "image/png" and (kept.width, kept.height) == (1568, 52)  # transparency stays PNG
    noise = read_image(screenshot())
    assert fit_image(noise, max_bytes=900_000).media_type == "image/jpeg"  # PNG does not fit: JPEG does
    with pytest.raises(Unreadable, match="縮小しても"):
        fit_image(noise, max_bytes=2_000)


@pytest.mark.parametrize("kind", ["PNG", "JPEG", "GIF", "WEBP"])
def test_a_real_image_of_each_type_is_attached_as_it_is(kind: str) -> None:
    data = photo(kind)
    assert fit_image(read_image(data), max_bytes=MAX_IMAGE_BYTES) == Picture(data, f"image/{kind.lower()}", 64, 48)


@pytest.mark.parametrize(("data", "why"), [
    (corrupt("PNG"), "画像として読めません（壊れているか、対応していない形式です）"),
    (corrupt("JPEG"), "画像として読めません（壊れているか、対応していない形式です）"),
    (png(40, 20)[:-40], "画像として読めません（壊れているか、対応していない形式です）"),  # cut short
    (png(1, 1)[:16] + struct.pack(">II", 100_000, 100_000) + png(1, 1)[24:], "画像が大きすぎます: 上限 8000 万画素"),
    (b"BM" + b"\x00" * 60, "画像として読めません（PNG / JPEG / GIF / WebP ではありません）"),
], ids=["corrupt png", "corrupt jpeg", "truncated", "bomb", "bitmap"])
def test_an_image_that_does_not_decode_whole_is_unreadable(data: bytes, why: str) -> None:
    with pytest.raises(Unreadable) as refused:
        read_image(data)
    assert str(refused.value) == why


def test_a_corrupt_attachment_is_named_and_the_others_reach_the_model(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path) -> None:
    """Through the SDK to the stub, which refuses an image that does not decode as Bedrock does: the broken files
    never reach it, so the question is answered in one request with the image that is whole."""
    files = [add_file(ws, name, data, channel="C0ECSUP", user="U0TANAKA", mimetype=f"image/{kind}", filetype=kind)
             for name, data, kind in [("broken.png", corrupt("PNG"), "png"), ("broken.jpg", corrupt("JPEG"), "jpeg"),
                                      ("shot.png", png(30, 10), "png")]]
    asked = ws.post("C0ECSUP", "この画面は？", user="U0TANAKA", files=files)
    stub.script(stub_lib.text("画面を確認しました。"))
    assert answer(ws, tmp_path, asked.ts) == 0
    assert "画面を確認しました" in markdown_of(bot_messages(ws, "C0ECSUP", asked.ts)[-1])
    [request] = stub.requests
    assert [base64.b64decode(b["source"]["data"]) for b in blocks_of(request.body) if b["type"] == "image"] == \
        [png(30, 10)]
    context = "\n".join(str(b.get("text")) for b in blocks_of(request.body))
    for name in ("broken.png", "broken.jpg"):
        assert f"{name}: 読めませんでした（画像として読めません（壊れているか、対応していない形式です））" in context


# -- PDFs ---------------------------------------------------------------------------------------------------------
def test_a_60_page_pdf_with_object_streams_counts_60_pages(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    data = pdf(60, object_streams=True)
    assert pdf_pages(data) == 60 and pdf_pages(pdf(3)) == 3
    block = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                            "data": base64.b64encode(data).decode()}}
    assert media_tokens(block) == 60 * PDF_PAGE_TOKENS  # charged as it is read
    doc = add_file(ws, "manual.pdf", data, channel="C0ECSUP", user="U0TANAKA", mimetype="application/pdf",
                   filetype="pdf")
    code, model, _ = ask(ws, env, [doc], lambda r: "確認しました。")
    assert code == 0 and not media(model.requests[0])
    assert "manual.pdf: 読めませんでした（PDF が長すぎます: 60 ページ、" in question_text(model.requests[0])


# -- text -----------------------------------------------------------------------------------------------------------
def test_a_text_file_with_binary_content_after_8_kb_is_refused_as_binary(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    body = b"2025-01-02 09:58:01 INFO ok\n" * 400 + b"\x00\x01\x02\x03SECRET-BLOB\xff\xfe"
    assert b"\x00" not in body[:8192]
    dump = add_file(ws, "dump.log", body, channel="C0ECSUP", user="U0TANAKA")
    code, model, _ = ask(ws, env, [dump], lambda r: "確認しました。")
    assert code == 0
    text = question_text(model.requests[0])
    assert "dump.log: 読めませんでした（テキストではありません（バイナリ））" in text and "SECRET-BLOB" not in text


def test_binary_is_told_from_text_over_the_whole_body() -> None:
    assert not is_binary("ログ：エラー\n".encode("cp932") * 3000)
    assert not is_binary("ログ：エラー\n".encode() * 3000 + "エ".encode()[:2])  # a character cut at the end
    assert is_binary(b"a" * 9000 + b"\x00")
    assert is_binary(b"text " * 2000 + bytes(range(0x80, 0x100)) * 20)  # no NUL, but not text either


# -- a 400 asks again without what it names -------------------------------------------------------------------------
def test_a_400_for_an_image_is_asked_again_without_the_images_and_answered(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path) -> None:
    files = [add_file(ws, "shot.png", png(30, 10), channel="C0ECSUP", user="U0TANAKA", mimetype="image/png",
                      filetype="png"),
             add_file(ws, "spec.pdf", pdf(1), channel="C0ECSUP", user="U0TANAKA", mimetype="application/pdf",
                      filetype="pdf")]
    asked = ws.post("C0ECSUP", "この画面は？", user="U0TANAKA", files=files)

    def responder(model_id: str, body: dict[str, Any]) -> Any:
        if any(b["type"] == "image" for b in blocks_of(body)):  # as a model that cannot decode the image would
            return stub_lib.error(400, "ValidationException",
                                  "messages.0.content.1.image.source.base64.data: Could not process image")
        return stub_lib.text("画像なしで答えます。")

    stub.responder = responder
    assert answer(ws, tmp_path, asked.ts) == 0
    assert "画像なしで答えます" in markdown_of(bot_messages(ws, "C0ECSUP", asked.ts)[-1])
    assert len(stub.requests) == 2  # once more, and only once
    kinds = [b["type"] for b in blocks_of(stub.requests[-1].body)]
    assert "image" not in kinds and "document" in kinds  # the PDF the error did not name stays
    assert any("上の添付 画像 1 件 は渡せませんでした" in str(b.get("text")) for b in blocks_of(stub.requests[-1].body))


def test_which_media_a_400_names() -> None:
    assert suspects("HTTP 400 ValidationException: messages.0.content.2.type: unexpected 'document'") == \
        ("document",)
    assert suspects("messages.3.content.0.image.source.base64: image exceeds 5 MB maximum") == ("image",)
    assert suspects("Input is too long for requested model.") == ("image", "document")
    blocks = [{"type": "text", "text": "[添付画像 1]"}, {"type": "image"}, {"type": "text", "text": "[添付 PDF 1]"},
              {"type": "document"}]
    assert without_media(blocks, ("image",))[0] == blocks[2:]
    assert without_media(blocks[2:], ("image",)) == (blocks[2:], "")  # nothing to drop: no second try


# -- the stub is as strict as Bedrock -------------------------------------------------------------------------------
def invoke(stub: BedrockStub, body: dict[str, Any] | bytes) -> httpx2.Response:
    data = body if isinstance(body, bytes) else httpx2.Request("POST", "/", json=body).content
    return httpx2.post(f"{stub.url}/model/m/invoke", content=data,
                       headers={"authorization": "Bearer k", "content-type": "application/json"})


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"anthropic_version": stub_lib.BEDROCK_VERSION, "max_tokens": 10,
            "messages": [{"role": "user", "content": [*blocks, {"type": "text", "text": "q"}]}]}


def image_block(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                        "data": base64.b64encode(data).decode()}}


def test_the_stub_refuses_what_bedrock_refuses() -> None:
    small = png(10, 10)
    document = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                               "data": base64.b64encode(pdf(101)).decode()}}
    cases = [
        (user({"type": "text", "text": "x" * 21_000_000}), "Input is too long for requested model."),
        (user({"type": "text", "text": "x" * 26_000_000}), "Member must have length less than or equal to 25000000"),
        (user(image_block(b"\x89PNG" + b"\x00" * 4_000_000)), "image exceeds 5 MB maximum"),
        (user(image_block(png(8001, 1))), "exceed max allowed size: 8000 pixels"),
        (user(*[image_block(small)] * 20, image_block(png(2001, 1))), "for many-image requests: 2000 pixels"),
        (user(*[image_block(small)] * 101), "Too much media: 0 document pages + 101 images > 100"),
        (user(image_block(small, "image/jpeg")), "Image does not match the provided media type image/jpeg"),
        (user(image_block(corrupt("PNG"))), "Could not process image"),
        (user(document), "A maximum of 100 PDF pages may be provided."),
    ]
    with BedrockStub() as running:
        running.script(stub_lib.text("ok"))
        for body, why in cases:
            response = invoke(running, body)
            assert response.status_code == 400, why
            assert response.headers["x-amzn-errortype"].startswith("ValidationException")
            assert why in response.json()["message"]
        assert invoke(running, user(*[image_block(small)] * 21)).status_code == 200  # small ones: fine
        assert invoke(running, user(image_block(png(8000, 1)))).status_code == 200
