"""Files in the fake Slack: ``files.info`` and the ``url_private(_download)`` downloads, as Slack serves them.

Seed a file with :func:`add_file` and attach the object it returns to a message::

    log = add_file(ws, "error.log", b"...", channel="C0ECSUP", user="U0TANAKA")
    ws.post("C0ECSUP", "このエラーは？", user="U0TANAKA", files=[log])

Messages carry the full file object, as Slack's conversations.replies does (``url_private`` and
``url_private_download`` point at the fake server); ``access="check_file_info"`` gives the Slack Connect stub
instead, whose details only ``files.info`` tells. ``mode="external"`` (a Google Drive link), ``"tombstone"``
(deleted) and ``"hidden_by_limit"`` (the free plan's limit) are Slack's other modes.

A download answers the file's bytes with its mimetype, only with ``Authorization: Bearer`` and a token with
``files:read`` whose user can see a conversation the file is shared in (else 404); without the token or the
scope, Slack's answer to a browser without a session: a 302 to the workspace's sign-in page. ``files.info`` for a
file the token cannot see is ``file_not_found``.

Where a file is shared, only ``files.info`` tells (https://api.slack.com/types/file,
https://api.slack.com/methods/files.info): ``channels`` (public channels), ``groups`` (private channels and group
DMs), ``ims`` (DMs) and ``shares.public`` / ``shares.private`` keyed by channel id, each share with its message's
``ts``, ``channel_name`` and ``team_id``. Stricter where unsure: private conversations are listed only when the
token's user is a member, and a message's copy of the file carries none of these fields.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from tests.fakes.slack import Channel, Token, Workspace

_ids = itertools.count(1)


@dataclass
class FakeFile:
    id: str
    name: str
    content: bytes
    mimetype: str
    filetype: str
    user: str
    channels: list[str] = field(default_factory=list)  # where it is shared
    mode: str = "hosted"  # hosted | external | tombstone | hidden_by_limit
    access: str | None = None  # "check_file_info": messages carry only a stub
    width: int | None = None
    height: int | None = None
    url: str | None = None  # a download URL Slack would never give (tests of the credential door), else the fake's


def add_file(ws: Workspace, name: str, content: bytes, *, channel: str, user: str, mimetype: str = "text/plain",
             filetype: str = "text", mode: str = "hosted", access: str | None = None,
             size: tuple[int, int] | None = None) -> dict[str, Any]:
    """Seed a file shared in ``channel``; returns the object to put in a message's ``files``."""
    file = FakeFile(id=f"F0FILE{next(_ids):04d}", name=name, content=content, mimetype=mimetype,
                    filetype=filetype, user=user, channels=[channel], mode=mode, access=access,
                    width=size[0] if size else None, height=size[1] if size else None)
    ws.files[file.id] = file
    return {"id": file.id}


def file_to_api(ws: Workspace, file: FakeFile, base: str, *, stub: bool = False,
                token: Token | None = None) -> dict[str, Any]:
    """The file object as Slack returns it: to files.info for ``token`` (with where it is shared), else as a
    message carries it (``stub``: a check_file_info file)."""
    if file.mode in ("tombstone", "hidden_by_limit"):
        return {"id": file.id, "mode": file.mode}
    if stub:
        return {"id": file.id, "file_access": "check_file_info", "created": 1735779600, "timestamp": 1735779600,
                "user": file.user}
    kinds = {c: ws.channels[c] for c in file.channels if c in ws.channels}
    out: dict[str, Any] = {
        "id": file.id, "created": 1735779600, "timestamp": 1735779600, "name": file.name, "title": file.name,
        "mimetype": file.mimetype, "filetype": file.filetype, "pretty_type": file.filetype.upper(),
        "user": file.user, "user_team": ws.team_id, "editable": False, "size": len(file.content),
        "mode": file.mode, "is_external": file.mode == "external", "external_type": "gdrive" if file.mode ==
        "external" else "", "is_public": any(c.is_public for c in kinds.values()), "public_url_shared": False,
        "display_as_bot": False, "username": "",
        "permalink": f"{ws.url}files/{file.user}/{file.id}/{quote(file.name)}",
    }
    if token is not None:
        out.update(_sharing(ws, file, {c: ch for c, ch in kinds.items() if ch.is_public or token.user in ch.members}))
    if file.mode == "external":
        out["url_private"] = f"https://docs.google.com/document/d/{file.id}/edit"
    else:
        path = f"/files-pri/{ws.team_id}-{file.id}"
        out["url_private"] = f"{base}{path}/{quote(file.name)}"
        out["url_private_download"] = file.url or f"{base}{path}/download/{quote(file.name)}"
    if file.width and file.height:
        out.update({"original_w": file.width, "original_h": file.height})
    return out


def _sharing(ws: Workspace, file: FakeFile, kinds: dict[str, Channel]) -> dict[str, Any]:
    """``channels``/``groups``/``ims`` and ``shares`` as files.info gives them."""
    shares: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for channel_id, channel in kinds.items():
        posted = [m for m in ws.messages.get(channel_id, []) if any(f.get("id") == file.id for f in m.files)]
        ts = posted[0].ts if posted else "1735779600.000100"
        share = {"reply_users": [], "reply_users_count": 0, "reply_count": 0, "ts": ts,
                 "channel_name": channel.name, "team_id": ws.team_id, "share_user_id": file.user}
        if posted and posted[0].thread_ts:
            share["thread_ts"] = posted[0].thread_ts
        shares.setdefault("public" if channel.is_public else "private", {})[channel_id] = [share]
    return {"channels": [c for c, ch in kinds.items() if ch.is_public],
            "groups": [c for c, ch in kinds.items() if ch.is_private or ch.is_mpim],
            "ims": [c for c, ch in kinds.items() if ch.is_im], "shares": shares}


def render(ws: Workspace, seeded: dict[str, Any], base: str) -> dict[str, Any]:
    """A message's file as returned by a read: seeded ones in full (or as the stub), others as they were."""
    file = ws.files.get(str(seeded.get("id") or ""))
    if file is None:
        return dict(seeded)
    return file_to_api(ws, file, base, stub=file.access == "check_file_info")


def can_see(ws: Workspace, file: FakeFile, token: Token) -> bool:
    for channel_id in file.channels:
        channel = ws.channels.get(channel_id)
        if channel is not None and (channel.is_public or token.user in channel.members):
            return True
    return False


def files_info(ws: Workspace, params: dict[str, Any], token: Token, base: str) -> dict[str, Any]:
    from tests.fakes.slack import SlackError, _required

    file = ws.files.get(_required(params, "file"))
    if file is None or not can_see(ws, file, token):
        raise SlackError("file_not_found")
    if file.mode == "tombstone":
        raise SlackError("file_deleted")
    return {"file": file_to_api(ws, file, base, token=token), "comments": [],
            "response_metadata": {"next_cursor": ""}}


def download(ws: Workspace, path: str, token: Token | None) -> tuple[int, dict[str, str], bytes]:
    """GET /files-pri/{team}-{id}/[download/]{name}: (status, headers, body)."""
    parts = path.strip("/").split("/")
    file_id = parts[1].split("-", 1)[1] if len(parts) >= 3 and "-" in parts[1] else ""
    file = ws.files.get(file_id)
    if token is None or "files:read" not in token.granted():  # without the scope, Slack sends the sign-in page
        return 302, {"Location": f"{ws.url}?redir={quote(path)}"}, b""
    if file is None or file.mode != "hosted" or not can_see(ws, file, token):
        return 404, {"Content-Type": "text/html"}, b"<html><body>File not found</body></html>"
    return 200, {"Content-Type": file.mimetype}, file.content
