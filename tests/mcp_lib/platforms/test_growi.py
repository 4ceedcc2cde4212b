"""The Growi platform against the fake Growi 7.x: search (ok:false is an error), pages, allowlist, retries."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcp_lib.config import ConfigError
from mcp_lib.core import Result, ToolError
from mcp_lib.errors import Refused
from mcp_lib.platforms import growi
from mcp_lib.registry import Registry
from tests.fakes.clock import FakeClock
from tests.fakes.github import flood, respond, serve, slow
from tests.fakes.growi import Auth, FakeGrowi, maintenance, too_many

URL = "https://wiki.example.com"
ENV = {"GROWI_URL": URL, "GROWI_ACCESS_TOKEN": "test-growi-token"}
SECRET = "xoxb-1234567890-abcdefghijklmnop"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall=1_800_000_000.0)


@pytest.fixture
def fake() -> FakeGrowi:
    fake = FakeGrowi(url=URL)
    fake.add_page("/手順/在庫同期",
                  "# 在庫同期の確認手順\n1. 在庫同期ジョブのログを確認する\n2. Shopify の API 制限を確認する\n")
    fake.add_page("/手順/注文取込", "# 注文取込\n楽天の注文は 10 分ごとに取り込みます。在庫も引き当てます。\n")
    fake.add_page("/議事録/2026-05-01", "在庫 の議論。<script>alert(1)</script> & more\n")
    fake.add_page("/設定/トークン", f"Slack bot token: {SECRET}\n在庫連携の設定\n")
    fake.add_page("/手順/長い手順", "在庫 " + "あ" * 20000)
    return fake


def make_registry(fake: FakeGrowi, clock: FakeClock, **env: str) -> Registry:
    full_env = {**ENV, **env}
    config = growi.load_config(full_env)
    assert config is not None
    return Registry(env=full_env, clients={"growi": growi.make_client(config, transport=fake.transport())},
                    clock=clock, platforms={"growi": growi.PLATFORM})


def call(fake: FakeGrowi, clock: FakeClock, tool: str, env: dict[str, str] | None = None, **arguments: Any) -> Result:
    return make_registry(fake, clock, **(env or {})).call(f"growi_{tool}", arguments)


def page_id(fake: FakeGrowi, path: str) -> str:
    return next(pid for pid, page in fake.pages.items() if page["path"] == path)


# -- configuration ------------------------------------------------------------------------------------------
def test_enabled_only_with_url_and_token() -> None:
    assert growi.load_config({}) is None
    assert growi.load_config({"GROWI_URL": URL}) is None
    assert growi.load_config({"GROWI_ACCESS_TOKEN": "t"}) is None
    config = growi.load_config({**ENV, "GROWI_URL": URL + "/", "HELPBOT_GROWI_PATHS": "/手順/, /チーム A"})
    assert config is not None and config.url == URL
    assert config.paths == ("/手順", "/チーム A")


def test_bad_url_and_bad_prefix_name_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        growi.load_config({**ENV, "GROWI_URL": "wiki.example.com"})
    assert err.value.variable == "GROWI_URL"
    with pytest.raises(ConfigError) as err:
        growi.load_config({**ENV, "HELPBOT_GROWI_PATHS": "手順"})
    assert err.value.variable == "HELPBOT_GROWI_PATHS"


def test_platform_metadata_and_interface() -> None:
    p = growi.PLATFORM
    assert "Growi" in p.overview and p.scenes and len(p.security_rules) >= 3
    for variable in ("GROWI_URL", "GROWI_ACCESS_TOKEN", "HELPBOT_GROWI_PATHS"):
        assert variable in p.setup
    assert {name: [x.name for x in tool.params] for name, tool in p.tools.items()} == {
        "searchPages": ["query", "limit"], "getPage": ["pageId", "path"]}
    assert p.tools["searchPages"].input_schema["properties"]["limit"]["type"] == "integer"
    assert all(tool.read_only for tool in p.tools.values())


# -- searchPages --------------------------------------------------------------------------------------------
def test_search_pages_returns_title_url_path_and_plain_snippet(fake: FakeGrowi, clock: FakeClock) -> None:
    result = call(fake, clock, "searchPages", query="在庫同期", limit=5)
    assert result.status == "ok", result.message
    hit = result.items[0]
    pid = page_id(fake, "/手順/在庫同期")
    assert hit == {"title": "在庫同期", "url": f"{URL}/{pid}", "pageId": pid, "path": "/手順/在庫同期",
                   "snippet": hit["snippet"], "updatedAt": fake.pages[pid]["updatedAt"]}
    assert "在庫同期" in hit["snippet"] and "<em" not in hit["snippet"] and "</em>" not in hit["snippet"]
    request = fake.requests[-1]
    assert request.url.path == "/_api/search" and request.url.params["limit"] == "5"
    assert request.headers["authorization"] == "Bearer test-growi-token"
    assert request.url.params["access_token"] == "test-growi-token"


def test_snippet_html_is_unescaped_text(fake: FakeGrowi, clock: FakeClock) -> None:
    result = call(fake, clock, "searchPages", query="議論")
    assert "<script>alert(1)</script> & more" in result.items[0]["snippet"]


def test_highlight_tags_are_stripped_in_time_linear_in_the_snippet() -> None:
    """A snippet of ``<em `` 40,000 times and no ``>`` (a hostile wiki's): each ``<em`` was scanned to the end
    for its ``>`` -- seconds per 160 kB, growing with the square; a tag now ends at the next ``<`` too."""
    from mcp_lib.platforms.growi import _TAG_RE

    assert _TAG_RE.sub("", "<em class='highlighted-keyword'>在庫</em>同期<EM>x</EM>") == "在庫同期x"
    assert _TAG_RE.sub("", "<em " * 40_000) == "<em " * 40_000


def test_a_403_nested_deeper_than_json_goes_is_a_refusal_not_a_recursion_error() -> None:
    import httpx2

    from mcp_lib.platforms.growi import _forbidden_page

    assert _forbidden_page(httpx2.Response(403, content=b"[" * 100_000 + b"]" * 100_000)) is False


def test_search_limit_is_respected(fake: FakeGrowi, clock: FakeClock) -> None:
    result = call(fake, clock, "searchPages", query="在庫", limit=2)
    assert len(result.items) == 2 and result.total == 5


def test_ok_false_is_an_error_not_an_empty_result(fake: FakeGrowi, clock: FakeClock) -> None:
    fake.search_reachable = False
    result = call(fake, clock, "searchPages", query="在庫")
    assert result.status == "error"
    assert "SearchService is not reachable." in (result.message or "")
    assert clock.sleeps == []  # an answer, not an outage: no retry


def test_a_percent_sign_is_searched_literally(fake: FakeGrowi, clock: FakeClock) -> None:
    fake.add_page("/手順/割引", "在庫 100% 引当の手順")
    result = call(fake, clock, "searchPages", query="100%")
    assert result.status == "ok", result.message
    assert [hit["path"] for hit in result.items] == ["/手順/割引"]


def test_search_results_outside_the_path_allowlist_are_dropped(fake: FakeGrowi, clock: FakeClock) -> None:
    result = call(fake, clock, "searchPages", env={"HELPBOT_GROWI_PATHS": "/手順"}, query="在庫")
    assert result.items and all(hit["path"].startswith("/手順/") for hit in result.items)
    assert "/議事録/2026-05-01" not in result.to_json()
    assert result.notes == [] and result.total == len(result.items)  # dropped without a trace


@pytest.mark.parametrize("hits", [1, 3, 40])
def test_search_whose_only_hits_are_outside_the_paths_is_a_search_without_hits(fake: FakeGrowi, clock: FakeClock,
                                                                               hits: int) -> None:
    """Whole results compared: nothing tells "only hidden pages" from "no pages"."""
    env = {"HELPBOT_GROWI_PATHS": "/手順"}
    for n in range(hits):
        fake.add_page(f"/人事/評価/{n}", "暗証番号 4711 の控え")
    only_hidden = call(fake, clock, "searchPages", env=env, query="暗証番号 4711")
    nothing = call(fake, clock, "searchPages", env=env, query="ケツァルコアトル")
    assert only_hidden.to_dict() == nothing.to_dict() == {"status": "ok", "tool": "growi_searchPages", "total": 0}
    assert call(fake, clock, "searchPages", query="暗証番号 4711").items  # the fake did find them


# -- getPage ------------------------------------------------------------------------------------------------
def test_get_page_by_id_and_by_path(fake: FakeGrowi, clock: FakeClock) -> None:
    pid = page_id(fake, "/手順/在庫同期")
    by_id = call(fake, clock, "getPage", pageId=pid)
    by_path = call(fake, clock, "getPage", path="手順/在庫同期/")
    assert by_id.status == by_path.status == "ok"
    assert by_id.item == by_path.item
    item = by_id.item or {}
    assert item["url"] == f"{URL}/{pid}" and item["title"] == "在庫同期" and item["author"] == "alice"
    assert item["body"].startswith("# 在庫同期の確認手順\n1. 在庫同期ジョブのログを確認する")
    assert item["truncated"] is False
    assert fake.requests[-1].url.params["path"] == "/手順/在庫同期"


def test_long_page_body_is_cut_with_a_marker(fake: FakeGrowi, clock: FakeClock) -> None:
    result = call(fake, clock, "getPage", env={"HELPBOT_GROWI_MAX_BODY_CHARS": "500"}, path="/手順/長い手順")
    item = result.item or {}
    assert item["truncated"] is True
    assert item["body"].endswith("…[truncated: 19503 more characters]")


@pytest.mark.parametrize("arguments", [{}, {"pageId": "6650" + "0" * 20, "path": "/手順/在庫同期"}])
def test_exactly_one_of_page_id_or_path(fake: FakeGrowi, clock: FakeClock, arguments: dict[str, Any]) -> None:
    result = call(fake, clock, "getPage", **arguments)
    assert result.status == "error" and "exactly one of pageId or path" in (result.message or "")
    assert fake.requests == []


def test_malformed_page_id_is_refused_before_the_request(fake: FakeGrowi, clock: FakeClock) -> None:
    result = call(fake, clock, "getPage", pageId="not-an-id")
    assert result.status == "error" and "24 hex" in (result.message or "")
    assert fake.requests == []


def test_missing_page_is_an_error(fake: FakeGrowi, clock: FakeClock) -> None:
    result = call(fake, clock, "getPage", path="/どこにもない")
    assert result.status == "error"
    assert "page /どこにもない was not found in Growi" in (result.message or "")
    assert clock.sleeps == []


def test_pages_outside_the_path_allowlist_are_refused(fake: FakeGrowi, clock: FakeClock) -> None:
    env = {"HELPBOT_GROWI_PATHS": "/手順"}
    by_path = call(fake, clock, "getPage", env=env, path="/議事録/2026-05-01")
    assert by_path.status == "error" and "HELPBOT_GROWI_PATHS" in (by_path.message or "")
    assert fake.requests == []
    by_id = call(fake, clock, "getPage", env=env, pageId=page_id(fake, "/議事録/2026-05-01"))
    assert by_id.status == "error" and "議論" not in by_id.to_json() and "議事録" not in by_id.to_json()
    # the refusal reads exactly like a page that does not exist
    missing = call(fake, clock, "getPage", env=env, pageId="0123456789abcdef01234567")
    assert by_id.to_dict() == {**missing.to_dict(), "message": (missing.message or "").replace(
        "0123456789abcdef01234567", page_id(fake, "/議事録/2026-05-01"))}
    sibling = call(fake, clock, "getPage", env=env, path="/手順書/x")  # a prefix is a path, not a string prefix
    assert sibling.status == "error"
    allowed = call(fake, clock, "getPage", env=env, path="/手順/在庫同期")
    assert allowed.status == "ok"


def test_secrets_in_a_page_body_are_masked(fake: FakeGrowi, clock: FakeClock) -> None:
    result = call(fake, clock, "getPage", path="/設定/トークン")
    assert SECRET not in result.to_json() and "[REDACTED]" in (result.item or {})["body"]
    search = call(fake, clock, "searchPages", query="Slack bot token")
    assert search.items and SECRET not in search.to_json()


# -- auth, errors and retries -------------------------------------------------------------------------------
@pytest.mark.parametrize("auth", ["query", "bearer"])
def test_the_token_is_read_by_every_supported_release(clock: FakeClock, auth: Auth) -> None:
    """7.0-7.2.4 read only ?access_token=, 7.2.5+ the Bearer header first: a wiki whose pages only members
    read answers both releases (a guest would get the login redirect, or only public pages)."""
    fake = FakeGrowi(url=URL, auth=auth, guest_readable=True)
    pid = fake.add_page("/手順/社内限定", "在庫 の社内手順", grant="group")
    search = call(fake, clock, "searchPages", query="在庫")
    page = call(fake, clock, "getPage", pageId=pid)
    assert search.status == "ok" and [hit["pageId"] for hit in search.items] == [pid], search.message
    assert page.status == "ok" and (page.item or {})["body"] == "在庫 の社内手順", page.message


@pytest.mark.parametrize("auth", ["query", "bearer"])
def test_a_wrong_token_names_the_variable(clock: FakeClock, auth: Auth) -> None:
    fake = FakeGrowi(url=URL, auth=auth)
    fake.add_page("/手順/在庫同期", "在庫同期の手順")
    env = {"GROWI_ACCESS_TOKEN": "wrong"}
    search = call(fake, clock, "searchPages", env=env, query="在庫")
    page = call(fake, clock, "getPage", env=env, path="/手順/在庫同期")
    for result in (search, page):
        assert result.status == "error" and "GROWI_ACCESS_TOKEN" in (result.message or "")
        assert result.kind == "credentials"  # the CLI exits 2 on it
    assert clock.sleeps == []


@pytest.mark.parametrize("by", ["pageId", "path"])
def test_a_forbidden_page_reads_like_a_missing_one(fake: FakeGrowi, clock: FakeClock, by: str) -> None:
    """Growi 7.4+ answers 403 page-is-forbidden: not a configuration error, and nothing tells it from no page."""
    pid = fake.add_page("/人事/評価", "在庫 評価の控え", grant="other")
    missing_id, missing_path = "0123456789abcdef01234567", "/人事/どこにもない"
    forbidden = call(fake, clock, "getPage", **{by: pid if by == "pageId" else "/人事/評価"})
    assert fake.requests[-1].url.path == "/_api/v3/page"
    assert fake.handler(fake.requests[-1]).status_code == 403  # the fake did refuse it
    missing = call(fake, clock, "getPage", **{by: missing_id if by == "pageId" else missing_path})
    shown, hidden = (missing_id, pid) if by == "pageId" else (missing_path, "/人事/評価")
    assert forbidden.to_dict() == {**missing.to_dict(), "message": (missing.message or "").replace(shown, hidden)}
    assert forbidden.kind != "credentials" and "評価の控え" not in forbidden.to_json()
    assert "/人事/評価" not in call(fake, clock, "searchPages", query="在庫").to_json()


@pytest.mark.parametrize("location", [
    "https://wiki.example.com/_api/search?q=x&access_token=test-growi-token",  # a proxy's http -> https
    "https://sso.example.com/login?next=%2F_api%2Fsearch%3Faccess_token%3Dtest-growi-token",
])
def test_a_redirect_is_not_followed_and_its_query_not_shown(fake: FakeGrowi, clock: FakeClock, location: str) -> None:
    fake.script("GET", r"^/_api/search$", respond(301, "Moved", {"location": location}))
    result = call(fake, clock, "searchPages", query="在庫")
    assert result.status == "error" and len(fake.requests) == 1  # not followed
    assert "test-growi-token" not in result.to_json() and "access_token" not in result.to_json()
    assert location.split("?")[0] in (result.message or "") or "login" in (result.message or "")


def test_the_token_goes_to_growi_only(fake: FakeGrowi) -> None:
    """An absolute URL to another origin (the door a redirect or a bug would open) is refused before it is sent."""
    config = growi.load_config(ENV)
    assert config is not None
    client = growi.make_client(config, transport=fake.transport())
    for elsewhere in ("https://elsewhere.example.com/_api/search", "http://wiki.example.com/_api/search"):
        with pytest.raises(Refused):  # another scheme is another origin
            client.get(elsewhere, params={"q": "x"})
    client.get("/_api/search", params={"q": "x"})
    tokens = [("authorization" in r.headers, "access_token" in r.url.params) for r in fake.requests]
    assert tokens == [(True, True)]


def test_httpx_logs_the_request_without_the_token(fake: FakeGrowi, clock: FakeClock,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """httpx logs every request's URL at INFO, which a host (an MCPServer, say) may print: not the token."""
    with caplog.at_level(logging.INFO, logger="httpx2"):
        assert call(fake, clock, "searchPages", query="在庫").status == "ok"
    assert "HTTP Request: GET https://wiki.example.com/_api/search?q=" in caplog.text  # the line is there
    assert "test-growi-token" not in caplog.text and "access_token" not in caplog.text
    assert fake.requests[-1].url.params["access_token"] == "test-growi-token"  # and the token went


def test_an_html_answer_points_at_the_url(fake: FakeGrowi, clock: FakeClock) -> None:
    fake.script("GET", r"^/_api/search$", respond(200, "<html>SSO</html>", {"content-type": "text/html"}))
    result = call(fake, clock, "searchPages", query="在庫")
    assert result.status == "error" and "GROWI_URL" in (result.message or "")


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_answer_over_the_bound_is_an_error_result(fake: FakeGrowi, clock: FakeClock, gzipped: bool) -> None:
    """A compromised wiki's flood, or its gzip bomb: at most 8 MB (decoded) is read, then the call says so."""
    fake.script("GET", r"^/_api/v3/page$", respond(200, *flood(gzipped=gzipped)))
    result = call(fake, clock, "getPage", path="/手順/在庫同期")
    assert result.status == "error" and "Growi sent an answer of more than 8 MB" in (result.message or "")


def test_429_retry_after_is_honoured(fake: FakeGrowi, clock: FakeClock) -> None:
    fake.script("GET", r"^/_api/search$", too_many(9))
    result = call(fake, clock, "searchPages", query="在庫")
    assert result.status == "ok" and clock.sleeps == [9.0]


def test_503_then_success(fake: FakeGrowi, clock: FakeClock) -> None:
    fake.script("GET", r"^/_api/v3/page$", maintenance(), maintenance())
    result = call(fake, clock, "getPage", path="/手順/在庫同期")
    assert result.status == "ok" and len(clock.sleeps) == 2


def test_slow_answer_is_retried(fake: FakeGrowi, clock: FakeClock) -> None:
    fake.script("GET", r"^/_api/search$", slow(45))
    result = call(fake, clock, "searchPages", query="在庫")
    assert result.status == "ok" and len(clock.sleeps) == 1


def test_a_growi_that_stays_down_is_an_error_result(fake: FakeGrowi, clock: FakeClock) -> None:
    fake.script("GET", r"^/_api/search$", *[maintenance() for _ in range(10)])
    result = call(fake, clock, "searchPages", query="在庫")
    assert result.status == "error" and "Growi is unavailable after retries" in (result.message or "")
    assert len(fake.requests) == 4 and len(clock.sleeps) == 3


def test_tools_only_send_get_requests(fake: FakeGrowi, clock: FakeClock) -> None:
    registry = make_registry(fake, clock)
    registry.call("growi_searchPages", {"query": "在庫"})
    registry.call("growi_getPage", {"path": "/手順/在庫同期"})
    assert len(fake.requests) == 2 and {r.method for r in fake.requests} == {"GET"}


def test_over_a_real_local_server_under_a_sub_path(clock: FakeClock) -> None:
    fake = FakeGrowi()
    with serve(fake.handler) as url:
        fake.url = f"{url}/wiki"
        pid = fake.add_page("/手順/在庫同期", "在庫同期の手順")
        env = {"GROWI_URL": fake.url, "GROWI_ACCESS_TOKEN": "test-growi-token"}
        registry = Registry(env=env, clock=clock, platforms={"growi": growi.PLATFORM})
        search = registry.call("growi_searchPages", {"query": "在庫"})
        page = registry.call("growi_getPage", {"pageId": pid})
    assert search.status == "ok", search.message
    assert search.items[0]["url"] == f"{url}/wiki/{pid}"
    assert (page.item or {})["body"] == "在庫同期の手順"
    assert [r.url.path for r in fake.requests] == ["/wiki/_api/search", "/wiki/_api/v3/page"]


def test_the_client_refuses_anything_but_get(fake: FakeGrowi) -> None:
    config = growi.load_config(ENV)
    assert config is not None
    client = growi.make_client(config, transport=fake.transport())
    for method in ("POST", "PUT", "DELETE"):
        with pytest.raises(ToolError, match="read-only"):
            client.request(method, "/_api/v3/page", json={"path": "/x", "body": "overwritten"})
    assert fake.requests == []


def test_an_unreadable_retry_after_is_backoff_not_a_crash(fake: FakeGrowi, clock: FakeClock) -> None:
    fake.script("GET", r"^/_api/search$", respond(429, {"error": "Too Many Requests"}, {"Retry-After": "soon"}))
    result = call(fake, clock, "searchPages", query="在庫")
    assert result.status == "ok", result.message
    assert len(clock.sleeps) == 1 and 0 < clock.sleeps[0] <= 1
