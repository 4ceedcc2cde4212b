"""A fake Growi 7.x: in-memory pages behind a router for ``httpx2.MockTransport`` (or :func:`serve`).

Real shapes, taken from Growi's routes: ``GET /_api/search`` answers ``{ok: true, meta: {took, total,
hitsCount}, data: [{data: page, meta: {bookmarkCount, elasticSearchResult: {snippet, highlightedPath}}}]}``
and reports failures as HTTP 200 ``{ok: false, error}`` ("SearchService is not reachable." while Elasticsearch
is down; an empty q; a q that ``decodeURIComponent`` rejects, since Growi decodes q once more).
``GET /_api/v3/page?pageId=|path=`` answers ``{page: {..., revision: {body}}}``, 404/400 ``{errors: [...]}``
and 500 for a malformed id. Failures are scripted like the GitHub fake's (``respond``, ``slow``).

The token is read as the release ``auth`` names reads it (growilabs/growi, ``apps/app/src/server/middlewares/``):
``"query"`` is Growi 7.0.0-7.2.4, ``access-token-parser.js`` line 11 ``req.query.access_token ||
req.body.access_token`` (its swagger ``definition-apiv3.js`` documents only ``api_key: {name: access_token, in:
query}``); ``"bearer"`` is 7.2.5 and later, ``access-token-parser/extract-access-token.ts`` ``extractBearerToken(
authorization) ?? x-growi-access-token ?? req.query.access_token ?? req.body.access_token`` -- the first present
one is the token, right or wrong. A request without a valid token is a guest's (``login-required.ts``): on a wiki
``guest_readable`` it sees the public pages only; else the search (``/_api`` routes) redirects to /login and
apiv3 answers ``sendStatus(403)``. Pages carry a grant: ``"public"``; ``"group"`` (the token's user may read it,
a guest not); ``"other"`` (not the token's user either): searches leave it out, ``GET /_api/v3/page`` answers it
with 403 ``{errors: [{message: "Page is forbidden", code: "page-is-forbidden", args: {isNotFound, isForbidden}}]}``
(7.4.0+, ``routes/apiv3/page/respond-with-single-page.ts``).
"""

from __future__ import annotations

import itertools
import re
import threading
from typing import Any, Literal
from urllib.parse import unquote

import httpx2

from tests.fakes.github import Behaviour, Scripted, respond

__all__ = ["FakeGrowi", "maintenance", "too_many"]

_HIGHLIGHT = "<em class='highlighted-keyword'>{}</em>"


def too_many(retry_after: int) -> Behaviour:
    """Growi's API rate limiter (express-rate-limit) answers 429 with Retry-After."""
    return respond(429, {"errors": [{"message": "Too many requests", "code": "too-many-requests"}]},
                   {"retry-after": str(retry_after)})


def maintenance() -> Behaviour:
    """The proxy in front of a restarting Growi."""
    return respond(503, "<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>",
                   {"content-type": "text/html"})


def _decode_uri_component(value: str) -> str:
    """JavaScript's decodeURIComponent: a '%' not followed by two hex digits is a URIError."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", value):
        raise ValueError("URIError: URI malformed")
    return unquote(value, errors="strict")


Auth = Literal["query", "bearer"]
Grant = Literal["public", "group", "other"]
_GRANTS: dict[Grant, int] = {"public": 1, "group": 5, "other": 4}  # PageGrant: GRANT_PUBLIC, USER_GROUP, OWNER


class FakeGrowi:
    def __init__(self, token: str = "test-growi-token", url: str = "https://wiki.example.com", *,
                 auth: Auth = "query", guest_readable: bool = False):
        self.token = token
        self.url = url.rstrip("/")
        self.auth: Auth = auth
        self.guest_readable = guest_readable
        self.pages: dict[str, dict[str, Any]] = {}
        self.readers: dict[str, Grant] = {}
        self.search_reachable = True
        self.requests: list[httpx2.Request] = []
        self.scripted = Scripted()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # -- seeding --------------------------------------------------------------------------------------------
    def add_page(self, path: str, body: str, *, author: str = "alice", updated_at: str | None = None,
                 grant: Grant = "public") -> str:
        with self._lock:
            n = next(self._ids)
        page_id = f"6650{n:020x}"
        revision_id = f"6651{n:020x}"
        user = {"_id": f"6652{n:020x}", "username": author, "name": author.title(), "status": 2}
        self.pages[page_id] = {
            "_id": page_id, "path": path, "status": "published", "grant": _GRANTS[grant], "grantedUsers": [],
            "grantedGroups": [], "creator": user, "lastUpdateUser": user, "descendantCount": 0,
            "isEmpty": False, "commentCount": 0, "seenUsers": [], "liker": [],
            "createdAt": "2026-04-01T00:00:00.000Z",
            "updatedAt": updated_at or f"2026-05-{n % 28 + 1:02d}T03:00:00.000Z",
            "revision": {"_id": revision_id, "pageId": page_id, "body": body, "format": "markdown",
                         "author": user, "createdAt": "2026-05-01T03:00:00.000Z"},
            "__v": 0,
        }
        self.readers[page_id] = grant
        return page_id

    def script(self, method: str, path_pattern: str, *behaviours: Behaviour) -> None:
        self.scripted.add(method, path_pattern, *behaviours)

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handler)

    # -- the router -----------------------------------------------------------------------------------------
    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        path = request.url.path
        prefix = httpx2.URL(self.url).path.rstrip("/")
        if prefix:
            if not path.startswith(prefix + "/"):
                return httpx2.Response(404, text="Not Found", headers={"content-type": "text/html"})
            path = path[len(prefix):]
        behaviour = self.scripted.take(request, path)
        if behaviour is not None:
            scripted = behaviour(request)
            if scripted is not None:
                return scripted
        user = self._token_of(request) == self.token
        if path == "/_api/search" and request.method == "GET":
            if not (user or self.guest_readable):  # loginRequired on a legacy route: redirect to the login page
                return httpx2.Response(302, headers={"location": "/login"}, text="Found. Redirecting to /login")
            return self._search(request, user)
        if path.startswith("/_api/v3/"):
            if not (user or self.guest_readable):
                return httpx2.Response(403, text="Forbidden", headers={"content-type": "text/plain"})
            if path == "/_api/v3/page" and request.method == "GET":
                return self._page(request, user)
            return httpx2.Response(404, json={"errors": [{"message": "Not Found", "status": 404}]})
        return httpx2.Response(404, text="<html>Not Found</html>", headers={"content-type": "text/html"})

    def _token_of(self, request: httpx2.Request) -> str | None:
        """The token the release reads (see the module docstring), or None."""
        query = request.url.params.get("access_token")
        if self.auth == "query":
            return query
        authorization = request.headers.get("authorization", "")
        bearer = authorization[7:] if authorization.startswith("Bearer ") else None
        return bearer if bearer is not None else request.headers.get("x-growi-access-token", query)

    def _may_read(self, page: dict[str, Any], user: bool) -> bool:
        grant = self.readers[page["_id"]]
        return grant == "public" or (grant == "group" and user)

    def _search(self, request: httpx2.Request, user: bool) -> httpx2.Response:
        q = request.url.params.get("q")
        if not q:
            return httpx2.Response(200, json={"ok": False, "error": 'The param "q" should not empty.'})
        if not self.search_reachable:
            return httpx2.Response(200, json={"ok": False, "error": "SearchService is not reachable."})
        try:
            keyword = _decode_uri_component(q)
        except ValueError as exc:
            return httpx2.Response(200, json={"ok": False, "error": str(exc)})
        limit = int(request.url.params.get("limit", 50))
        offset = int(request.url.params.get("offset", 0))
        terms = [t.lower() for t in keyword.split() if not t.startswith("-") and ":" not in t]
        excluded = [t[1:].lower() for t in keyword.split() if t.startswith("-") and len(t) > 1]
        prefixes = [t.split(":", 1)[1] for t in keyword.split() if t.startswith("prefix:")]
        hits = []
        for page in self.pages.values():
            if not self._may_read(page, user):  # Growi's search filters by the viewer's grants
                continue
            text = f"{page['path']}\n{page['revision']['body']}".lower()
            if not all(t in text for t in terms) or any(t in text for t in excluded):
                continue
            if prefixes and not any(page["path"].startswith(p) for p in prefixes):
                continue
            hits.append((sum(text.count(t) for t in terms), page))
        hits.sort(key=lambda pair: -pair[0])
        chosen = hits[offset: offset + limit]
        data = [{"data": {k: v for k, v in page.items() if k != "revision"} | {"revision": page["revision"]["_id"]},
                 "meta": {"bookmarkCount": 0,
                          "elasticSearchResult": {"snippet": self._highlight(page["revision"]["body"], terms),
                                                  "highlightedPath": self._highlight(page["path"], terms)}}}
                for _, page in chosen]
        meta = {"took": 3, "total": len(hits), "hitsCount": len(data)}
        return httpx2.Response(200, json={"ok": True, "meta": meta, "data": data})

    @staticmethod
    def _highlight(text: str, terms: list[str]) -> str:
        lower = text.lower()
        found = [lower.find(t) for t in terms if lower.find(t) >= 0]
        start = max(0, min(found) - 40) if found else 0
        piece = text[start: start + 160].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        for term in terms:
            piece = re.sub(re.escape(term), lambda m: _HIGHLIGHT.format(m.group(0)), piece, flags=re.I)
        return piece

    def _page(self, request: httpx2.Request, user: bool) -> httpx2.Response:
        page_id = request.url.params.get("pageId")
        path = request.url.params.get("path")
        if page_id is None and path is None:
            return httpx2.Response(400, json={"errors": [{
                "message": "Either parameter of (pageId or path) or (pageId and shareLinkId) is required.",
                "code": None}]})
        if page_id is not None:
            if not re.fullmatch(r"[0-9a-f]{24}", page_id):
                return httpx2.Response(500, json={"errors": [{
                    "message": f'Cast to ObjectId failed for value "{page_id}" (type string) at path "_id" '
                               'for model "Page"', "code": None}]})
            page = self.pages.get(page_id)
        else:
            normalized = "/" + (path or "").strip("/")
            page = next((p for p in self.pages.values() if p["path"] == normalized), None)
        if page is None:
            return httpx2.Response(404, json={"errors": [{"message": "Page is not found", "code": "page-not-found",
                                                         "args": {"isNotFound": True, "isForbidden": False}}]})
        if not self._may_read(page, user):
            return httpx2.Response(403, json={"errors": [{"message": "Page is forbidden", "code": "page-is-forbidden",
                                                         "args": {"isNotFound": True, "isForbidden": True}}]})
        return httpx2.Response(200, json={"page": page})



def page_as_the_model_reads_it(body: str, *, token: str, url: str, env: dict[str, str] | None = None) -> str:
    """``growi_getPage`` of a page with ``body``, end to end through a Registry (its credential mask, its limits;
    ``env`` adds variables, and so held values): the result's JSON, what the model reads."""
    from mcp_lib.platforms import growi
    from mcp_lib.registry import Registry
    from tests.fakes.clock import FakeClock

    fake = FakeGrowi(token=token, url=url)
    fake.add_page("/手順/罠", body)
    full = {"GROWI_URL": url, "GROWI_ACCESS_TOKEN": token, **(env or {})}
    config = growi.load_config(full)
    assert config is not None
    registry = Registry(env=full, clients={"growi": growi.make_client(config, transport=fake.transport())},
                        clock=FakeClock(wall=1_800_000_000.0), platforms={"growi": growi.PLATFORM})
    result = registry.call("growi_getPage", {"path": "/手順/罠"})
    assert result.status == "ok", result.message
    return result.to_json()
