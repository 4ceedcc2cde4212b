"""The Redmine platform against a real Redmine 5 (tests/redmine_server.py) and, for failures a real server will
not produce on demand (429, 503, timeouts, a misbehaving search), a tiny local HTTP stub with Redmine's shapes."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

import pytest

from mcp_lib import Registry, Result, ToolError
from mcp_lib.config import ConfigError
from mcp_lib.cutting import TRUNCATION_MARKER
from mcp_lib.platforms import redmine
from tests import redmine_server as server_helper
from tests.fakes.clock import FakeClock
from tests.fakes.github import flood
from tests.redmine_server import RedmineServer

ROOT = Path(__file__).resolve().parents[3]


def make_registry(url: str, key: str, sleeps: list[float] | None = None, **env: str) -> Registry:
    """Only the Redmine platform, configured from env, on a fake clock whose sleeps go into ``sleeps``."""
    clock = FakeClock()
    clock.sleeps = sleeps if sleeps is not None else []
    return Registry(env={"REDMINE_URL": url, "REDMINE_API_KEY": key, **env},
                    platforms={"redmine": redmine.PLATFORM}, clock=clock)


def ok(result: Result) -> Result:
    assert result.status == "ok", result.message
    return result


# == against the real Redmine ================================================================================
real = pytest.mark.redmine


@pytest.fixture
def rm(redmine_server: RedmineServer) -> Registry:
    return make_registry(redmine_server.url, redmine_server.api_key)


@pytest.fixture
def ids(redmine_server: RedmineServer) -> dict[str, int]:
    return redmine_server.ids


@real
def test_search_finds_japanese_issues_and_wiki_pages(rm: Registry, redmine_server: RedmineServer,
                                                     ids: dict[str, int]) -> None:
    result = ok(rm.call("redmine:search", {"query": "在庫"}))
    by_url = {item["url"]: item for item in result.items}
    issue = by_url[f"{redmine_server.url}/issues/{ids['stock_sync']}"]
    assert issue["type"] == "issue" and issue["issueId"] == ids["stock_sync"]
    assert "在庫同期が遅延する" in issue["title"]
    assert "在庫" in issue["snippet"] and issue["project"] == "EC連携" and issue["status"] == "New"
    assert issue["datetime"]
    wiki = [item for item in result.items if item["type"] == "wiki-page" and item["project"] == "ec-sync"]
    assert wiki and wiki[0]["wikiTitle"] == "在庫同期の手順"
    assert wiki[0]["url"].startswith(f"{redmine_server.url}/projects/ec-sync/wiki/")
    # the closed issue that mentions 在庫 only in a comment is found too
    assert f"{redmine_server.url}/issues/{ids['order_import']}" in by_url
    assert all(item["title"] for item in result.items if item.get("url"))
    assert result.total is not None and result.total >= len(result.items)


@real
def test_the_database_holds_only_the_seeded_data(redmine_server: RedmineServer, ids: dict[str, int]) -> None:
    """The fixture put another team's project, issue and user "tanaka" into the copy before seeding."""
    import urllib.request

    assert redmine_server.removed["projects"] >= 1 and redmine_server.removed["issues"] >= 1
    assert redmine_server.removed["users"] >= 1

    def get(path: str) -> Any:
        request = urllib.request.Request(f"{redmine_server.url}{path}",
                                         headers={"X-Redmine-API-Key": redmine_server.api_key})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    assert {p["identifier"] for p in get("/projects.json?limit=100")["projects"]} == {"ec-sync", "ec-lab",
                                                                                       "internal-hr"}
    issues = get("/issues.json?status_id=*&limit=100")["issues"]
    assert {i["id"] for i in issues} == set(ids.values())  # the admin's key sees the private one too
    assert {u["login"] for u in get("/users.json?limit=100")["users"]} == {"admin", "tanaka"}
    assert [u["mail"] for u in get("/users.json?name=tanaka")["users"]] == ["tanaka@example.test"]


@real
def test_search_english_words_all_must_match(rm: Registry, ids: dict[str, int]) -> None:
    result = ok(rm.call("redmine:search", {"query": "Shopify 429", "limit": 5}))
    assert [item["issueId"] for item in result.items] == [ids["order_import"]]
    assert result.items[0]["status"] == "Closed"
    assert ok(rm.call("redmine:search", {"query": "存在しない言葉xyz"})).items == []


@real
def test_search_limit_and_project_argument(rm: Registry, ids: dict[str, int]) -> None:
    assert len(ok(rm.call("redmine:search", {"query": "在庫", "limit": 2})).items) == 2
    scoped = ok(rm.call("redmine:search", {"query": "在庫", "project": "internal-hr"}))
    assert {item["project"] for item in scoped.items} == {"社内総務", "internal-hr"}
    missing = rm.call("redmine:search", {"query": "在庫", "project": "no-such-project"})
    assert missing.is_error and "no-such-project" in (missing.message or "")


@real
def test_getIssues_filters_subject_project_and_status(rm: Registry, ids: dict[str, int],
                                                      redmine_server: RedmineServer) -> None:
    result = ok(rm.call("redmine:getIssues", {"query": "在庫", "project": "ec-sync", "status": "open"}))
    found = {item["issueId"] for item in result.items}
    assert {ids["stock_sync"], ids["child"]} <= found
    assert ids["hr"] not in found and ids["order_import"] not in found  # other project; subject lacks 在庫
    item = next(i for i in result.items if i["issueId"] == ids["stock_sync"])
    assert item == {
        "issueId": ids["stock_sync"], "title": f"#{ids['stock_sync']} 在庫同期が遅延する",
        "url": f"{redmine_server.url}/issues/{ids['stock_sync']}", "status": "New", "project": "EC連携",
        "tracker": "Bug", "assignee": None, "updated_on": item["updated_on"],
    }
    closed = ok(rm.call("redmine:getIssues", {"status": "closed"}))
    assert [i["issueId"] for i in closed.items] == [ids["order_import"]]
    open_ = ok(rm.call("redmine:getIssues", {"status": "open", "limit": 50}))
    assert ids["order_import"] not in {i["issueId"] for i in open_.items}
    every = ok(rm.call("redmine:getIssues", {"query": "Shopify"}))  # status defaults to all
    assert [i["issueId"] for i in every.items] == [ids["order_import"]]
    assert len(ok(rm.call("redmine:getIssues", {"limit": 3})).items) == 3


@real
def test_getIssue_history_relations_attachments(rm: Registry, ids: dict[str, int],
                                                redmine_server: RedmineServer) -> None:
    result = ok(rm.call("redmine:getIssue", {"issueId": ids["stock_sync"]}))
    issue = result.item
    assert issue is not None
    assert issue["title"] == f"#{ids['stock_sync']} 在庫同期が遅延する"
    assert issue["url"] == f"{redmine_server.url}/issues/{ids['stock_sync']}"
    assert "30分以上遅れる" in issue["description"]
    assert [(j["author"], j["notes"]) for j in issue["journals"]] == [
        ("太郎 田中", "夜間バッチのログを確認しました。在庫APIがタイムアウトしています。"),
        ("Redmine Admin", "Retry-After を守るように修正します。"),
        ("太郎 田中", "修正版をステージングで確認中です。"),
    ]  # oldest first, newest last
    assert all(j["created_on"] and "url" not in j for j in issue["journals"])  # no #note-N: see below
    assert [a["filename"] for a in issue["attachments"]] == ["inventory_log.csv"]
    assert issue["relations"] == [{
        "issueId": ids["order_import"], "title": f"#{ids['order_import']} Order import fails with 429 from Shopify API",
        "url": f"{redmine_server.url}/issues/{ids['order_import']}", "status": "Closed", "relation": "relates"}]
    inverse = ok(rm.call("redmine:getIssue", {"issueId": ids["order_import"]})).item
    assert inverse is not None and inverse["relations"][0]["relation"] == "relates (inverse)"


@real
def test_getIssue_private_notes_are_never_returned(rm: Registry, ids: dict[str, int]) -> None:
    result = ok(rm.call("redmine:getIssue", {"issueId": ids["stock_sync"]}))
    assert "社外秘" not in result.to_json()  # the admin key could read it; the Slack thread must not
    assert not any("private" in note for note in result.notes)


@real
def test_a_private_note_between_public_ones_leaves_no_gap(rm: Registry, ids: dict[str, int]) -> None:
    """Redmine numbers comments (#note-N) counting the private ones: an issue with a private note between two
    public ones reads exactly like its twin without it (ids and times aside)."""
    def normal(number: int) -> str:
        text = ok(rm.call("redmine:getIssue", {"issueId": number})).to_json()
        text = re.sub(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", "T", text)  # times first: an hour may equal the id
        return re.sub(rf"(?<!\d){number}(?!\d)", "N", text)

    with_private, without = normal(ids["note_gap"]), normal(ids["note_twin"])
    assert with_private == without and "社外秘" not in with_private and "note-" not in with_private
    assert "一つ目の公開コメント" in with_private and "二つ目の公開コメント" in with_private


@real
def test_a_search_matching_only_a_private_note_reads_like_no_hits(rm: Registry, ids: dict[str, int]) -> None:
    for probe in ("取引先X", "手動で調整済み", "間の非公開コメント", "在庫 社外秘"):  # words of private notes only
        assert rm.call("redmine:search", {"query": probe}).to_dict() == \
            rm.call("redmine:search", {"query": "存在しない言葉xyz"}).to_dict(), probe
    kept = ok(rm.call("redmine:search", {"query": "ステージング 確認中"}))  # a public comment's words
    assert [item["issueId"] for item in kept.items] == [ids["stock_sync"]]


@real
def test_getIssue_parent_and_children(rm: Registry, ids: dict[str, int]) -> None:
    parent = ok(rm.call("redmine:getIssue", {"issueId": ids["parent"]})).item
    assert parent is not None
    assert [c["issueId"] for c in parent["children"]] == [ids["child"], ids["hr_child"]]
    assert parent["children"][0]["title"] == f"#{ids['child']} 楽天 在庫API の切り替え"
    child = ok(rm.call("redmine:getIssue", {"issueId": ids["child"]})).item
    assert child is not None and child["parent"]["issueId"] == ids["parent"]
    assert child["parent"]["title"] == f"#{ids['parent']} 楽天 API v2 移行"


@real
def test_getIssue_cuts_long_histories_with_a_marker(redmine_server: RedmineServer, ids: dict[str, int]) -> None:
    rm = make_registry(redmine_server.url, redmine_server.api_key,
                       HELPBOT_REDMINE_MAX_JOURNALS="3", HELPBOT_REDMINE_MAX_NOTE_CHARS="500")
    result = ok(rm.call("redmine:getIssue", {"issueId": ids["long"]}))
    issue = result.item
    assert issue is not None
    assert issue["description"] == "Inventory reservation design."  # the first post is always kept
    assert issue["journals_omitted"] == 5
    assert [j["notes"][:22] for j in issue["journals"][:2]] == ["journal note number 6", "journal note number 7"]
    last = issue["journals"][-1]["notes"]
    cut = len(server_helper.LONG_NOTE) - 500
    assert last == server_helper.LONG_NOTE[:500] + TRUNCATION_MARKER.format(n=cut)
    assert any("5 older comments left out" in note for note in result.notes)
    # the defaults keep everything of this issue except the very long note's tail
    full = ok(make_registry(redmine_server.url, redmine_server.api_key)
              .call("redmine:getIssue", {"issueId": ids["long"]})).item
    assert full is not None and full["journals_omitted"] == 0 and len(full["journals"]) == 8


@real
def test_getIssue_unknown_number(rm: Registry) -> None:
    result = rm.call("redmine:getIssue", {"issueId": 99999})
    assert result.is_error and "#99999" in (result.message or "")


@real
def test_getWikiPage(rm: Registry, redmine_server: RedmineServer) -> None:
    page = ok(rm.call("redmine:getWikiPage", {"project": "ec-sync", "title": "在庫同期の手順"})).item
    assert page is not None and "15分ごと" in page["text"] and page["version"] == 1
    assert page["url"] == (f"{redmine_server.url}/projects/ec-sync/wiki/"
                           "%E5%9C%A8%E5%BA%AB%E5%90%8C%E6%9C%9F%E3%81%AE%E6%89%8B%E9%A0%86")
    missing = rm.call("redmine:getWikiPage", {"project": "ec-sync", "title": "NoSuchPage"})
    assert missing.is_error and "NoSuchPage" in (missing.message or "")


@real
def test_project_allowlist_is_enforced(redmine_server: RedmineServer, ids: dict[str, int]) -> None:
    url, key = redmine_server.url, redmine_server.api_key
    # Without the allowlist the data would leak: the other project, the subproject, a cross-project child.
    open_all = make_registry(url, key)
    assert {ids["hr"], ids["lab"]} <= {i.get("issueId") for i in ok(open_all.call("redmine:search",
                                                                                  {"query": "在庫"})).items}
    assert "総務側" in ok(open_all.call("redmine:getIssue", {"issueId": ids["parent"]})).to_json()

    rm = make_registry(url, key, HELPBOT_REDMINE_PROJECTS="ec-sync")
    searched = ok(rm.call("redmine:search", {"query": "在庫", "limit": 50}))
    assert searched.items and {item["project"] for item in searched.items} <= {"EC連携", "ec-sync"}
    assert "総務" not in searched.to_json() and "internal-hr" not in searched.to_json()

    listed = ok(rm.call("redmine:getIssues", {"query": "在庫", "limit": 50}))
    assert {i["issueId"] for i in listed.items} == {ids["stock_sync"], ids["child"]}
    # Redmine lists subproject issues under project_id=ec-sync; the allowlist drops them
    scoped = ok(rm.call("redmine:getIssues", {"project": "ec-sync", "limit": 50}))
    assert ids["lab"] not in {i["issueId"] for i in scoped.items}
    assert scoped.notes == []  # dropped without a trace

    refusals: list[tuple[str, dict[str, Any]]] = [
        ("getIssues", {"project": "internal-hr"}), ("search", {"query": "在庫", "project": "ec-lab"}),
        ("getWikiPage", {"project": "internal-hr", "title": "在庫ツール契約"})]
    for name, args in refusals:  # the caller's own argument: refused before any request, naming the allowlist
        refused = rm.call(f"redmine:{name}", args)
        assert refused.is_error and "HELPBOT_REDMINE_PROJECTS" in (refused.message or ""), (name, refused)
        assert "総務" not in refused.to_json()
    for number in (ids["hr"], ids["lab"]):  # known only from Redmine's answer: refused as if missing
        refused = rm.call("redmine:getIssue", {"issueId": number})
        assert refused.is_error and refused.message == f"no issue #{number} (or the API key may not see it)"

    parent = ok(rm.call("redmine:getIssue", {"issueId": ids["parent"]}))
    assert parent.item is not None and [c["issueId"] for c in parent.item["children"]] == [ids["child"]]
    assert "総務側" not in parent.to_json()


@real
def test_an_allowlisted_project_that_is_gone_is_skipped_by_both_listings(redmine_server: RedmineServer,
                                                                         ids: dict[str, int]) -> None:
    """HELPBOT_REDMINE_PROJECTS naming a project deleted since: the search and the listing both answer from the
    rest; asked for by name, it is missing."""
    rm = make_registry(redmine_server.url, redmine_server.api_key, HELPBOT_REDMINE_PROJECTS="gone-project, ec-sync")
    assert ok(rm.call("redmine:search", {"query": "在庫"})).items
    listed = ok(rm.call("redmine:getIssues", {"query": "在庫", "limit": 50}))
    assert {i["issueId"] for i in listed.items} == {ids["stock_sync"], ids["child"]}
    missing = rm.call("redmine:getIssues", {"project": "gone-project"})
    assert missing.is_error and "no project 'gone-project'" in (missing.message or "")


@real
@pytest.mark.parametrize("title", [
    "../../internal-hr/wiki/在庫ツール契約", "..%2F..%2Finternal-hr%2Fwiki%2F在庫ツール契約",
    "x/../../../internal-hr/wiki/在庫ツール契約", "在庫ツール契約?project_id=internal-hr", "在庫同期の手順#x"])
def test_a_wiki_title_cannot_leave_the_allowed_project(redmine_server: RedmineServer, title: str) -> None:
    rm = make_registry(redmine_server.url, redmine_server.api_key, HELPBOT_REDMINE_PROJECTS="ec-sync")
    refused = rm.call("redmine:getWikiPage", {"project": "ec-sync", "title": title})
    assert refused.is_error, refused.to_json()
    assert "総務" not in refused.to_json() and "not a wiki page title" in (refused.message or "")


@real
def test_a_wiki_redirect_into_another_project_is_refused(redmine_server: RedmineServer) -> None:
    url, key = redmine_server.url, redmine_server.api_key
    rm = make_registry(url, key, HELPBOT_REDMINE_PROJECTS="ec-sync")
    refused = rm.call("redmine:getWikiPage", {"project": "ec-sync", "title": "契約一覧"})
    missing = rm.call("redmine:getWikiPage", {"project": "ec-sync", "title": "契約二覧"})
    assert refused.is_error and refused.message == (missing.message or "").replace("契約二覧", "契約一覧")
    assert "internal-hr" not in refused.to_json() and "総務" not in refused.to_json()
    # without an allowlist the redirect is followed, and the page says where it really lives
    moved = ok(make_registry(url, key).call("redmine:getWikiPage", {"project": "ec-sync", "title": "契約一覧"})).item
    assert moved is not None and moved["project"] == "internal-hr" and moved["title"] == "在庫ツール契約"
    assert moved["url"].startswith(f"{url}/projects/internal-hr/wiki/") and "総務" in moved["text"]
    assert ok(rm.call("redmine:getWikiPage", {"project": "ec-sync", "title": "在庫同期の手順"})).item
    bad_project = rm.call("redmine:getWikiPage", {"project": "ec-sync/../internal-hr", "title": "在庫ツール契約"})
    assert bad_project.is_error and "総務" not in bad_project.to_json()


@real
def test_private_issues_are_never_returned(rm: Registry, ids: dict[str, int]) -> None:
    secret = ids["private"]
    searched = ok(rm.call("redmine:search", {"query": "在庫", "limit": 50}))
    assert secret not in {item.get("issueId") for item in searched.items}
    assert searched.notes == [] and searched.total == len(searched.items), searched.notes
    listed = ok(rm.call("redmine:getIssues", {"query": "在庫", "limit": 50}))
    assert secret not in {item["issueId"] for item in listed.items}
    assert listed.notes == []
    refused = rm.call("redmine:getIssue", {"issueId": secret})
    assert refused.is_error and refused.message == f"no issue #{secret} (or the API key may not see it)"
    parent = ok(rm.call("redmine:getIssue", {"issueId": ids["parent"]}))
    stock = ok(rm.call("redmine:getIssue", {"issueId": ids["stock_sync"]}))
    for result in (searched, listed, refused, parent, stock):
        assert "非公開" not in result.to_json() and "極秘" not in result.to_json()
    assert parent.item is not None and secret not in [c["issueId"] for c in parent.item["children"]]
    assert stock.item is not None and secret not in [r["issueId"] for r in stock.item["relations"]]
    assert not any("private" in note for note in stock.notes)


@real
def test_wrong_api_key_is_a_clear_error(redmine_server: RedmineServer, ids: dict[str, int]) -> None:
    # Redmine would treat an unknown key as anonymous and still show its public projects
    rm = make_registry(redmine_server.url, "0" * 40)
    calls: list[tuple[str, dict[str, Any]]] = [("search", {"query": "在庫"}),
                                               ("getIssue", {"issueId": ids["stock_sync"]})]
    for name, args in calls:
        result = rm.call(f"redmine:{name}", args)
        assert result.is_error and "REDMINE_API_KEY" in (result.message or "") and "401" in (result.message or "")


@real
def test_tools_cannot_write(rm: Registry, redmine_server: RedmineServer) -> None:
    config = rm.config("redmine")
    assert isinstance(config, redmine.RedmineConfig)
    client = redmine.make_client(config)
    with pytest.raises(ToolError, match="read-only"):
        client.api.issue.create(project_id="ec-sync", subject="should never exist", tracker_id=1)
    assert ok(rm.call("redmine:getIssues", {"query": "should never exist"})).items == []
    assert all(tool.read_only for tool in redmine.PLATFORM.tools.values())


@real
def test_cli_prints_sources(redmine_server: RedmineServer) -> None:
    env = {**os.environ, "REDMINE_URL": redmine_server.url, "REDMINE_API_KEY": redmine_server.api_key}
    done = subprocess.run([sys.executable, "-c", "from mcp_lib.cli import main; raise SystemExit(main())",
                           "redmine:search", "在庫"], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=60)
    assert done.returncode == 0, (done.stdout, done.stderr)
    data = json.loads(done.stdout)
    assert data["items"] and all(item["url"] and item["title"] for item in data["items"])


# == configuration and metadata ==============================================================================
def test_config_enabled_only_with_url_and_key() -> None:
    assert redmine.load_config({}) is None
    assert redmine.load_config({"REDMINE_URL": "https://redmine.example.test"}) is None
    assert redmine.load_config({"REDMINE_API_KEY": "k"}) is None
    config = redmine.load_config({"REDMINE_URL": "https://redmine.example.test/", "REDMINE_API_KEY": "k",
                                  "HELPBOT_REDMINE_PROJECTS": "ec-sync, internal-hr"})
    assert config is not None and config.url == "https://redmine.example.test"
    assert config.projects == ("ec-sync", "internal-hr")
    assert "k" not in repr(config)


def test_config_url_without_scheme_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="REDMINE_URL"):
        redmine.load_config({"REDMINE_URL": "redmine.example.test", "REDMINE_API_KEY": "k"})
    with pytest.raises(ConfigError, match="HELPBOT_REDMINE_MAX_JOURNALS"):
        redmine.load_config({"REDMINE_URL": "https://r.test", "REDMINE_API_KEY": "k",
                             "HELPBOT_REDMINE_MAX_JOURNALS": "many"})


def test_metadata_is_written_for_the_model() -> None:
    platform = redmine.PLATFORM
    assert platform.overview and platform.scenes and platform.security_rules
    assert "読み取り専用" in " ".join(platform.security_rules)
    assert "HELPBOT_REDMINE_PROJECTS" in " ".join(platform.security_rules)
    assert "REDMINE_URL" in platform.setup and "REDMINE_API_KEY" in platform.setup
    assert set(platform.tools) == {"search", "getIssues", "getIssue", "getWikiPage"}
    assert "redmine_getIssue" in platform.tools["search"].description
    schema = platform.tools["getIssues"].input_schema
    assert schema["properties"]["status"]["enum"] == ["open", "closed", "all"]
    assert platform.tools["getIssue"].input_schema["properties"]["issueId"]["type"] == "integer"


# == starting the real Redmine: bounded, patient, and never a skip under CI =====================================
@pytest.mark.parametrize(("value", "required"), [("true", True), ("True", True), ("1", True), ("yes", True),
                                                  ("", False), ("false", False), ("0", False), (None, False)])
def test_ci_requires_the_real_redmine(value: str | None, required: bool) -> None:
    """CI services set CI=true (GitHub Actions, GitLab) or CI=1: either way the Redmine tests must run."""
    assert server_helper.required({} if value is None else {"CI": value}) is required


def test_the_start_is_awaited_once_a_second_up_to_its_bound() -> None:
    """A Redmine whose boot takes 200 s (a loaded machine) is waited for; no sub-second spin on the way."""
    clock = FakeClock(start=0.0)
    ready_at = 200.0
    port = server_helper.poll(lambda: 3000 if clock.monotonic() >= ready_at else None, 300.0, "Redmine did not start",
                              clock=clock.monotonic, sleep=clock.sleep)
    assert port == 3000 and clock.monotonic() == ready_at
    assert set(clock.sleeps) == {server_helper.POLL_S} and server_helper.POLL_S >= 1
    if "HELPBOT_REDMINE_START_TIMEOUT" not in os.environ:
        assert server_helper.START_TIMEOUT_S >= 300  # seed and boot took 74 s at load 9; 120 was not enough


def test_a_start_past_its_bound_names_the_variable() -> None:
    clock = FakeClock(start=0.0)
    with pytest.raises(server_helper.RedmineUnavailable, match=r"did not answer within \d+ s "
                                                               r"\(HELPBOT_REDMINE_START_TIMEOUT\) \(HTTP 503\)"):
        server_helper.poll(lambda: None, 2.5, "Redmine did not answer", detail=lambda: " (HTTP 503)",
                           clock=clock.monotonic, sleep=clock.sleep)
    assert clock.sleeps == [1.0, 1.0, 0.5] and clock.monotonic() == 2.5  # never past the deadline


def test_a_skipped_redmine_test_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/conftest.py: whatever makes a real-Redmine test skip, CI reports it failed."""
    from tests import conftest

    class Item:
        @staticmethod
        def get_closest_marker(name: str) -> object:
            return object() if name == "redmine" else None

    def outcome(ci: str) -> str:
        monkeypatch.setenv("CI", ci)
        report = pytest.TestReport("t.py::test_x", ("t.py", 1, "test_x"), {}, "skipped",
                                   ("t.py", 1, "Skipped: no real Redmine here"), "setup")
        hook = conftest.pytest_runtest_makereport(Item(), None)  # type: ignore[arg-type]
        next(hook)
        with pytest.raises(StopIteration) as done:
            hook.send(report)
        return str(done.value.value.outcome)

    assert outcome("true") == "failed" and outcome("") == "skipped"


# == failures, against a closed port and a local stub =========================================================
@pytest.fixture
def closed_port_url() -> Iterator[str]:
    sock, port = server_helper.refusing_port()  # bound, not listening: refused, and no one else can take it
    with sock:
        yield f"http://127.0.0.1:{port}"


def test_redmine_down_is_an_error_result_after_retries(closed_port_url: str) -> None:
    sleeps: list[float] = []
    result = make_registry(closed_port_url, "k", sleeps).call("redmine:search", {"query": "在庫"})
    assert result.is_error
    assert "unavailable after retries" in (result.message or "") and "cannot connect" in (result.message or "")
    assert len(sleeps) == 3  # four attempts, no real waiting


Reply = tuple[int, dict[str, str], Any]

USER = {"user": {"id": 1, "login": "admin", "admin": True, "firstname": "Redmine", "lastname": "Admin"}}
ISSUE = {"issue": {
    "id": 1, "project": {"id": 1, "name": "EC連携"}, "tracker": {"id": 1, "name": "Bug"},
    "status": {"id": 1, "name": "New", "is_closed": False}, "priority": {"id": 2, "name": "Normal"},
    "author": {"id": 1, "name": "Redmine Admin"}, "subject": "在庫同期が遅延する", "description": "遅れる",
    "is_private": False, "created_on": "2026-11-30T10:51:03Z", "updated_on": "2026-11-30T10:51:03Z",
    "closed_on": None, "attachments": [], "relations": [], "journals": [
        {"id": 1, "user": {"id": 5, "name": "太郎 田中"}, "notes": "確認しました", "created_on": "2026-11-30T10:51:03Z",
         "private_notes": False, "details": []}]}}
PROJECT = {"project": {"id": 1, "name": "EC連携", "identifier": "ec-sync", "is_public": True}}


@dataclass
class Stub:
    """A local HTTP server speaking Redmine's JSON; ``script`` replies go first, then the routes."""

    url: str = ""
    script: list[Reply] = field(default_factory=list)
    routes: dict[str, Callable[[str], Reply]] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    hold_first: bool = False  # the first request gets no answer until the client has given up and come back
    cut_first: str = ""  # ... gets its headers and part of its body, then "stall"s or is "cut" off
    retried: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub(routes={"/users/current.json": lambda q: (200, {}, USER),
                         "/issues/1.json": lambda q: (200, {}, ISSUE),
                         "/projects/ec-sync.json": lambda q: (200, {}, PROJECT)})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.seen.append(self.path)
            if len(state.seen) > 1:
                state.retried.set()
            elif state.hold_first:
                state.retried.wait(30)  # released by the client's retry: no race between two timers
            path, _, query = self.path.partition("?")
            if state.script:
                status, headers, body = state.script.pop(0)
            elif path in state.routes:
                status, headers, body = state.routes[path](query)
            else:
                status, headers, body = 404, {}, {"errors": ["not found"]}
            payload = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if state.cut_first and len(state.seen) == 1:
                    self.wfile.write(payload[:10])
                    self.wfile.flush()
                    if state.cut_first == "stall":
                        state.retried.wait(30)  # released by the client's retry, as hold_first
                    return
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (timeout test)
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def test_429_is_retried_honouring_retry_after(stub: Stub) -> None:
    stub.script = [(429, {"Retry-After": "7"}, {"errors": ["Too many requests"]})]
    sleeps: list[float] = []
    result = ok(make_registry(stub.url, "k", sleeps).call("redmine:getIssue", {"issueId": 1}))
    assert result.item is not None and result.item["title"] == "#1 在庫同期が遅延する"
    assert sleeps == [7.0]


def test_a_retry_after_date_is_read_on_the_runs_clock(stub: Stub) -> None:
    """``Retry-After`` as an HTTP date: the wait is that date less the run's wall clock, not the machine's."""
    from email.utils import formatdate

    from tests.fakes.clock import EPOCH
    stub.script = [(429, {"Retry-After": formatdate(EPOCH + 9, usegmt=True)}, {"errors": ["Too many requests"]})]
    sleeps: list[float] = []
    result = ok(make_registry(stub.url, "k", sleeps).call("redmine:getIssue", {"issueId": 1}))
    assert result.item is not None and sleeps == [9.0]


@pytest.mark.parametrize("value", ["soon", "Mon, 99 Foo 2025 99:99:99 GMT", "1e999x"])
def test_an_unreadable_retry_after_is_retried_with_backoff(stub: Stub, value: str) -> None:
    stub.script = [(429, {"Retry-After": value}, {"errors": ["Too many requests"]})]
    sleeps: list[float] = []
    result = ok(make_registry(stub.url, "k", sleeps).call("redmine:getIssue", {"issueId": 1}))
    assert result.item is not None and len(sleeps) == 1 and 0 < sleeps[0] <= 2


def test_retries_stop_at_the_tool_calls_deadline(stub: Stub) -> None:
    """One budget per tool call (HELPBOT_TOOL_BUDGET_S), not one per request; a wait that does not fit is not
    shortened into an early retry."""
    stub.script = [(503, {"Retry-After": "20"}, {})] * 10
    clock = FakeClock(start=1000.0)
    registry = Registry(env={"REDMINE_URL": stub.url, "REDMINE_API_KEY": "k", "HELPBOT_TOOL_BUDGET_S": "30",
                             "HELPBOT_REDMINE_RETRY_BUDGET": "600"},
                        platforms={"redmine": redmine.PLATFORM}, clock=clock)
    result = registry.call("redmine:getIssue", {"issueId": 1})
    assert result.is_error and "left for this call" in (result.message or ""), result.message
    assert clock.sleeps == [20.0]  # 20 s fit in 30; the next 20 s would not (10 s left): stop, do not retry early


def test_a_long_retry_after_is_reported_not_sat_out(stub: Stub) -> None:
    stub.script = [(429, {"Retry-After": "3600"}, {})]
    sleeps: list[float] = []
    result = make_registry(stub.url, "k", sleeps).call("redmine:getIssue", {"issueId": 1})
    assert result.is_error and "3600 s" in (result.message or "") and sleeps == []


def test_503_is_retried_then_given_up(stub: Stub) -> None:
    stub.script = [(503, {}, {})]
    sleeps: list[float] = []
    assert ok(make_registry(stub.url, "k", sleeps).call("redmine:getIssue", {"issueId": 1}))
    assert len(sleeps) == 1 and 0 < sleeps[0] <= 2  # exponential backoff with jitter, nothing asked

    stub.script = [(503, {}, {})] * 10
    stub.seen.clear()
    sleeps.clear()
    result = make_registry(stub.url, "k", sleeps).call("redmine:getIssue", {"issueId": 1})
    assert result.is_error and "HTTP 503" in (result.message or "")
    assert len(stub.seen) == 4 and len(sleeps) == 3


def test_timeout_is_retried(stub: Stub) -> None:
    # The stub never answers the first request in time: it waits for the retry, so the client's own timeout is
    # the only clock in play (no server delay racing it), and the backoff sleep is recorded, not slept.
    stub.hold_first = True
    sleeps: list[float] = []
    registry = make_registry(stub.url, "k", sleeps, HELPBOT_REDMINE_TIMEOUT="1")  # the retry has its whole second
    assert ok(registry.call("redmine:getIssue", {"issueId": 1}))
    assert len(sleeps) == 1 and stub.retried.is_set()


@pytest.mark.parametrize("how", ["stall", "cut"])
def test_an_answer_that_stalls_or_is_cut_off_after_its_headers_is_retried(stub: Stub, how: str) -> None:
    """The response hook reads the body, so a read timeout or a connection cut off in it is urllib3's own error
    (ReadTimeoutError, ProtocolError), which requests turned into its own when it read (ConnectionError: a stall was
    retried): either became an error result, never retried."""
    stub.cut_first = how
    sleeps: list[float] = []
    registry = make_registry(stub.url, "k", sleeps, HELPBOT_REDMINE_TIMEOUT="1")
    assert ok(registry.call("redmine:getIssue", {"issueId": 1}))
    assert len(sleeps) == 1 and stub.retried.is_set()


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_answer_over_the_bound_is_an_error_result(stub: Stub, gzipped: bool) -> None:
    """REDMINE_URL on a file server, or a gzip bomb: at most 8 MB (decoded) is read, then the call says so."""
    body, headers = flood(gzipped=gzipped)
    stub.routes["/issues/1.json"] = lambda q: (200, headers, body)
    sleeps: list[float] = []
    result = make_registry(stub.url, "k", sleeps).call("redmine:getIssue", {"issueId": 1})
    assert result.is_error and "Redmine sent an answer of more than 8 MB" in (result.message or "")
    assert sleeps == []


def test_a_gzipped_answer_reads_as_it_is(stub: Stub) -> None:
    packed = gzip.compress(json.dumps(ISSUE).encode())
    stub.routes["/issues/1.json"] = lambda q: (200, {"Content-Encoding": "gzip"}, packed)
    result = ok(make_registry(stub.url, "k").call("redmine:getIssue", {"issueId": 1}))
    assert result.item is not None and result.item["title"] == "#1 在庫同期が遅延する"


def test_401_names_the_variable(stub: Stub) -> None:
    stub.routes["/users/current.json"] = lambda q: (401, {}, {})
    result = make_registry(stub.url, "k").call("redmine:getIssue", {"issueId": 1})
    assert result.is_error and "REDMINE_API_KEY" in (result.message or "")
    assert result.kind == "credentials"  # the CLI turns it into one line and exit 2


def test_search_drops_hits_of_other_projects_even_when_redmine_returns_them(stub: Stub) -> None:
    """Defence in depth: the search is scoped to allowed projects, and each hit is checked again."""
    hits = {"results": [
        {"id": 1, "title": "Bug #1 (New): 在庫同期が遅延する", "type": "issue", "url": f"{stub.url}/issues/1",
         "description": "在庫", "datetime": "2026-11-30T10:51:03Z"},
        {"id": 7, "title": "Feature #7 (New): 在庫管理ツール", "type": "issue", "url": f"{stub.url}/issues/7",
         "description": "在庫", "datetime": "2026-11-30T10:51:03Z"},
        {"id": 2, "title": "Wiki: 在庫ツール契約", "type": "wiki-page", "description": "在庫",
         "url": f"{stub.url}/projects/internal-hr/wiki/%E5%9C%A8%E5%BA%AB", "datetime": "2026-11-30T10:51:03Z"},
    ], "total_count": 3, "offset": 0, "limit": 10}
    other = {"id": 7, "project": {"id": 3, "name": "社内総務"}, "subject": "在庫管理ツール",
             "status": {"id": 1, "name": "New", "is_closed": False}}
    stub.routes["/projects/ec-sync/search.json"] = lambda q: (200, {}, hits)
    stub.routes["/issues.json"] = lambda q: (200, {}, {
        "issues": [ISSUE["issue"], other], "total_count": 2, "offset": 0, "limit": 2})
    result = ok(make_registry(stub.url, "k", HELPBOT_REDMINE_PROJECTS="ec-sync")
                .call("redmine:search", {"query": "在庫"}))
    assert [item["url"] for item in result.items] == [f"{stub.url}/issues/1"]
    assert result.notes == [] and result.total == 1  # dropped without a trace


def search_hits(stub: Stub, ids: list[int]) -> dict[str, Any]:
    return {"results": [{"id": n, "title": f"Bug #{n} (New): 暗証番号 4711", "type": "issue",
                         "url": f"{stub.url}/issues/{n}", "description": "暗証番号 4711",
                         "datetime": "2026-11-30T10:51:03Z"} for n in ids],
            "total_count": len(ids), "offset": 0, "limit": 10}


@pytest.mark.parametrize("allowlist", [{}, {"HELPBOT_REDMINE_PROJECTS": "ec-sync"}])
@pytest.mark.parametrize("hidden", [1, 3, 30])
def test_search_whose_only_hits_are_hidden_is_a_search_without_hits(stub: Stub, allowlist: dict[str, str],
                                                                    hidden: int) -> None:
    """Private issues (and, with an allowlist, other projects' issues): whole results compared with no hits."""
    private = [{**ISSUE["issue"], "id": 100 + n, "is_private": True} for n in range(hidden)]
    foreign = [{**ISSUE["issue"], "id": 200 + n, "project": {"id": 3, "name": "社内総務"}} for n in range(hidden)]
    shown = private + (foreign if allowlist else [])
    ids = [issue["id"] for issue in shown]

    def search(q: str) -> Reply:
        return 200, {}, search_hits(stub, ids if "4711" in unquote_plus(q) else [])

    stub.routes["/search.json"] = stub.routes["/projects/ec-sync/search.json"] = search
    stub.routes["/issues.json"] = lambda q: (200, {}, {"issues": shown, "total_count": len(shown), "offset": 0,
                                                       "limit": len(shown)})
    registry = make_registry(stub.url, "k", **allowlist)
    only_hidden = registry.call("redmine:search", {"query": "暗証番号 4711"})
    nothing = registry.call("redmine:search", {"query": "暗証番号 4712"})
    assert only_hidden.to_dict() == nothing.to_dict() == {"status": "ok", "tool": "redmine_search", "total": 0}
    listed = registry.call("redmine:getIssues", {"query": "暗証番号"})
    stub.routes["/issues.json"] = lambda q: (200, {}, {"issues": [], "total_count": 0, "offset": 0, "limit": 0})
    assert listed.to_dict() == registry.call("redmine:getIssues", {"query": "暗証番号"}).to_dict()


def test_a_private_issue_reads_like_a_missing_one(stub: Stub) -> None:
    stub.routes["/issues/8.json"] = lambda q: (200, {}, {"issue": {**ISSUE["issue"], "id": 8, "is_private": True}})
    stub.routes["/issues/9.json"] = lambda q: (200, {}, {"issue": {
        **ISSUE["issue"], "id": 9, "project": {"id": 3, "name": "社内総務"}}})
    registry = make_registry(stub.url, "k", HELPBOT_REDMINE_PROJECTS="ec-sync")
    for number in (8, 9):
        refused = registry.call("redmine:getIssue", {"issueId": number})
        missing = registry.call("redmine:getIssue", {"issueId": number + 1000})
        assert refused.is_error and refused.to_dict() == {
            **missing.to_dict(), "message": (missing.message or "").replace(f"#{number + 1000}", f"#{number}")}
        assert "private" not in refused.to_json() and "総務" not in refused.to_json()


def test_private_notes_and_hidden_relations_leave_no_note(stub: Stub) -> None:
    journals = [*ISSUE["issue"]["journals"], {"id": 2, "user": {"id": 5, "name": "太郎 田中"}, "notes": "極秘メモ",
                                              "created_on": "2026-11-30T10:51:03Z", "private_notes": True}]
    stub.routes["/issues/1.json"] = lambda q: (200, {}, {"issue": {
        **ISSUE["issue"], "journals": journals, "relations": [
            {"id": 1, "issue_id": 1, "issue_to_id": 8, "relation_type": "relates"}]}})
    stub.routes["/issues.json"] = lambda q: (200, {}, {"issues": [{**ISSUE["issue"], "id": 8, "is_private": True}],
                                                       "total_count": 1, "offset": 0, "limit": 1})
    with_hidden = make_registry(stub.url, "k").call("redmine:getIssue", {"issueId": 1})
    stub.routes["/issues/1.json"] = lambda q: (200, {}, ISSUE)
    plain_issue = make_registry(stub.url, "k").call("redmine:getIssue", {"issueId": 1})
    assert with_hidden.to_dict() == plain_issue.to_dict()


def test_a_secret_at_the_edge_of_a_search_snippet_is_masked_whole(stub: Stub) -> None:
    token = "ghp_" + "Qx7" * 12
    description = "在庫 " + "a" * 291 + " " + token + " tail"  # the 300-character snippet ends 5 characters in
    hits = {"results": [{"id": 1, "title": "Bug #1 (New): 在庫同期が遅延する", "type": "issue",
                         "url": f"{stub.url}/issues/1", "description": description,
                         "datetime": "2026-11-30T10:51:03Z"}], "total_count": 1, "offset": 0, "limit": 10}
    stub.routes["/search.json"] = lambda q: (200, {}, hits)
    stub.routes["/issues.json"] = lambda q: (200, {}, {"issues": [ISSUE["issue"]], "total_count": 1, "offset": 0,
                                                       "limit": 1})
    result = ok(make_registry(stub.url, "k").call("redmine:search", {"query": "在庫"}))
    assert result.items and "ghp_" not in result.to_json() and "Qx7" not in result.to_json()


def test_a_private_note_between_public_ones_reads_like_none(stub: Stub) -> None:
    """The stub's version of the real twin test: Redmine's journals with a private note in the middle."""
    first, = ISSUE["issue"]["journals"]
    second = {**first, "id": 3, "notes": "二つ目", "created_on": "2026-11-30T11:00:00Z"}
    hidden = {**first, "id": 2, "notes": "極秘メモ", "private_notes": True}
    results = []
    for journals in ([first, hidden, second], [first, second]):
        stub.routes["/issues/1.json"] = lambda q, j=journals: (200, {}, {"issue": {**ISSUE["issue"], "journals": j}})
        results.append(make_registry(stub.url, "k").call("redmine:getIssue", {"issueId": 1}).to_dict())
    assert results[0] == results[1] and "note-" not in json.dumps(results[0])


def test_a_public_issue_found_only_through_a_private_note_is_no_hit(stub: Stub) -> None:
    """Redmine searches the private notes the key may read: a public issue found only there would answer
    "is this word in a private note?" -- one word, then the next, read out. It reads like no hit."""
    journals = [*ISSUE["issue"]["journals"], {"id": 2, "user": {"id": 1, "name": "Redmine Admin"},
                                              "notes": "極秘メモ 暗証番号 4711", "private_notes": True,
                                              "created_on": "2026-11-30T10:51:03Z"}]
    stub.routes["/issues/1.json"] = lambda q: (200, {}, {"issue": {**ISSUE["issue"], "journals": journals}})
    stub.routes["/issues.json"] = lambda q: (200, {}, {"issues": [ISSUE["issue"]], "total_count": 1, "offset": 0,
                                                       "limit": 1})
    stub.routes["/search.json"] = lambda q: (200, {}, search_hits(stub, [1] if "4711" in unquote_plus(q)
                                                                  or "確認" in unquote_plus(q) else []))
    registry = make_registry(stub.url, "k")
    probed = registry.call("redmine:search", {"query": "暗証番号 4711"})
    nothing = registry.call("redmine:search", {"query": "暗証番号 9999"})
    assert probed.to_dict() == nothing.to_dict() == {"status": "ok", "tool": "redmine_search", "total": 0}
    public_note = ok(registry.call("redmine:search", {"query": "確認しました"}))  # in the public comment: kept
    assert [item["issueId"] for item in public_note.items] == [1]


def test_a_later_private_note_does_not_show_in_updated_on(stub: Stub) -> None:
    """Redmine sets updated_on when any journal is saved, a private note too: an issue whose newest entry is a
    private note reads "updated after its last public comment" -- the note's existence and time."""
    first, = ISSUE["issue"]["journals"]
    hidden = {**first, "id": 2, "notes": "極秘メモ", "private_notes": True, "created_on": "2026-12-01T09:00:00Z"}
    results = []
    for journals, updated in (([first, hidden], hidden["created_on"]), ([first], first["created_on"])):
        issue = {**ISSUE["issue"], "journals": journals, "updated_on": updated}
        stub.routes["/issues/1.json"] = lambda q, i=issue: (200, {}, {"issue": i})
        results.append(make_registry(stub.url, "k").call("redmine:getIssue", {"issueId": 1}).to_dict())
    assert results[0] == results[1]


def test_a_hits_snippet_costs_its_text_not_its_text_times_the_query_words() -> None:
    """A 1 MB description and a query of 4000 words: the description was lowered and searched again for every
    word (5 s per hit, 100 hits a search); the snippet looks for the first five words, as Redmine searches."""
    from types import SimpleNamespace

    from mcp_lib.platforms.redmine import _hit

    session: Any = SimpleNamespace(config=SimpleNamespace(projects=()))
    hit = {"type": "changeset", "title": "r1", "url": "https://redmine.example/x", "description": "あ" * 1_000_000}
    item = _hit(session, hit, " ".join(f"w{i}" for i in range(4000)) + " あ", {})
    assert item is not None and item["snippet"].startswith("あ")
    assert _hit(session, {**hit, "description": "x" * 500 + " 在庫 y"}, "在庫", {})["snippet"].startswith("…")
