"""The GitHub platform against the fake GitHub API: every tool, every error form, retries and the allowlist."""

from __future__ import annotations

import base64
import threading
from typing import Any

import httpx2
import pytest

from mcp_lib.config import ConfigError
from mcp_lib.core import Result, ToolError
from mcp_lib.platforms import github
from mcp_lib.registry import Registry
from tests.fakes.clock import FakeClock
from tests.fakes.github import (
    FakeGitHub,
    flood,
    rate_limited,
    respond,
    secondary_rate_limited,
    serve,
    server_error,
    slow,
    too_many,
)

ENV = {"GITHUB_TOKEN": "test-github-token", "HELPBOT_GITHUB_REPOS": "acme/shop-sync, acme/docs"}
SECRET = "ghp_" + "a1B2c3D4e5" * 4


def seed(fake: FakeGitHub) -> None:
    fake.add_repo("acme/shop-sync")
    fake.add_repo("acme/docs")
    fake.add_repo("evil/leak")
    fake.add_file("acme/shop-sync", "src/sync/inventory.py",
                  "import time\n\n\ndef sync_inventory(store):\n    # Shopify answers 429: back off and retry\n"
                  "    return store.push_inventory()\n")
    fake.add_file("acme/shop-sync", "src/sync/inventory.py", "def sync_inventory(store):\n    pass  # v1\n",
                  ref="v1.0")
    fake.add_file("acme/shop-sync", "src/orders/import_orders.py", "def import_orders():\n    ...\n")
    fake.add_file("acme/shop-sync", "config/settings.py",
                  f'GITHUB_TOKEN = "{SECRET}"\naws_key_id = AKIAABCDEFGHIJKLMNOP\nINVENTORY_BATCH = 50\n')
    fake.add_file("acme/shop-sync", "assets/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    fake.add_file("acme/shop-sync", "docs/在庫.md", "# 在庫同期\n在庫は 5 分ごとに同期されます。\n")
    fake.add_file("acme/shop-sync", "data/huge.csv", "sku,qty\n" * 20000)
    fake.add_file("acme/docs", "guide/inventory.md", "# Inventory guide\nHow inventory sync works.\n")
    fake.add_file("evil/leak", "src/inventory.py", "# inventory secrets of another team\n")
    fake.add_issue("acme/shop-sync", "在庫同期が遅れる (inventory sync delayed)",
                   "Shopify inventory sync is delayed by 30 minutes.", labels=("bug",),
                   comments=tuple(f"comment {i}: checked the inventory queue" for i in range(1, 16)))
    fake.add_pull("acme/shop-sync", "Fix inventory sync retry", "Retries 429 with backoff. Fixes #1", merged=True,
                  files=[{"filename": "src/sync/inventory.py", "additions": 12, "deletions": 3,
                          "patch": "@@ -1,3 +1,12 @@\n" + "+retry line\n" * 300},
                         {"filename": "tests/test_inventory.py", "status": "added", "additions": 40},
                         {"filename": "assets/logo.png", "status": "modified", "patch": None}])
    fake.add_issue("acme/shop-sync", "Inventory CSV import fails", "CSV import breaks on BOM", state="closed")
    fake.add_issue("evil/leak", "inventory leak", "another team's inventory issue")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall=1_800_000_000.0)


@pytest.fixture
def fake(clock: FakeClock) -> FakeGitHub:
    fake = FakeGitHub(clock=clock.wall)
    seed(fake)
    return fake


def make_registry(fake: FakeGitHub, clock: FakeClock, **env: str) -> Registry:
    full_env = {**ENV, **env}
    config = github.load_config(full_env)
    assert config is not None
    return Registry(env=full_env, clients={"github": github.make_client(config, transport=fake.transport())},
                    clock=clock, platforms={"github": github.PLATFORM})


def call(fake: FakeGitHub, clock: FakeClock, tool: str, env: dict[str, str] | None = None, **arguments: Any) -> Result:
    return make_registry(fake, clock, **(env or {})).call(f"github_{tool}", arguments)


def queries(fake: FakeGitHub) -> list[str]:
    return [r.url.params["q"] for r in fake.requests if r.url.path.startswith("/search/")]


# -- configuration ------------------------------------------------------------------------------------------
def test_enabled_only_with_token_and_allowlist() -> None:
    assert github.load_config({}) is None
    assert github.load_config({"GITHUB_TOKEN": "t"}) is None
    assert github.load_config({"HELPBOT_GITHUB_REPOS": "acme/x"}) is None
    config = github.load_config({**ENV, "HELPBOT_GITHUB_REPOS": "acme/shop-sync,ACME/Shop-Sync acme/docs"})
    assert config is not None
    assert config.repos == ("acme/shop-sync", "acme/docs")
    assert config.api_url == "https://api.github.com"


@pytest.mark.parametrize("entry", ["shop-sync", "acme/shop/sync", "https://github.com/acme/x", "acme/..", "-a/b"])
def test_malformed_repo_entry_names_the_variable(entry: str) -> None:
    with pytest.raises(ConfigError) as err:
        github.load_config({**ENV, "HELPBOT_GITHUB_REPOS": entry})
    assert err.value.variable == "HELPBOT_GITHUB_REPOS"


def test_url_without_scheme_names_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        github.load_config({**ENV, "GITHUB_API_URL": "api.github.com"})
    assert err.value.variable == "GITHUB_API_URL"


def test_client_sends_the_api_headers(fake: FakeGitHub, clock: FakeClock) -> None:
    assert call(fake, clock, "getIssue", repo="acme/shop-sync", number=1).status == "ok"
    first = fake.requests[0]
    assert first.headers["accept"] == "application/vnd.github+json"
    assert first.headers["x-github-api-version"] == "2022-11-28"
    assert first.headers["authorization"] == "Bearer test-github-token"


def test_platform_metadata_and_interface() -> None:
    p = github.PLATFORM
    assert "GitHub" in p.overview and p.scenes and len(p.security_rules) >= 3
    assert any("許可リスト" in rule for rule in p.security_rules)
    for variable in ("GITHUB_TOKEN", "HELPBOT_GITHUB_REPOS", "GITHUB_API_URL"):
        assert variable in p.setup
    params = {name: [x.name for x in tool.params] for name, tool in p.tools.items()}
    assert params == {"searchCode": ["query", "repo"], "searchIssues": ["query", "repo", "state"],
                      "getFileContent": ["repo", "path", "ref"], "getIssue": ["repo", "number"],
                      "getPullRequest": ["repo", "number"]}
    state = p.tools["searchIssues"].input_schema["properties"]["state"]
    assert state["enum"] == ["open", "closed", "all"]
    assert p.tools["getIssue"].input_schema["properties"]["number"]["type"] == "integer"
    assert all(tool.read_only for tool in p.tools.values())


# -- searchCode ---------------------------------------------------------------------------------------------
def test_search_code_returns_hits_with_link_and_snippet(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "searchCode", query="sync_inventory")
    assert result.status == "ok", result.message
    [hit] = result.items
    assert hit["repo"] == "acme/shop-sync" and hit["path"] == "src/sync/inventory.py"
    assert hit["url"] == f"https://github.com/acme/shop-sync/blob/{'3' * 40}/src/sync/inventory.py"
    assert hit["title"] == "src/sync/inventory.py (acme/shop-sync)"
    assert "def sync_inventory(store)" in hit["snippet"]
    assert fake.requests[-1].headers["accept"] == "application/vnd.github.text-match+json"


def test_search_without_repo_is_scoped_to_every_allowlisted_repo(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "searchCode", query="inventory")
    assert queries(fake) == ["inventory repo:acme/shop-sync repo:acme/docs"]
    assert {hit["repo"] for hit in result.items} == {"acme/shop-sync", "acme/docs"}
    assert not result.notes  # nothing had to be dropped: the query itself was scoped


def test_search_with_repo_searches_only_that_repo(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "searchCode", query="inventory", repo="ACME/docs")
    assert queries(fake) == ["inventory repo:acme/docs"]
    assert [hit["path"] for hit in result.items] == ["guide/inventory.md"]


def test_results_from_other_repos_are_dropped_anyway(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.ignore_repo_qualifiers = True  # a search that ignores the scope must still not leak
    code = call(fake, clock, "searchCode", query="inventory")
    issues = call(fake, clock, "searchIssues", query="inventory")
    for result in (code, issues):
        assert result.status == "ok"
        assert result.items and all(hit["repo"].startswith("acme/") for hit in result.items)
        assert "evil" not in result.to_json()
        assert result.notes == [] and result.total == len(result.items)  # dropped without a trace


@pytest.mark.parametrize("tool", ["searchCode", "searchIssues"])
@pytest.mark.parametrize("hits", [1, 3, 30])
def test_search_whose_only_hits_are_outside_the_allowlist_is_a_search_without_hits(
        fake: FakeGitHub, clock: FakeClock, tool: str, hits: int) -> None:
    """Whole results compared: nothing tells "only foreign hits" from "no hits"."""
    fake.ignore_repo_qualifiers = True
    for n in range(hits):
        fake.add_file("evil/leak", f"src/zanzibar_{n}.py", "zanzibar = 1\n")
        fake.add_issue("evil/leak", f"zanzibar {n}", "zanzibar")
    only_foreign = call(fake, clock, tool, query="zanzibar")
    nothing = call(fake, clock, tool, query="quetzalcoatl")
    assert only_foreign.to_dict() == nothing.to_dict()
    assert only_foreign.to_dict() == {"status": "ok", "tool": f"github_{tool}", "total": 0}
    # the fake did find them: the filter, not the fake, keeps them out
    assert call(fake, clock, tool, env={"HELPBOT_GITHUB_REPOS": "evil/leak"}, query="zanzibar").items


@pytest.mark.parametrize("tool,arguments", [
    ("searchCode", {"query": "inventory", "repo": "evil/leak"}),
    ("searchIssues", {"query": "inventory", "repo": "evil/leak"}),
    ("getFileContent", {"repo": "evil/leak", "path": "src/inventory.py"}),
    ("getIssue", {"repo": "evil/leak", "number": 1}),
    ("getPullRequest", {"repo": "evil/leak", "number": 1}),
])
def test_repo_outside_the_allowlist_is_refused_before_any_request(
        fake: FakeGitHub, clock: FakeClock, tool: str, arguments: dict[str, Any]) -> None:
    result = call(fake, clock, tool, **arguments)
    assert result.status == "error"
    assert "not in the allowlist" in (result.message or "") and "acme/shop-sync" in (result.message or "")
    assert fake.requests == []


@pytest.mark.parametrize("query", ["inventory repo:evil/leak", "org:evil inventory", "inventory user:evil",
                                   "inventory -repo:acme/docs"])
def test_scope_qualifiers_in_the_query_are_refused(fake: FakeGitHub, clock: FakeClock, query: str) -> None:
    for tool in ("searchCode", "searchIssues"):
        result = call(fake, clock, tool, query=query)
        assert result.status == "error" and "repo argument" in (result.message or "")
    assert fake.requests == []


def test_search_error_from_github_is_reported(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "searchCode", env={"HELPBOT_GITHUB_REPOS": "acme/ghost"}, query="inventory")
    assert result.status == "error"
    assert "422" in (result.message or "") and "cannot be searched" in (result.message or "")


# -- searchIssues -------------------------------------------------------------------------------------------
def test_search_issues_returns_issues_and_pull_requests_marked(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "searchIssues", query="inventory")
    assert result.status == "ok", result.message
    kinds = {hit["number"]: hit["kind"] for hit in result.items}
    assert kinds == {1: "issue", 2: "pull_request", 3: "issue"}
    assert sorted(queries(fake)) == sorted(["inventory repo:acme/shop-sync repo:acme/docs is:issue",
                                            "inventory repo:acme/shop-sync repo:acme/docs is:pr"])
    issue = next(hit for hit in result.items if hit["number"] == 1)
    assert issue["url"] == "https://github.com/acme/shop-sync/issues/1"
    assert issue["title"].startswith("在庫同期が遅れる") and issue["labels"] == ["bug"]
    assert "inventory sync is delayed" in issue["snippet"]
    pull = next(hit for hit in result.items if hit["number"] == 2)
    assert pull["url"] == "https://github.com/acme/shop-sync/pull/2"


def test_search_issues_state_filter(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "searchIssues", query="inventory", state="closed")
    assert {hit["number"] for hit in result.items} == {2, 3}  # the merged PR is closed too
    assert all("state:closed" in q for q in queries(fake))
    bad = call(fake, clock, "searchIssues", query="inventory", state="merged")
    assert bad.status == "error" and "invalid arguments" in (bad.message or "")


def test_search_issues_with_an_explicit_kind_sends_one_query(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "searchIssues", query="inventory is:pr", repo="acme/shop-sync")
    assert queries(fake) == ["inventory is:pr repo:acme/shop-sync"]
    assert [hit["kind"] for hit in result.items] == ["pull_request"]


# -- getFileContent -----------------------------------------------------------------------------------------
def test_get_file_content_decodes_base64(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="src/sync/inventory.py")
    assert result.status == "ok", result.message
    item = result.item or {}
    assert item["content"].startswith("import time\n\n\ndef sync_inventory(store):")
    assert item["truncated"] is False
    assert item["url"] == "https://github.com/acme/shop-sync/blob/main/src/sync/inventory.py"
    older = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="src/sync/inventory.py", ref="v1.0")
    assert "# v1" in (older.item or {})["content"]
    assert fake.requests[-1].url.params["ref"] == "v1.0"


def test_get_file_content_with_a_japanese_path(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="/docs/在庫.md")
    assert "5 分ごとに同期" in (result.item or {})["content"]
    assert fake.requests[-1].url.raw_path.decode().endswith("/contents/docs/%E5%9C%A8%E5%BA%AB.md")


def test_long_file_is_cut_with_a_marker(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getFileContent", env={"HELPBOT_GITHUB_MAX_BODY_CHARS": "1000"},
                  repo="acme/shop-sync", path="data/huge.csv")
    item = result.item or {}
    assert item["truncated"] is True
    assert item["content"].startswith("sku,qty\n")
    assert item["content"].endswith("…[truncated: 159000 more characters]")
    assert len(result.to_json()) < 3000


def test_binary_file_is_reported_not_shown(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="assets/logo.png")
    assert result.status == "ok"
    assert (result.item or {})["binary"] is True and "content" not in (result.item or {})
    assert any("binary file" in note for note in result.notes)


def test_file_over_one_megabyte_points_to_the_url(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.add_file("acme/shop-sync", "data/dump.sql", "x" * (1024 * 1024 + 1))
    result = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="data/dump.sql")
    assert result.status == "ok" and "too large" in result.notes[0]
    assert (result.item or {})["url"].endswith("/data/dump.sql")


def test_directory_path_lists_entries(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="src")
    assert [(e["path"], e["type"]) for e in result.items] == [("src/orders", "dir"), ("src/sync", "dir")]
    assert all(e["url"].startswith("https://github.com/acme/shop-sync/tree/") for e in result.items)


def test_secrets_in_a_file_body_are_masked(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="config/settings.py")
    text = result.to_json()
    assert SECRET not in text and "AKIAABCDEFGHIJKLMNOP" not in text
    assert "[REDACTED]" in text and "INVENTORY_BATCH = 50" in text


@pytest.mark.parametrize("path", ["../../evil/leak/contents/src/inventory.py", "src/../../../evil/leak",
                                  "src/./x.py", "a//b"])
def test_paths_that_could_leave_the_repo_are_refused(fake: FakeGitHub, clock: FakeClock, path: str) -> None:
    result = call(fake, clock, "getFileContent", repo="acme/shop-sync", path=path)
    assert result.status == "error" and "invalid path" in (result.message or "")
    assert fake.requests == []


def test_missing_file_and_unknown_ref(fake: FakeGitHub, clock: FakeClock) -> None:
    missing = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="nope.py")
    assert missing.status == "error" and "404" in (missing.message or "") and "Not Found" in (missing.message or "")
    bad_ref = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="README.md", ref="no-such-branch")
    assert "No commit found for the ref no-such-branch" in (bad_ref.message or "")


# -- getIssue / getPullRequest ------------------------------------------------------------------------------
def test_get_issue_with_the_latest_comments_bounded(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getIssue", repo="acme/shop-sync", number=1)
    assert result.status == "ok", result.message
    item = result.item or {}
    assert item["kind"] == "issue" and item["url"] == "https://github.com/acme/shop-sync/issues/1"
    assert item["body"] == "Shopify inventory sync is delayed by 30 minutes."
    assert item["comments_total"] == 15
    assert [c["body"].split(":")[0] for c in item["comments"]] == [f"comment {i}" for i in range(6, 16)]
    assert item["comments"][0]["url"].startswith("https://github.com/acme/shop-sync/issues/1#issuecomment-")
    assert "5 earlier comments left out" in result.notes[0]


def test_get_issue_with_more_comments_than_one_page(fake: FakeGitHub, clock: FakeClock) -> None:
    number = fake.add_issue("acme/shop-sync", "busy", comments=tuple(f"c{i}" for i in range(1, 102)))
    result = call(fake, clock, "getIssue", env={"HELPBOT_GITHUB_MAX_COMMENTS": "4"}, repo="acme/shop-sync",
                  number=number)
    assert [c["body"] for c in (result.item or {})["comments"]] == ["c98", "c99", "c100", "c101"]
    pages = [r.url.params["page"] for r in fake.requests if r.url.path.endswith("/comments")]
    assert pages == ["2", "1"]  # the last page held one comment: the one before it was read too


def test_get_issue_on_a_pull_request_says_so(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getIssue", repo="acme/shop-sync", number=2)
    assert (result.item or {})["kind"] == "pull_request"
    assert any("github_getPullRequest" in note for note in result.notes)


def test_get_issue_not_found(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getIssue", repo="acme/shop-sync", number=999)
    assert result.status == "error" and "404" in (result.message or "")


def test_get_pull_request_with_changed_files(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getPullRequest", env={"HELPBOT_GITHUB_MAX_PATCH_CHARS": "200"},
                  repo="acme/shop-sync", number=2)
    assert result.status == "ok", result.message
    item = result.item or {}
    assert item["merged"] is True and item["url"] == "https://github.com/acme/shop-sync/pull/2"
    assert item["base"] == "main" and item["head"] == "fix" and item["changed_files"] == 3
    first, second, third = item["files"]
    assert (first["filename"], first["status"], first["additions"], first["deletions"]) == \
        ("src/sync/inventory.py", "modified", 12, 3)
    assert first["patch_truncated"] is True and "…[truncated:" in first["patch"]
    assert second["status"] == "added" and third["patch"] is None


def test_get_pull_request_limits_files(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getPullRequest", env={"HELPBOT_GITHUB_MAX_FILES": "2"}, repo="acme/shop-sync",
                  number=2)
    assert len((result.item or {})["files"]) == 2
    assert "showing 2 of 3 changed files" in result.notes


def test_get_pull_request_on_an_issue_number(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getPullRequest", repo="acme/shop-sync", number=1)
    assert result.status == "error" and "404" in (result.message or "")


def test_tools_only_send_get_requests(fake: FakeGitHub, clock: FakeClock) -> None:
    registry = make_registry(fake, clock)
    registry.call("github_searchCode", {"query": "inventory"})
    registry.call("github_searchIssues", {"query": "inventory"})
    registry.call("github_getFileContent", {"repo": "acme/shop-sync", "path": "src"})
    registry.call("github_getIssue", {"repo": "acme/shop-sync", "number": 1})
    registry.call("github_getPullRequest", {"repo": "acme/shop-sync", "number": 2})
    assert len(fake.requests) >= 7 and {r.method for r in fake.requests} == {"GET"}


# -- errors and retries -------------------------------------------------------------------------------------
def test_bad_credentials_name_the_variable_and_are_not_retried(fake: FakeGitHub, clock: FakeClock) -> None:
    result = call(fake, clock, "getIssue", env={"GITHUB_TOKEN": "wrong"}, repo="acme/shop-sync", number=1)
    assert result.status == "error"
    assert "GITHUB_TOKEN" in (result.message or "") and "Bad credentials" in (result.message or "")
    assert len(fake.requests) == 1 and clock.sleeps == []


def test_server_errors_are_retried_with_backoff(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"^/search/code$", server_error(503), server_error(502))
    result = call(fake, clock, "searchCode", query="inventory")
    assert result.status == "ok" and result.items
    assert len(clock.sleeps) == 2 and all(0 < s <= 2 for s in clock.sleeps)


def test_429_retry_after_is_honoured(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"/issues/1$", too_many(7))
    result = call(fake, clock, "getIssue", repo="acme/shop-sync", number=1)
    assert result.status == "ok" and clock.sleeps == [7.0]


def test_primary_rate_limit_waits_until_the_reset(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"^/search/issues$", rate_limited(clock.wall() + 12, "search"))
    result = call(fake, clock, "searchIssues", query="inventory")
    assert result.status == "ok" and clock.sleeps == [12.0]


def test_secondary_rate_limit_honours_retry_after(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"/contents/", secondary_rate_limited(5))
    result = call(fake, clock, "getFileContent", repo="acme/shop-sync", path="src/sync/inventory.py")
    assert result.status == "ok" and clock.sleeps == [5.0]


def test_a_reset_far_away_is_an_error_at_once(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"^/search/code$", rate_limited(clock.wall() + 1800, "code_search"))
    result = call(fake, clock, "searchCode", query="inventory")
    assert result.status == "error"
    assert "rate limited" in (result.message or "") and "1800 s" in (result.message or "")
    assert clock.sleeps == [] and len(fake.requests) == 1


def test_the_fake_code_search_limit_is_waited_out(fake: FakeGitHub, clock: FakeClock) -> None:
    registry = make_registry(fake, clock)
    for _ in range(10):  # GitHub allows 10 code searches a minute
        assert registry.call("github_searchCode", {"query": "inventory"}).status == "ok"
    clock.advance(40)
    result = registry.call("github_searchCode", {"query": "inventory"})
    assert result.status == "ok"
    assert clock.sleeps == [20.0]  # until x-ratelimit-reset, start + 60 s


def test_timeouts_are_retried(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"/pulls/2$", slow(60))  # longer than the 20 s client timeout
    result = call(fake, clock, "getPullRequest", repo="acme/shop-sync", number=2)
    assert result.status == "ok" and len(clock.sleeps) == 1


def test_a_github_that_stays_down_is_an_error_result(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"^/search/code$", *[server_error(503) for _ in range(10)])
    result = call(fake, clock, "searchCode", query="inventory")
    assert result.status == "error"
    assert "GitHub is unavailable after retries" in (result.message or "") and "503" in (result.message or "")
    assert len(fake.requests) == 4 and len(clock.sleeps) == 3


def test_a_non_json_answer_points_at_the_url(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"/issues/1$", respond(200, "<html>proxy login</html>", {"content-type": "text/html"}))
    result = call(fake, clock, "getIssue", repo="acme/shop-sync", number=1)
    assert result.status == "error" and "GITHUB_API_URL" in (result.message or "")


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_answer_over_the_bound_is_an_error_result(fake: FakeGitHub, clock: FakeClock, gzipped: bool) -> None:
    """A base URL on a file server, or a gzip bomb: at most 8 MB (decoded) is read, then the call says so."""
    fake.script("GET", r"/issues/1$", respond(200, *flood(gzipped=gzipped)))
    result = call(fake, clock, "getIssue", repo="acme/shop-sync", number=1)
    assert result.status == "error" and "GitHub sent an answer of more than 8 MB" in (result.message or "")
    assert clock.sleeps == []  # an answer, not an outage: not asked again


# -- the fake over real HTTP, and repository_dispatch -------------------------------------------------------
def test_over_a_real_local_server_with_an_enterprise_prefix(fake: FakeGitHub, clock: FakeClock) -> None:
    with serve(fake.handler) as url:
        fake.api_url = f"{url}/api/v3"
        env = {**ENV, "GITHUB_API_URL": fake.api_url, "HELPBOT_HTTP_TIMEOUT_S": "1"}
        registry = Registry(env=env, clock=clock, platforms={"github": github.PLATFORM})
        # The first answer is held until the client has given up and come back: its own 1 s read timeout is the
        # only timer in play (no server delay racing it), and the retry has all of its second.
        retried = threading.Event()

        def held(request: httpx2.Request) -> None:
            retried.wait(30)

        def retry(request: httpx2.Request) -> None:
            retried.set()

        fake.script("GET", r"/contents/", held, retry)
        result = registry.call("github_getFileContent", {"repo": "acme/shop-sync", "path": "src/sync/inventory.py"})
        assert result.status == "ok", result.message
        assert "sync_inventory" in (result.item or {})["content"]
        assert len(clock.sleeps) == 1
        search = registry.call("github_searchCode", {"query": "sync_inventory"})
        assert [hit["path"] for hit in search.items] == ["src/sync/inventory.py"]
        assert all(r.url.path.startswith("/api/v3/") for r in fake.requests)


def test_fake_records_repository_dispatches(fake: FakeGitHub) -> None:
    client = httpx2.Client(base_url=fake.api_url, transport=fake.transport(),
                          headers={"Authorization": "Bearer test-github-token"})
    payload = {"channel": "C1", "ts": "1700000000.000100", "reaction": "help", "user": "U1"}
    ok = client.post("/repos/acme/shop-sync/dispatches", json={"event_type": "slack-help", "client_payload": payload})
    assert ok.status_code == 204 and ok.content == b""
    assert fake.dispatches == [{"repo": "acme/shop-sync", "event_type": "slack-help", "client_payload": payload}]
    too_many_keys = {f"k{i}": i for i in range(11)}
    bad = client.post("/repos/acme/shop-sync/dispatches",
                      json={"event_type": "slack-help", "client_payload": too_many_keys})
    assert bad.status_code == 422 and "No more than 10 properties" in bad.json()["message"]
    assert client.post("/repos/acme/shop-sync/dispatches", json={"client_payload": {}}).status_code == 422
    assert client.post("/repos/acme/nope/dispatches", json={"event_type": "x"}).status_code == 404
    intruder = httpx2.Client(base_url=fake.api_url, transport=fake.transport(),
                            headers={"Authorization": "Bearer wrong"})
    denied = intruder.post("/repos/acme/shop-sync/dispatches", json={"event_type": "x"})
    assert denied.status_code == 401 and denied.json()["message"] == "Bad credentials"
    assert len(fake.dispatches) == 1


def test_fake_dispatch_over_real_http(fake: FakeGitHub) -> None:
    with serve(fake.handler) as url:
        response = httpx2.post(f"{url}/repos/acme/docs/dispatches", json={"event_type": "slack-help"},
                              headers={"Authorization": "token test-github-token"})
    assert response.status_code == 204
    assert fake.dispatches == [{"repo": "acme/docs", "event_type": "slack-help", "client_payload": {}}]


def test_fake_content_is_base64_wrapped_like_github(fake: FakeGitHub) -> None:
    client = httpx2.Client(base_url=fake.api_url, transport=fake.transport(),
                          headers={"Authorization": "Bearer test-github-token"})
    body = client.get("/repos/acme/shop-sync/contents/data/huge.csv").json()
    assert body["encoding"] == "base64" and all(len(line) <= 60 for line in body["content"].splitlines())
    assert base64.b64decode(body["content"]).startswith(b"sku,qty\n")


def test_a_permission_403_is_reported_and_not_retried(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"/issues/1$", respond(403, {"message": "Resource not accessible by personal access token",
                                                    "documentation_url": "https://docs.github.com/rest",
                                                    "status": "403"}))
    result = call(fake, clock, "getIssue", repo="acme/shop-sync", number=1)
    assert result.status == "error" and "Resource not accessible" in (result.message or "")
    assert len(fake.requests) == 1 and clock.sleeps == []


def test_a_renamed_repository_says_to_update_the_allowlist(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.script("GET", r"/issues/1$", respond(301, {"message": "Moved Permanently", "url": "x"},
                                              {"location": "https://api.github.com/repositories/1/issues/1"}))
    result = call(fake, clock, "getIssue", repo="acme/shop-sync", number=1)
    assert result.status == "error" and "HELPBOT_GITHUB_REPOS" in (result.message or "")


# -- one time budget per tool call, GET only, size caps ------------------------------------------------------
def test_all_requests_of_one_call_share_its_time_budget(fake: FakeGitHub, clock: FakeClock) -> None:
    """getIssue makes several requests; they share HELPBOT_TOOL_BUDGET_S instead of each starting afresh."""
    fake.script("GET", r"/issues/1$", too_many(20), too_many(20))
    fake.script("GET", r"/issues/1/comments$", *[too_many(20) for _ in range(10)])
    result = call(fake, clock, "getIssue", env={"HELPBOT_TOOL_BUDGET_S": "45"}, repo="acme/shop-sync", number=1)
    assert result.status == "error" and "left for this call" in (result.message or ""), result.message
    assert clock.sleeps == [20.0, 20.0]  # the third 20 s would pass 45 s: stop rather than retry early


@pytest.mark.parametrize("value", ["soon", "Thu, 99 Foo 2026 25:61:00 GMT", "-"])
def test_an_unreadable_retry_after_is_backoff_not_a_crash(fake: FakeGitHub, clock: FakeClock, value: str) -> None:
    fake.script("GET", r"/issues/1$", respond(429, {"message": "Too Many Requests"}, {"retry-after": value}))
    result = call(fake, clock, "getIssue", repo="acme/shop-sync", number=1)
    assert result.status == "ok", result.message
    assert len(clock.sleeps) == 1 and 0 < clock.sleeps[0] <= 1


def test_the_client_refuses_anything_but_get(fake: FakeGitHub) -> None:
    config = github.load_config(ENV)
    assert config is not None
    client = github.make_client(config, transport=fake.transport())
    for method in ("POST", "PATCH", "PUT", "DELETE"):
        with pytest.raises(ToolError, match="read-only"):
            client.request(method, "/repos/acme/shop-sync/issues/1", json={"state": "closed"})
    assert fake.requests == []
    assert client.get("/repos/acme/shop-sync/issues/1").status_code == 200


def test_a_pull_request_with_many_files_stays_within_the_result_limit(fake: FakeGitHub, clock: FakeClock) -> None:
    files = [{"filename": f"src/module_{n:03d}/a_rather_long_file_name_{n:03d}.py", "additions": 50,
              "patch": "@@ -1,50 +1,50 @@\n" + "+changed line of code\n" * 80} for n in range(100)]
    number = fake.add_pull("acme/shop-sync", "Rename every module", "Big refactor. " * 2000, files=files)
    env = {"HELPBOT_GITHUB_MAX_FILES": "100", "HELPBOT_TOOL_MAX_ITEMS": "100"}
    result = call(fake, clock, "getPullRequest", env=env, repo="acme/shop-sync", number=number)
    assert result.status == "ok", result.message
    assert len(result.to_json()) <= 16000
    item = result.item or {}
    assert item["url"] == f"https://github.com/acme/shop-sync/pull/{number}" and item["title"] == "Rename every module"
    assert all(f["filename"] in {x["filename"] for x in files} for f in item["files"])  # names whole, never cut
    assert 0 < len(item["files"]) < 100
    assert any("item.files" in note for note in result.notes), result.notes
