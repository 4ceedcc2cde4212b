"""A fake GitHub REST API: an in-memory set of repos, files, issues, pull requests and comments behind a router
for ``httpx2.MockTransport`` (or a real local HTTP server via :func:`serve`).

It answers with GitHub's real shapes: search items with ``repository.full_name``/``repository_url``,
``html_url`` and ``text_matches`` (only when the text-match media type is asked for), issues with a
``pull_request`` key for PRs, base64 file contents wrapped at 60 characters, ``{"message": "Not Found", ...}``
404s, 401 "Bad credentials", per-resource rate limits (403 with ``x-ratelimit-remaining: 0`` and
``x-ratelimit-reset``), and it records ``POST /repos/{o}/{r}/dispatches`` (204) for the Events relay.
The writes ``helpbot faq-draft --pr`` makes are checked as GitHub documents them: a branch (``POST git/refs``,
``DELETE git/refs/heads/{ref}``), files (``PUT contents/{path}``: 201 created, 200 updated; an existing path
needs its current blob ``sha``) and a pull request, each refused without its permission (``can_push``: contents
write; ``can_open_pulls``: pull-requests write) with the message of the token's kind (``token_kind``).
Failures are scripted with :meth:`FakeGitHub.script` (``rate_limited``, ``too_many``, ``server_error``, ``slow``).

``serve``, ``slow``, ``respond`` and ``flood`` are shared with the other fakes.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import itertools
import json
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal
from urllib.parse import urlencode

import httpx2

from mcp_lib.http import MAX_ANSWER_BYTES

Behaviour = Callable[[httpx2.Request], "httpx2.Response | None"]
TokenKind = Literal["classic", "fine-grained", "installation"]
WEB = "https://github.com"
DOCS = "https://docs.github.com/rest"


# -- shared helpers for fakes -------------------------------------------------------------------------------


def respond(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Behaviour:
    """A scripted answer: JSON ``body`` (or text when it is a str, bytes as sent), with ``headers``."""

    def behave(request: httpx2.Request) -> httpx2.Response:
        if isinstance(body, bytes):  # a stream: the client decodes it, not the fake
            return httpx2.Response(status, headers=headers, stream=httpx2.ByteStream(body))
        if isinstance(body, str):
            return httpx2.Response(status, text=body, headers=headers)
        if body is None:
            return httpx2.Response(status, headers=headers)
        return httpx2.Response(status, json=body, headers=headers)

    return behave


@functools.cache
def flood(*, gzipped: bool = False) -> tuple[bytes, dict[str, str]]:
    """Body and headers of a JSON-typed answer one byte longer than helpbot reads (a base URL on a file server);
    ``gzipped``: a gzip bomb of some 33 KB that inflates to as much."""
    body, headers = b" " * (MAX_ANSWER_BYTES + 1), {"Content-Type": "application/json"}
    return (gzip.compress(body), {**headers, "Content-Encoding": "gzip"}) if gzipped else (body, headers)


def slow(seconds: float) -> Behaviour:
    """A response that takes ``seconds``. Under MockTransport the client's read timeout is compared and a
    ReadTimeout raised (what a real client would see), without waiting; over :func:`serve` it really sleeps."""

    def behave(request: httpx2.Request) -> httpx2.Response | None:
        if request.extensions.get("fake_served"):
            time.sleep(seconds)
            return None
        read_timeout = (request.extensions.get("timeout") or {}).get("read")
        if read_timeout is not None and seconds > read_timeout:
            raise httpx2.ReadTimeout(f"fake: the server took {seconds} s", request=request)
        return None  # fast enough: answer normally

    return behave


class Scripted:
    """A queue of scripted behaviours per (method, path pattern), consumed in order before normal routing."""

    def __init__(self) -> None:
        self._queue: list[tuple[str, re.Pattern[str], Behaviour]] = []
        self._lock = threading.Lock()

    def add(self, method: str, path_pattern: str, *behaviours: Behaviour) -> None:
        with self._lock:
            for behaviour in behaviours:
                self._queue.append((method.upper(), re.compile(path_pattern), behaviour))

    def take(self, request: httpx2.Request, path: str) -> Behaviour | None:
        with self._lock:
            for index, (method, pattern, behaviour) in enumerate(self._queue):
                if method in (request.method, "*") and pattern.search(path):
                    del self._queue[index]
                    return behaviour
        return None

    def __len__(self) -> int:
        return len(self._queue)


@contextmanager
def serve(handler: Callable[[httpx2.Request], httpx2.Response]) -> Iterator[str]:
    """Serve an httpx-style handler over real HTTP on 127.0.0.1 (for CLI and subprocess tests); yields the URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            request = httpx2.Request(self.command, f"{base}{self.path}", headers=list(self.headers.items()),
                                    content=body, extensions={"fake_served": True})
            response = handler(request)
            content = response.read()
            self.send_response(response.status_code)
            for key, value in response.headers.multi_items():
                if key.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # a quick shutdown
    thread.start()
    try:
        yield base
    finally:
        server.shutdown()
        server.server_close()


def blob_sha(data: bytes | None) -> str | None:
    """Git's blob id of ``data`` (what the contents API calls a file's ``sha``)."""
    if data is None:
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _iso(n: int) -> str:
    return f"2026-{1 + n // 28 % 12:02d}-{1 + n % 28:02d}T09:{n % 60:02d}:00Z"


# -- canned GitHub failures ---------------------------------------------------------------------------------
def rate_limited(reset: float, resource: str = "core", limit: int = 5000) -> Behaviour:
    """The primary rate limit: 403 with x-ratelimit-remaining 0 and the reset time (epoch seconds)."""
    return respond(403, {"message": "API rate limit exceeded for user ID 1.",
                         "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api", "status": "403"},
                   {"x-ratelimit-limit": str(limit), "x-ratelimit-remaining": "0", "x-ratelimit-used": str(limit),
                    "x-ratelimit-reset": str(int(reset)), "x-ratelimit-resource": resource})


def secondary_rate_limited(retry_after: int) -> Behaviour:
    return respond(403, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes "
                                    "before you try again.", "documentation_url": DOCS, "status": "403"},
                   {"retry-after": str(retry_after)})


def too_many(retry_after: int) -> Behaviour:
    return respond(429, {"message": "Too Many Requests", "documentation_url": DOCS, "status": "429"},
                   {"retry-after": str(retry_after)})


def server_error(status: int = 503) -> Behaviour:
    texts = {500: "Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}
    return respond(status, {"message": texts.get(status, "Server Error"), "documentation_url": DOCS,
                            "status": str(status)})


def _not_found(doc: str = DOCS) -> httpx2.Response:
    return httpx2.Response(404, json={"message": "Not Found", "documentation_url": doc, "status": "404"})


# -- the fake -----------------------------------------------------------------------------------------------
@dataclass
class FakeRepo:
    full_name: str
    id: int
    default_branch: str = "main"
    private: bool = True
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)  # ref -> path -> bytes
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    pull_files: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    can_push: bool = True  # contents: write on this repo: branch and file writes are 403 without it
    can_open_pulls: bool = True  # pull-requests: write (a fine-grained or App token may have contents only)
    commits: dict[str, str] = field(default_factory=dict)  # branch -> head commit sha


class FakeGitHub:
    # requests per window, per resource, as GitHub documents them for an authenticated user
    LIMITS: ClassVar[dict[str, tuple[int, int]]] = {"core": (5000, 3600), "search": (30, 60), "code_search": (10, 60)}

    def __init__(self, token: str = "test-github-token", api_url: str = "https://api.github.com",
                 clock: Callable[[], float] = time.time, token_kind: TokenKind = "fine-grained"):
        self.token = token
        self.token_kind: TokenKind = token_kind
        self.api_url = api_url.rstrip("/")
        self.clock = clock
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[httpx2.Request] = []
        self.dispatches: list[dict[str, Any]] = []
        self.scripted = Scripted()
        self.ignore_repo_qualifiers = False  # a misbehaving search: returns hits from every repo
        self._ids = itertools.count(1000)
        self._windows: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    # -- seeding --------------------------------------------------------------------------------------------
    def add_repo(self, full_name: str, default_branch: str = "main") -> FakeRepo:
        repo = FakeRepo(full_name, next(self._ids), default_branch)
        repo.files[default_branch] = {}
        self.repos[full_name.lower()] = repo
        return repo

    def add_file(self, repo: str, path: str, content: str | bytes, ref: str | None = None) -> None:
        r = self.repos[repo.lower()]
        data = content.encode() if isinstance(content, str) else content
        r.files.setdefault(ref or r.default_branch, {})[path] = data

    def add_issue(self, repo: str, title: str, body: str = "", *, state: str = "open", user: str = "alice",
                  labels: tuple[str, ...] = (), comments: tuple[str, ...] = (), pull: bool = False) -> int:
        r = self.repos[repo.lower()]
        number = len(r.issues) + 1
        kind = "pull" if pull else "issues"
        issue: dict[str, Any] = {
            "url": f"{self.api_url}/repos/{r.full_name}/issues/{number}",
            "repository_url": f"{self.api_url}/repos/{r.full_name}",
            "comments_url": f"{self.api_url}/repos/{r.full_name}/issues/{number}/comments",
            "html_url": f"{WEB}/{r.full_name}/{kind}/{number}",
            "id": next(self._ids), "node_id": f"I_{number}", "number": number, "title": title,
            "user": {"login": user, "id": 1, "type": "User"},
            "labels": [{"id": i, "name": name, "color": "ededed"} for i, name in enumerate(labels)],
            "state": state, "state_reason": "completed" if state == "closed" else None, "locked": False,
            "assignees": [], "comments": 0, "created_at": _iso(number), "updated_at": _iso(number + 1),
            "closed_at": _iso(number + 2) if state == "closed" else None, "author_association": "MEMBER",
            "body": body,
        }
        if pull:
            issue["pull_request"] = {"url": f"{self.api_url}/repos/{r.full_name}/pulls/{number}",
                                     "html_url": issue["html_url"], "diff_url": f"{issue['html_url']}.diff",
                                     "patch_url": f"{issue['html_url']}.patch", "merged_at": None}
        r.issues[number] = issue
        r.comments[number] = []
        for text in comments:
            self.add_comment(repo, number, text)
        return number

    def add_comment(self, repo: str, number: int, body: str, user: str = "bob") -> None:
        r = self.repos[repo.lower()]
        comment_id = next(self._ids)
        r.comments[number].append({
            "id": comment_id, "html_url": f"{r.issues[number]['html_url']}#issuecomment-{comment_id}",
            "user": {"login": user, "id": 2, "type": "User"}, "created_at": _iso(comment_id % 300),
            "updated_at": _iso(comment_id % 300), "author_association": "MEMBER", "body": body,
        })
        r.issues[number]["comments"] = len(r.comments[number])

    def add_pull(self, repo: str, title: str, body: str = "", *, files: list[dict[str, Any]] | None = None,
                 merged: bool = False, base: str = "main", head: str = "fix") -> int:
        """A pull request; ``files`` as GitHub lists them: filename, status, additions, deletions, patch."""
        state = "closed" if merged else "open"
        number = self.add_issue(repo, title, body, state=state, pull=True)
        r = self.repos[repo.lower()]
        issue = r.issues[number]
        if merged:
            issue["pull_request"]["merged_at"] = issue["closed_at"]
        listed = []
        for f in files or []:
            entry = {"sha": "0" * 40, "filename": f["filename"], "status": f.get("status", "modified"),
                     "additions": f.get("additions", 0), "deletions": f.get("deletions", 0),
                     "changes": f.get("additions", 0) + f.get("deletions", 0),
                     "blob_url": f"{WEB}/{r.full_name}/blob/{'0' * 40}/{f['filename']}"}
            if f.get("patch") is not None:  # GitHub omits patch for binary or huge diffs
                entry["patch"] = f["patch"]
            listed.append(entry)
        r.pull_files[number] = listed
        r.pulls[number] = {
            "url": issue["pull_request"]["url"], "html_url": issue["html_url"], "number": number,
            "state": state, "title": title, "user": issue["user"], "body": body, "draft": False,
            "created_at": issue["created_at"], "updated_at": issue["updated_at"], "closed_at": issue["closed_at"],
            "merged_at": issue["pull_request"]["merged_at"], "merged": merged,
            "head": {"ref": head, "sha": "1" * 40, "label": f"{r.full_name.split('/')[0]}:{head}"},
            "base": {"ref": base, "sha": "2" * 40, "label": f"{r.full_name.split('/')[0]}:{base}"},
            "additions": sum(f["additions"] for f in listed), "deletions": sum(f["deletions"] for f in listed),
            "changed_files": len(listed), "commits": 1, "comments": 0, "review_comments": 0,
        }
        return number

    def script(self, method: str, path_pattern: str, *behaviours: Behaviour) -> None:
        """Answer the next matching requests with these behaviours (e.g. ``server_error()``), in order."""
        self.scripted.add(method, path_pattern, *behaviours)

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handler)

    # -- the router -----------------------------------------------------------------------------------------
    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        path = request.url.path
        prefix = httpx2.URL(self.api_url).path.rstrip("/")
        if prefix and path.startswith(prefix):
            path = path[len(prefix):] or "/"
        behaviour = self.scripted.take(request, path)
        if behaviour is not None:
            scripted = behaviour(request)
            if scripted is not None:
                return scripted
        auth = request.headers.get("authorization", "")
        if not auth:
            return httpx2.Response(401, json={"message": "Requires authentication", "documentation_url": DOCS,
                                             "status": "401"})
        if auth not in (f"Bearer {self.token}", f"token {self.token}"):
            return httpx2.Response(401, json={"message": "Bad credentials", "documentation_url": DOCS,
                                             "status": "401"})
        resource = "code_search" if path == "/search/code" else "search" if path.startswith("/search/") else "core"
        limited, headers = self._count(resource)
        if limited is not None:
            return limited
        response = self._route(request, path)
        response.headers.update(headers)
        return response

    def _count(self, resource: str) -> tuple[httpx2.Response | None, dict[str, str]]:
        limit, window = self.LIMITS[resource]
        now = self.clock()
        with self._lock:
            start, used = self._windows.get(resource, (now, 0))
            if now >= start + window:
                start, used = now, 0
            reset = str(int(start + window))
            if used >= limit:
                return rate_limited(start + window, resource, limit)(httpx2.Request("GET", "/")), {}
            self._windows[resource] = (start, used + 1)
        return None, {"x-ratelimit-limit": str(limit), "x-ratelimit-remaining": str(limit - used - 1),
                      "x-ratelimit-used": str(used + 1), "x-ratelimit-reset": reset, "x-ratelimit-resource": resource}

    def _route(self, request: httpx2.Request, path: str) -> httpx2.Response:
        if request.method == "GET" and path == "/search/code":
            return self._search_code(request)
        if request.method == "GET" and path == "/search/issues":
            return self._search_issues(request)
        match = re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)?", path)
        if not match:
            return _not_found()
        repo = self.repos.get(f"{match.group(1)}/{match.group(2)}".lower())
        rest = match.group(3) or ""
        if repo is None:
            return _not_found()
        if request.method == "POST" and rest == "/dispatches":
            return self._dispatch(request, repo)
        if request.method != "GET":
            return self._write(request, repo, rest)
        if rest == "":
            # "Get a repository" (full-repository schema): ``permissions`` is optional -- the token's *user's* role,
            # for personal access tokens; an installation token (GITHUB_TOKEN, an App's) gets none
            info = {"id": repo.id, "full_name": repo.full_name, "private": repo.private,
                    "html_url": f"{WEB}/{repo.full_name}", "default_branch": repo.default_branch}
            if self.token_kind != "installation":
                info["permissions"] = {"admin": False, "maintain": False, "push": repo.can_push, "triage": True,
                                       "pull": True}
            return httpx2.Response(200, json=info)
        if m := re.fullmatch(r"/git/ref/heads/(.+)", rest):
            if m.group(1) not in repo.files:
                return _not_found(f"{DOCS}/git/refs#get-a-reference")
            return httpx2.Response(200, json=self._ref(repo, m.group(1)))
        if rest.startswith("/contents"):
            return self._contents(request, repo, rest[len("/contents"):].strip("/"))
        if m := re.fullmatch(r"/issues/(\d+)", rest):
            issue = repo.issues.get(int(m.group(1)))
            return httpx2.Response(200, json=issue) if issue else _not_found(f"{DOCS}/issues/issues#get-an-issue")
        if m := re.fullmatch(r"/issues/(\d+)/comments", rest):
            if int(m.group(1)) not in repo.issues:
                return _not_found()
            return self._page(request, repo.comments[int(m.group(1))])
        if m := re.fullmatch(r"/pulls/(\d+)", rest):
            pull = repo.pulls.get(int(m.group(1)))
            return httpx2.Response(200, json=pull) if pull else _not_found(f"{DOCS}/pulls/pulls#get-a-pull-request")
        if m := re.fullmatch(r"/pulls/(\d+)/files", rest):
            if int(m.group(1)) not in repo.pulls:
                return _not_found()
            return self._page(request, repo.pull_files[int(m.group(1))])
        return _not_found()

    @staticmethod
    def _page(request: httpx2.Request, entries: list[dict[str, Any]]) -> httpx2.Response:
        """One page of a list, with GitHub's Link header when there are more."""
        per_page = min(int(request.url.params.get("per_page", 30)), 100)
        page = max(int(request.url.params.get("page", 1)), 1)
        chunk = entries[(page - 1) * per_page: page * per_page]
        headers = {}
        last = max(1, -(-len(entries) // per_page))
        if page < last:
            base = str(request.url).split("?")[0]
            links = [f'<{base}?{urlencode({"per_page": per_page, "page": n})}>; rel="{rel}"'
                     for n, rel in ((page + 1, "next"), (last, "last"))]
            headers["link"] = ", ".join(links)
        return httpx2.Response(200, json=chunk, headers=headers)

    # -- search ---------------------------------------------------------------------------------------------
    @staticmethod
    def _parse(q: str) -> tuple[list[str], dict[str, list[str]]]:
        terms: list[str] = []
        qualifiers: dict[str, list[str]] = {}
        try:
            tokens = shlex.split(q, posix=True)
        except ValueError:  # an unbalanced quote: GitHub searches the words anyway
            tokens = q.replace('"', " ").split()
        for token in tokens:
            key, sep, value = token.partition(":")
            if sep and re.fullmatch(r"-?[a-z-]+", key) and value:
                qualifiers.setdefault(key.lower(), []).append(value)
            else:
                terms.append(token.lower())
        return terms, qualifiers

    def _scope(self, qualifiers: dict[str, list[str]]) -> list[FakeRepo] | httpx2.Response:
        names = qualifiers.get("repo", [])
        unknown = [n for n in names if n.lower() not in self.repos]
        if unknown:
            return httpx2.Response(422, json={
                "message": "Validation Failed", "documentation_url": f"{DOCS}/search/search", "status": "422",
                "errors": [{"message": "The listed users and repositories cannot be searched either because the "
                                       "resources do not exist or you do not have permission to view them.",
                            "resource": "Search", "field": "q", "code": "invalid"}]})
        if not names or self.ignore_repo_qualifiers:
            return list(self.repos.values())
        return [self.repos[n.lower()] for n in names]

    @staticmethod
    def _fragment(text: str, terms: list[str], prop: str, object_type: str, url: str) -> dict[str, Any] | None:
        lower = text.lower()
        positions = [(lower.find(t), t) for t in terms if lower.find(t) >= 0]
        if not positions:
            return None
        first = min(positions)[0]
        start = max(0, text.rfind("\n", 0, max(0, first - 60)) + 1)
        fragment = text[start: first + 120]
        matches = []
        for term in terms:
            at = fragment.lower().find(term)
            if at >= 0:
                matches.append({"text": fragment[at: at + len(term)], "indices": [at, at + len(term)]})
        return {"object_url": url, "object_type": object_type, "property": prop, "fragment": fragment,
                "matches": matches}

    def _search_code(self, request: httpx2.Request) -> httpx2.Response:
        q = request.url.params.get("q", "")
        terms, qualifiers = self._parse(q)
        if not terms:
            return httpx2.Response(422, json={"message": "Validation Failed", "documentation_url": DOCS,
                                             "status": "422", "errors": [{"resource": "Search", "field": "q",
                                                                          "code": "missing"}]})
        scope = self._scope(qualifiers)
        if isinstance(scope, httpx2.Response):
            return scope
        text_match = "text-match" in request.headers.get("accept", "")
        hits = []
        for repo in scope:
            for path, data in sorted(repo.files[repo.default_branch].items()):
                text = data.decode("utf-8", "replace")
                haystack = f"{path}\n{text}".lower()
                if not all(t in haystack for t in terms):
                    continue
                if any(not path.startswith(p.strip("/")) for p in qualifiers.get("path", [])):
                    continue
                score = float(sum(haystack.count(t) for t in terms))
                api_url = f"{self.api_url}/repos/{repo.full_name}/contents/{path}?ref={'3' * 40}"
                item: dict[str, Any] = {"name": path.rsplit("/", 1)[-1], "path": path, "sha": "3" * 40,
                        "url": api_url,
                        "git_url": f"{self.api_url}/repos/{repo.full_name}/git/blobs/{'3' * 40}",
                        "html_url": f"{WEB}/{repo.full_name}/blob/{'3' * 40}/{path}",
                        "repository": {"id": repo.id, "name": repo.full_name.split("/")[1],
                                       "full_name": repo.full_name, "private": repo.private,
                                       "html_url": f"{WEB}/{repo.full_name}"},
                        "score": score}
                if text_match:
                    found = self._fragment(text, terms, "content", "FileContent", api_url)
                    item["text_matches"] = [found] if found else []
                hits.append(item)
        return self._results(request, hits)

    def _search_issues(self, request: httpx2.Request) -> httpx2.Response:
        q = request.url.params.get("q", "")
        terms, qualifiers = self._parse(q)
        kinds = {v.lower() for v in qualifiers.get("is", []) + qualifiers.get("type", [])}
        if not kinds & {"issue", "pr", "pull-request"}:
            # the search API asks for the kind explicitly (see api-notes: q=...+is:issue|is:pr)
            return httpx2.Response(422, json={"message": "Query must include 'is:issue' or 'is:pull-request'",
                                             "documentation_url": f"{DOCS}/search/search", "status": "422"})
        want_pr = bool(kinds & {"pr", "pull-request"})
        states = {v.lower() for v in qualifiers.get("state", [])} | (kinds & {"open", "closed"})
        labels = {v.lower() for v in qualifiers.get("label", [])}
        scope = self._scope(qualifiers)
        if isinstance(scope, httpx2.Response):
            return scope
        text_match = "text-match" in request.headers.get("accept", "")
        hits = []
        for repo in scope:
            for number, issue in repo.issues.items():
                if ("pull_request" in issue) != want_pr or (states and issue["state"] not in states):
                    continue
                if labels and not labels <= {lb["name"].lower() for lb in issue["labels"]}:
                    continue
                comments = " ".join(c["body"] for c in repo.comments[number])
                haystack = f"{issue['title']}\n{issue['body']}\n{comments}".lower()
                if not all(t in haystack for t in terms):
                    continue
                item = {**issue, "score": float(sum(haystack.count(t) for t in terms))}
                if text_match:
                    found = [self._fragment(issue[p] or "", terms, p, "Issue", issue["url"])
                             for p in ("title", "body")]
                    item["text_matches"] = [f for f in found if f]
                hits.append(item)
        return self._results(request, hits)

    @staticmethod
    def _results(request: httpx2.Request, hits: list[dict[str, Any]]) -> httpx2.Response:
        hits.sort(key=lambda h: -h["score"])
        per_page = min(int(request.url.params.get("per_page", 30)), 100)
        return httpx2.Response(200, json={"total_count": len(hits), "incomplete_results": False,
                                         "items": hits[:per_page]})

    # -- contents -------------------------------------------------------------------------------------------
    def _contents(self, request: httpx2.Request, repo: FakeRepo, path: str) -> httpx2.Response:
        ref = request.url.params.get("ref") or repo.default_branch
        files = repo.files.get(ref)
        if files is None:
            return httpx2.Response(404, json={"message": f"No commit found for the ref {ref}",
                                             "documentation_url": f"{DOCS}/repos/contents", "status": "404"})
        base = {"html": f"{WEB}/{repo.full_name}/blob/{ref}", "api": f"{self.api_url}/repos/{repo.full_name}"}
        if path in files:
            data = files[path]
            too_big = len(data) > 1024 * 1024  # 1-100 MB: no content with the JSON media type
            encoded = base64.b64encode(data).decode()
            wrapped = "\n".join(encoded[i: i + 60] for i in range(0, len(encoded), 60)) + "\n"
            return httpx2.Response(200, json={
                "type": "file", "encoding": "none" if too_big else "base64", "size": len(data),
                "name": path.rsplit("/", 1)[-1], "path": path, "content": "" if too_big else wrapped,
                "sha": blob_sha(data), "url": f"{base['api']}/contents/{path}?ref={ref}",
                "git_url": f"{base['api']}/git/blobs/{blob_sha(data)}", "html_url": f"{base['html']}/{path}",
                "download_url": f"https://raw.githubusercontent.com/{repo.full_name}/{ref}/{path}",
            })
        prefix = f"{path}/" if path else ""
        children: dict[str, str] = {}
        for name in files:
            if name.startswith(prefix):
                head, _, tail = name[len(prefix):].partition("/")
                children[prefix + head] = "dir" if tail else "file"
        if not children:
            return _not_found(f"{DOCS}/repos/contents#get-repository-content")
        return httpx2.Response(200, json=[
            {"type": kind, "name": child.rsplit("/", 1)[-1], "path": child,
             "size": len(files[child]) if kind == "file" else 0, "sha": "5" * 40,
             "html_url": f"{WEB}/{repo.full_name}/{'blob' if kind == 'file' else 'tree'}/{ref}/{child}"}
            for child, kind in sorted(children.items())
        ])

    # -- writes: a branch, files on it, a pull request (what ``helpbot faq-draft --pr`` does) ---------------------
    def _ref(self, repo: FakeRepo, branch: str) -> dict[str, Any]:
        sha = repo.commits.setdefault(branch, f"{len(repo.commits) + 1:040x}")
        api = f"{self.api_url}/repos/{repo.full_name}/git"
        return {"ref": f"refs/heads/{branch}", "node_id": f"REF_{branch}", "url": f"{api}/refs/heads/{branch}",
                "object": {"type": "commit", "sha": sha, "url": f"{api}/commits/{sha}"}}

    def _write(self, request: httpx2.Request, repo: FakeRepo, rest: str) -> httpx2.Response:
        route = ("POST" if request.method == "POST" and rest == "/git/refs" else
                 "PUT" if request.method == "PUT" and rest.startswith("/contents/") else
                 "PULL" if request.method == "POST" and rest == "/pulls" else
                 "DELETE" if request.method == "DELETE" and rest.startswith("/git/refs/heads/") else None)
        if route is None:
            return _not_found()
        if not (repo.can_open_pulls if route == "PULL" else repo.can_push):
            # GitHub's 403 for a token without the endpoint's permission ("Create a pull request" needs
            # pull-requests write, the others contents write: docs.github.com/rest/pulls/pulls, /git/refs,
            # /repos/contents, "Fine-grained access tokens for ..."), worded by the token's kind
            whom = "integration" if self.token_kind == "installation" else "personal access token"
            return httpx2.Response(403, json={"message": f"Resource not accessible by {whom}",
                                             "documentation_url": DOCS, "status": "403"})
        if route == "DELETE":
            return self._delete_ref(repo, rest[len("/git/refs/heads/"):])
        try:
            body = json.loads(request.content or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return httpx2.Response(400, json={"message": "Problems parsing JSON", "documentation_url": DOCS,
                                             "status": "400"})
        if route == "POST":
            return self._create_ref(repo, body)
        if route == "PUT":
            return self._put_contents(repo, rest[len("/contents/"):], body)
        return self._create_pull(repo, body)

    @staticmethod
    def _invalid(message: str, doc: str) -> httpx2.Response:
        return httpx2.Response(422, json={"message": message, "documentation_url": f"{DOCS}/{doc}", "status": "422"})

    def _create_ref(self, repo: FakeRepo, body: dict[str, Any]) -> httpx2.Response:
        ref, sha = body.get("ref"), body.get("sha")
        if not isinstance(ref, str) or not ref.startswith("refs/heads/") or ref.count("/") < 2:
            return self._invalid("Reference name must start with 'refs/' and have at least two slashes.",
                                 "git/refs#create-a-reference")
        branch = ref[len("refs/heads/"):]
        if branch in repo.files:
            return self._invalid("Reference already exists", "git/refs#create-a-reference")
        source = next((b for b, head in repo.commits.items() if head == sha), None)
        if source is None:
            return self._invalid("Object does not exist", "git/refs#create-a-reference")
        repo.files[branch] = dict(repo.files[source])
        repo.commits[branch] = str(sha)
        return httpx2.Response(201, json=self._ref(repo, branch))

    def _delete_ref(self, repo: FakeRepo, branch: str) -> httpx2.Response:
        """``DELETE /repos/{o}/{r}/git/refs/{ref}`` (docs: git/refs#delete-a-reference): 204, or 422 "Reference
        does not exist"."""
        if branch not in repo.files or branch == repo.default_branch:
            return self._invalid("Reference does not exist", "git/refs#delete-a-reference")
        del repo.files[branch]
        repo.commits.pop(branch, None)
        return httpx2.Response(204)

    def _put_contents(self, repo: FakeRepo, path: str, body: dict[str, Any]) -> httpx2.Response:
        """docs: repos/contents#create-or-update-file-contents -- ``sha`` is "Required if you are updating a
        file. The blob SHA of the file being replaced."; 201 created, 200 updated, 409 for a sha that is not the
        file's, 422 without one."""
        branch = body.get("branch") or repo.default_branch
        if not isinstance(body.get("message"), str) or not isinstance(body.get("content"), str):
            return self._invalid("Invalid request.\n\n\"message\" and \"content\" are required.",
                                 "repos/contents#create-or-update-file-contents")
        if branch not in repo.files:
            return httpx2.Response(404, json={"message": f"Branch {branch} not found", "status": "404",
                                             "documentation_url": f"{DOCS}/repos/contents"})
        if path in repo.files[branch] and not body.get("sha"):
            return self._invalid("Invalid request.\n\n\"sha\" wasn't supplied.",
                                 "repos/contents#create-or-update-file-contents")
        if body.get("sha") and body["sha"] != blob_sha(repo.files[branch].get(path)):
            return httpx2.Response(409, json={"message": f"{path} does not match {body['sha']}", "status": "409",
                                             "documentation_url": f"{DOCS}/repos/contents#create-or-update-file-"
                                                                  "contents"})
        try:
            data = base64.b64decode(body["content"], validate=True)
        except ValueError:
            return self._invalid("content is not valid Base64", "repos/contents#create-or-update-file-contents")
        created = path not in repo.files[branch]
        repo.files[branch][path] = data
        sha = repo.commits[branch] = f"{int(repo.commits.get(branch, '0'), 16) + 1:040x}"
        return httpx2.Response(201 if created else 200, json={
            "content": {"name": path.rsplit("/", 1)[-1], "path": path, "sha": blob_sha(data), "size": len(data),
                        "html_url": f"{WEB}/{repo.full_name}/blob/{branch}/{path}"},
            "commit": {"sha": sha, "message": body["message"],
                       "html_url": f"{WEB}/{repo.full_name}/commit/{sha}"},
        })

    def _create_pull(self, repo: FakeRepo, body: dict[str, Any]) -> httpx2.Response:
        head, base, title = body.get("head"), body.get("base"), body.get("title")
        doc = "pulls/pulls#create-a-pull-request"
        if not isinstance(title, str) or not title.strip():
            return self._invalid("Validation Failed: title is missing", doc)
        if head not in repo.files or base not in repo.files:
            return self._invalid("Validation Failed: head or base does not exist", doc)
        if repo.files[head] == repo.files[base]:
            return self._invalid(f"Validation Failed: No commits between {base} and {head}", doc)
        changed = [{"filename": path, "status": "added" if path not in repo.files[base] else "modified",
                    "additions": data.count(b"\n"), "deletions": 0}
                   for path, data in sorted(repo.files[head].items()) if repo.files[base].get(path) != data]
        number = self.add_pull(repo.full_name, title, str(body.get("body") or ""), files=changed, base=str(base),
                               head=str(head))
        repo.pulls[number]["draft"] = bool(body.get("draft"))
        return httpx2.Response(201, json=repo.pulls[number])

    # -- repository_dispatch (the Events relay) -------------------------------------------------------------
    def _dispatch(self, request: httpx2.Request, repo: FakeRepo) -> httpx2.Response:
        try:
            body = json.loads(request.content or b"null")
        except ValueError:
            return httpx2.Response(400, json={"message": "Problems parsing JSON", "documentation_url": DOCS,
                                             "status": "400"})
        invalid = None
        if not isinstance(body, dict) or not isinstance(body.get("event_type"), str) or not body["event_type"]:
            invalid = "For 'properties/event_type', nil is not a string."
        elif len(body["event_type"]) > 100:
            invalid = "event_type is too long (maximum is 100 characters)"
        elif "client_payload" in body and not isinstance(body["client_payload"], dict):
            invalid = "For 'properties/client_payload', it is not an object."
        elif len(body.get("client_payload") or {}) > 10:
            invalid = f"No more than 10 properties are allowed; {len(body['client_payload'])} were supplied."
        if invalid:
            return httpx2.Response(422, json={"message": f"Invalid request.\n\n{invalid}",
                                             "documentation_url": f"{DOCS}/repos/repos#create-a-repository-"
                                                                  "dispatch-event", "status": "422"})
        self.dispatches.append({"repo": repo.full_name, "event_type": body["event_type"],
                                "client_payload": body.get("client_payload") or {}})
        return httpx2.Response(204)
