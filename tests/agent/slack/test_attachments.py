"""Attachments read for the model: ``helpbot answer`` against the fake Slack (files.info, downloads with the bot
token), a scripted model that sees the blocks and the context, and the limits' notes."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agent.cli import main
from agent.core.tokens import IMAGE_TOKENS, request_tokens
from agent.slack.attachments import TEXT_CHARS, declared_size
from agent.slack.files import decode_text, file_kind
from mcp_lib.media import MAX_IMAGE_BYTES
from tests.fakes import bedrock as stub_lib
from tests.fakes import slack_scopes
from tests.fakes.attachments import ask, blocks_of, media, pdf, png, question_text
from tests.fakes.bedrock import BedrockStub
from tests.fakes.front import answer_scripted, bot_messages, event_file, markdown_of
from tests.fakes.model import Request
from tests.fakes.slack import BOT_TOKEN, FakeSlack, Token, Workspace
from tests.fakes.slack_files import add_file

LOG = ("2025-01-02 09:58:01 INFO order-import started\n"
       "2025-01-02 09:58:03 ERROR rakuten: token rejected (E-RK-4711: shop key expired on 2025-01-01)\n")


def test_an_answer_can_depend_on_text_only_inside_an_attached_log(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    log = add_file(ws, "order-import.log", LOG.encode(), channel="C0ECSUP", user="U0TANAKA", filetype="text")

    def script(request: Request) -> str:
        if "E-RK-4711" in question_text(request):
            return "ログの E-RK-4711 は楽天のショップキー期限切れです。キーを更新してください。"
        return "添付が読めないため分かりません。"

    code, _, asked = ask(ws, env, [log], script)
    assert code == 0
    answer = markdown_of(bot_messages(ws, "C0ECSUP", asked.ts)[-1])
    assert "ショップキー期限切れ" in answer
    downloads = fake.calls("files.download")
    assert len(downloads) == 1 and downloads[0].kind == "bot"  # with the bot token


def test_an_image_reaches_the_model_as_an_image_block_before_the_question(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    picture = png(40, 20)
    shot = add_file(ws, "screenshot.png", picture, channel="C0ECSUP", user="U0TANAKA", mimetype="image/png",
                    filetype="png", size=(40, 20))
    seen: list[Request] = []

    def script(request: Request) -> str:
        seen.append(request)
        blocks = media(request)
        return "画像を確認しました。" if blocks and blocks[0]["type"] == "image" else "画像がありません。"

    code, _, asked = ask(ws, env, [shot], script, text="この画面のエラーは？")
    assert code == 0
    assert "画像を確認しました" in markdown_of(bot_messages(ws, "C0ECSUP", asked.ts)[-1])
    content = seen[0].messages[-1]["content"]
    image = next(b for b in content if b["type"] == "image")
    assert image["source"] == {"type": "base64", "media_type": "image/png",
                               "data": base64.b64encode(picture).decode()}
    assert content.index(image) < len(content) - 1  # before the question's text
    assert content[content.index(image) - 1] == {"type": "text", "text": "[添付画像 1]"}  # a neutral label
    assert "- screenshot.png: [添付画像 1] として質問の前に添付（PNG、40x20 px）" in question_text(seen[0])


def test_a_pdf_is_a_document_block(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    data = pdf(1)
    doc = add_file(ws, "manual.pdf", data, channel="C0ECSUP", user="U0TANAKA", mimetype="application/pdf",
                   filetype="pdf")
    code, model, _ = ask(ws, env, [doc], lambda r: "PDF を読みました。")
    assert code == 0
    [block] = media(model.requests[0])
    assert block["type"] == "document" and block["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(block["source"]["data"]) == data
    assert "manual.pdf: [添付 PDF 1] として質問の前に添付（1 ページ）" in question_text(model.requests[0])


def test_files_that_cannot_be_read_are_named_with_the_reason(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    ws.add_channel("C0HIDDEN", "hidden", private=True, bot_member=False)
    files = [
        add_file(ws, "huge.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * (MAX_IMAGE_BYTES + 10), channel="C0ECSUP",
                 user="U0TANAKA", mimetype="image/png", filetype="png"),
        add_file(ws, "archive.zip", b"PK\x03\x04", channel="C0ECSUP", user="U0TANAKA", mimetype="application/zip",
                 filetype="zip"),
        add_file(ws, "spec", b"", channel="C0ECSUP", user="U0TANAKA", mode="external", filetype="gdoc"),
        add_file(ws, "gone.log", b"x", channel="C0ECSUP", user="U0TANAKA", mode="tombstone"),
        add_file(ws, "elsewhere.log", b"secret", channel="C0HIDDEN", user="U0TANAKA"),
        {"id": "F0EVIL", "name": "evil.log", "mimetype": "text/plain", "mode": "hosted",
         "url_private": "https://evil.example/files-pri/x/evil.log",
         "url_private_download": "https://evil.example/files-pri/x/download/evil.log"},
        add_file(ws, "broken.pdf", b"%PDF-1.4\n<< /Type /Page >>\n%%EOF", channel="C0ECSUP", user="U0TANAKA",
                 mimetype="application/pdf", filetype="pdf"),
    ]
    code, model, _ = ask(ws, env, files, lambda r: "分かりません。")
    assert code == 0
    text = question_text(model.requests[0])
    assert not media(model.requests[0])
    for name, why in [("huge.png", "画像として読めません（壊れているか、対応していない形式です）"),
                      ("archive.zip", "この種類のファイルは読みません（ZIP）"),
                      ("spec", "外部サービス（Google Drive など）のファイルは読みません"),
                      ("gone.log", "削除されています"),
                      ("elsewhere.log", "files.info: "),  # the bot cannot see it: file_not_found
                      ("evil.log", "files.info: "),  # a file object Slack does not know: its URLs are never used
                      ("broken.pdf", "PDF として読めません（壊れているか、パスワードが掛かっています）")]:
        assert re.search(rf"- {_label(name)}: 読めませんでした（{re.escape(why)}", text), name
    assert "secret" not in text
    # only the ones worth a download were downloaded (files.info first for each: where it is shared)
    assert [c.params["path"].rsplit("/", 1)[-1] for c in fake.calls("files.download")] == ["huge.png",
                                                                                             "broken.pdf"]


def _label(name: str) -> str:
    """The name a file is listed under (a tombstone has none: its id stands in)."""
    return re.escape(name) if name != "gone.log" else r"F0FILE\d+"


def test_a_slack_connect_stub_is_looked_up_with_files_info_and_thread_files_count_too(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    root_log = add_file(ws, "root.log", b"ROOT-ONLY-7 happened\n", channel="C0ECSUP", user="U0SUZUKI")
    stub = add_file(ws, "stub.txt", b"STUB-ONLY-9\n", channel="C0ECSUP", user="U0TANAKA", access="check_file_info")
    root = ws.post("C0ECSUP", "注文取込が止まりました", user="U0SUZUKI", files=[root_log])
    asked = ws.post("C0ECSUP", "こちらのファイルもどうぞ", user="U0TANAKA", thread_ts=root.ts, files=[stub])
    code, model = answer_scripted(env, lambda r: "確認しました。", channel="C0ECSUP", ts=asked.ts)
    assert code == 0
    text = question_text(model.requests[0])
    assert "STUB-ONLY-9" in text and "ROOT-ONLY-7" in text
    assert text.index("stub.txt") < text.index("root.log")  # the question's own file first
    assert len(fake.calls("files.info")) == 2  # each file's: where it is shared is known only there


def test_long_text_keeps_head_and_tail_with_a_note(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    body = "START-MARK\n" + "ok line\n" * 5_000 + "FATAL-AT-THE-END\n"
    log = add_file(ws, "long.log", body.encode(), channel="C0ECSUP", user="U0TANAKA")
    _, model, _ = ask(ws, env, [log], lambda r: "確認しました。")
    text = question_text(model.requests[0])
    assert "START-MARK" in text and "FATAL-AT-THE-END" in text
    assert "long.log: テキストとして下に掲載（長いため中略 " in text and "…[helpbot: 中略 " in text


def test_pieces() -> None:
    assert decode_text("ログ：エラー".encode("cp932")) == "ログ：エラー"
    assert decode_text("\ufeffBOM".encode()) == "BOM"
    assert file_kind({"name": "main.py", "mimetype": "application/octet-stream"}) == "text"
    assert file_kind({"name": "a.xlsx", "mimetype": "application/vnd.ms-excel", "filetype": "xlsx"}) is None
    assert TEXT_CHARS < 20_000  # within the loop's cut of the whole context


@pytest.mark.parametrize("size", [1_000, 3_000_000])
def test_media_blocks_count_as_the_model_sees_them_not_as_base64(size: int) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(b"\x00" * size).decode()}}
    without = request_tokens("", [], [{"role": "user", "content": [{"type": "text", "text": "q"}]}])
    with_image = request_tokens("", [], [{"role": "user", "content": [image, {"type": "text", "text": "q"}]}])
    assert with_image - without == IMAGE_TOKENS


def test_without_files_read_the_file_is_named_with_the_scope_and_nothing_is_downloaded(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    ws.tokens[BOT_TOKEN] = Token("bot", ws.bot_user_id, slack_scopes.granted("bot") - {"files:read"})
    log = add_file(ws, "order-import.log", LOG.encode(), channel="C0ECSUP", user="U0TANAKA")
    code, model, _ = ask(ws, env, [log], lambda r: "分かりません。")
    assert code == 0
    text = question_text(model.requests[0])
    assert "order-import.log: 読めませんでした（files.info: " in text and "'files:read'" in text
    assert "E-RK-4711" not in text
    assert fake.calls("files.download") == []  # files.info (which needs the scope too) comes first


# -- through the real model client to the Bedrock stub --------------------------------------------------------------


def test_through_the_sdk_an_image_arrives_as_a_base64_block_and_a_refused_pdf_is_asked_again_without_it(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path) -> None:
    picture = png(8, 8)
    files = [add_file(ws, "shot.png", picture, channel="C0ECSUP", user="U0TANAKA", mimetype="image/png",
                      filetype="png"),
             add_file(ws, "spec.pdf", pdf(1), channel="C0ECSUP", user="U0TANAKA", mimetype="application/pdf",
                      filetype="pdf")]
    asked = ws.post("C0ECSUP", "この画面と仕様書を見てください", user="U0TANAKA", files=files)

    def responder(model_id: str, body: dict[str, Any]) -> Any:
        kinds = [b["type"] for b in blocks_of(body)]
        if "document" in kinds:  # as an endpoint without document input would
            return stub_lib.error(400, "ValidationException", "messages.0.content.2.type: unexpected 'document'")
        return stub_lib.text("画像を確認しました。" if "image" in kinds else "添付なし。")

    stub.responder = responder
    reacted = ws.reacted({"channel": "C0ECSUP", "ts": asked.ts, "user": "U0TANAKA", "reaction": "help"})
    path = event_file(tmp_path, reacted)
    assert main(["answer", "--event", path]) == 0
    assert "画像を確認しました" in markdown_of(bot_messages(ws, "C0ECSUP", asked.ts)[-1])
    last = stub.requests[-1].body
    image = next(b for b in blocks_of(last) if b["type"] == "image")
    assert image["source"] == {"type": "base64", "media_type": "image/png",
                               "data": base64.b64encode(picture).decode()}
    assert "document" not in [b["type"] for b in blocks_of(last)]
    assert "[添付 PDF 1]" not in [b.get("text") for b in blocks_of(last)]  # its label went with it
    assert any("上の添付 PDF 1 件 は渡せませんでした" in str(b.get("text")) for b in blocks_of(last))  # not the image
    assert any(b["type"] == "document" for r in stub.requests for b in blocks_of(r.body))  # it was tried first


# -- private channels and DMs: files follow the rules of the messages they come with ------------------------------
def test_an_image_in_a_private_channel_reaches_the_model_and_nothing_else(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The answer goes to the private channel itself, so the model may see its screenshot; the Actions log, the
    job summary and the trace get neither the image nor the file's name (images are not masked: kept out)."""
    picture = png(30, 10)
    shot = add_file(ws, "secret-dashboard.png", picture, channel="C0SECRET", user="U0TANAKA",
                    mimetype="image/png", filetype="png", size=(30, 10))
    trace, summary = tmp_path / "trace.jsonl", tmp_path / "summary.md"
    env.update(GITHUB_ACTIONS="true", HELPBOT_TRACE_FILE=str(trace), GITHUB_STEP_SUMMARY=str(summary))
    code, model, asked = ask(ws, env, [shot], lambda r: "画面を確認しました。" if media(r) else "画像なし。",
                             text="この画面の数字は正しい？", channel="C0SECRET")
    assert code == 0 and media(model.requests[0])[0]["source"]["data"] == base64.b64encode(picture).decode()
    assert "画面を確認しました" in markdown_of(bot_messages(ws, "C0SECRET", asked.ts)[-1])
    out = capsys.readouterr()
    everything = out.out + out.err + trace.read_text(encoding="utf-8") + summary.read_text(encoding="utf-8")
    encoded = base64.b64encode(picture).decode()
    for private in (encoded, encoded[:40], "secret-dashboard", "この画面の数字"):
        assert private not in everything, private


def test_a_public_runs_trace_carries_no_image_data(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                   tmp_path: Path) -> None:
    picture = png(30, 10)
    shot = add_file(ws, "screen.png", picture, channel="C0ECSUP", user="U0TANAKA", mimetype="image/png",
                    filetype="png", size=(30, 10))
    env["HELPBOT_TRACE_FILE"] = str(tmp_path / "trace.jsonl")
    code, model, _ = ask(ws, env, [shot], lambda r: "確認しました。")
    assert code == 0 and media(model.requests[0])
    assert base64.b64encode(picture).decode()[:40] not in (tmp_path / "trace.jsonl").read_text(encoding="utf-8")


def test_files_in_a_dm_are_never_looked_at(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    shot = add_file(ws, "dm.png", png(10, 10), channel="D0TANAKA", user="U0TANAKA", mimetype="image/png",
                    filetype="png", size=(10, 10))
    log = add_file(ws, "dm.log", LOG.encode(), channel="D0TANAKA", user="U0TANAKA")
    code, model, _ = ask(ws, env, [shot, log], lambda r: "答え", channel="D0TANAKA")
    assert code == 0 and model.requests == []
    assert not fake.calls("files.download") and not fake.calls("files.info")


def test_a_private_file_on_a_public_message_is_not_downloaded_and_is_named_as_not_readable(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """The file is shared only in the private #secret-ops (helpbot is a member there); the message that carries
    it is in public #ec-support, where the answer goes: it is not read, and its content never reaches the model."""
    secret = add_file(ws, "payroll.log", b"SALARY-TABLE-42\n", channel="C0SECRET", user="U0TANAKA")
    public = add_file(ws, "public.log", b"PUBLIC-LINE-7\n", channel="C0GENERAL", user="U0TANAKA")

    def script(request: Request) -> str:
        text = question_text(request)
        return "payroll.log は読めませんでした。" if "payroll.log: 読めませんでした" in text else "読めました。"

    code, model, asked = ask(ws, env, [secret, public], script)
    assert code == 0
    text = question_text(model.requests[0])
    assert "- payroll.log: 読めませんでした（この回答先で共有されていないファイルのため読みません）" in text
    assert "SALARY-TABLE-42" not in text and "C0SECRET" not in text and "secret-ops" not in text
    assert "PUBLIC-LINE-7" in text  # shared in another public channel: as readable as its messages
    downloads = [c.params["path"] for c in fake.calls("files.download")]
    assert len(downloads) == 1 and downloads[0].endswith("/public.log")
    assert "payroll.log は読めませんでした" in markdown_of(bot_messages(ws, "C0ECSUP", asked.ts)[-1])


def test_in_a_private_channel_its_own_files_are_read_but_not_another_private_channels(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    ws.add_channel("C0OTHER", "other-private", private=True, members={"U0TANAKA"})
    own = add_file(ws, "own.log", b"OWN-LINE-1\n", channel="C0SECRET", user="U0TANAKA")
    other = add_file(ws, "other.log", b"OTHER-LINE-2\n", channel="C0OTHER", user="U0TANAKA")
    code, model, _ = ask(ws, env, [own, other], lambda r: "確認しました。", channel="C0SECRET")
    assert code == 0
    text = question_text(model.requests[0])
    assert "OWN-LINE-1" in text and "OTHER-LINE-2" not in text
    assert "- other.log: 読めませんでした（この回答先で共有されていないファイルのため読みません）" in text
    assert [c.params["path"].rsplit("/", 1)[-1] for c in fake.calls("files.download")] == ["own.log"]


def test_files_info_says_where_a_file_is_shared_as_slack_documents(ws: Workspace, fake: FakeSlack) -> None:
    shot = add_file(ws, "a.log", b"x", channel="C0SECRET", user="U0TANAKA")
    posted = ws.post("C0SECRET", "ログです", user="U0TANAKA", files=[shot])
    info = httpx2.post(f"{fake.url}files.info", data={"file": shot["id"]},
                      headers={"Authorization": f"Bearer {BOT_TOKEN}"}).json()["file"]
    assert info["channels"] == [] and info["groups"] == ["C0SECRET"] and info["ims"] == []
    [share] = info["shares"]["private"]["C0SECRET"]
    assert share["ts"] == posted.ts and share["channel_name"] == "secret-ops"
    history = httpx2.post(f"{fake.url}conversations.history", data={"channel": "C0SECRET"},
                         headers={"Authorization": f"Bearer {BOT_TOKEN}"}).json()["messages"]
    [message] = [m for m in history if m["ts"] == posted.ts]
    assert not {"channels", "groups", "ims", "shares"} & set(message["files"][0])  # only files.info tells


@pytest.mark.parametrize(("size", "read"), [(1_000, 1_000), ("2048", 2048), ("abc", 0), ([1], 0), (None, 0), (-5, 0),
                                            (pytest.param(10**400, 2**53, id="400 digits"))])
def test_a_files_size_slack_gives_is_read_as_a_count_whatever_it_is(size: Any, read: int) -> None:
    declared = declared_size({"size": size})
    assert declared == read and f"{declared / 1e6:.1f}"  # the "MB" of a notice can be written
