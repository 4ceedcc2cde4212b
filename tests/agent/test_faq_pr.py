"""``helpbot faq-draft --pr``'s writes to GitHub: a pull request's title and body notify nobody; an existing path is
updated with its sha, refs are encoded, and a failed step leaves no branch behind."""

from __future__ import annotations

import base64
import json
import re

import httpx2
import pytest

from agent import guard
from agent.errors import ConfigError, RunFailed
from agent.faq_pr import PrConfig, PullRequestWriter, make_client
from tests.fakes.clock import FakeClock
from tests.fakes.github import FakeGitHub, TokenKind, blob_sha, respond, server_error

REPO = "acme/helpdesk"
# GitHub's mention filter: @ after anything but an ASCII word character, then a login or org/team
GITHUB_MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9][A-Za-z0-9_-]*)?")


def test_mentions_in_the_title_and_body_are_defused() -> None:
    hub = FakeGitHub()
    hub.add_repo(REPO)
    config = PrConfig(REPO, hub.token, "https://api.github.com", "faq")
    body = ("質問: @octocat さんと @acme/ops-team に聞いた件。担当@suzuki-h (cc:@Hubot) `@in-code` "
            "メール a.b@example.com\n- @x")
    with guard.installed(guard.Guard.from_env({})), make_client(config, hub.transport()) as client:
        PullRequestWriter(config, client, FakeClock()).open("helpbot/x", {"a.md": "本文 @octocat"},
                                                                "FAQ drafts for @octocat", body)
    pull = hub.repos[REPO].pulls[1]
    for text in (pull["title"], pull["body"]):
        assert not GITHUB_MENTION.search(text), text
    assert pull["title"] == "FAQ drafts for ＠octocat"
    assert "＠octocat さんと ＠acme/ops-team" in pull["body"] and "担当＠suzuki-h" in pull["body"]
    assert "[email]" in pull["body"]  # masked as well


def test_a_draft_file_is_guarded_before_it_is_encoded() -> None:
    """The file's content goes base64-encoded, which no door can read: it is guarded before the encoding."""
    hub = FakeGitHub()
    hub.add_repo(REPO)
    config = PrConfig(REPO, hub.token, "https://api.github.com", "faq")
    with guard.installed(guard.Guard.from_env({})), make_client(config, hub.transport()) as client:
        PullRequestWriter(config, client, FakeClock()).open(
            "helpbot/y", {"b.md": "連絡は taro@example.com、トークン xoxb-1234567890-abcdefghij"}, "t", "b")
    written = hub.repos[REPO].files["helpbot/y"]["faq/b.md"].decode()
    assert "taro@example.com" not in written and "xoxb-1234567890" not in written


def test_an_at_sign_written_as_a_character_reference_is_no_mention() -> None:
    """GitHub's renderer turns ``&#64;``, ``&#x40;`` and ``&commat;`` into @ before it looks for mentions."""
    text = guard.Guard.from_env({}).github("cc &#64;octocat &#x40;acme/ops &#X0040;hubot &commat;monalisa a&#64;b")
    assert text == "cc ＠octocat ＠acme/ops ＠hubot ＠monalisa a&#64;b"


# -- the HTTP steps: permission, sha, encoding, and nothing left behind ------------------------------------------
def _open(hub: FakeGitHub, files: dict[str, str], branch: str = "helpbot/x") -> str:
    config = PrConfig(REPO, hub.token, "https://api.github.com", "faq")
    with guard.installed(guard.Guard.from_env({})), make_client(config, hub.transport()) as client:
        return PullRequestWriter(config, client, FakeClock()).open(branch, files, "FAQ drafts", "body")


def test_an_existing_path_is_updated_with_its_blob_sha() -> None:
    """The contents API updates a path only with the sha of the blob it replaces (422 without it)."""
    hub = FakeGitHub()
    hub.add_repo(REPO)
    hub.add_file(REPO, "faq/a.md", "old entry\n")
    url = _open(hub, {"a.md": "new entry\n", "b.md": "another\n"})
    assert url.endswith("/pull/1")
    puts = {r.url.path.rsplit("/", 1)[-1]: json.loads(r.content) for r in hub.requests if r.method == "PUT"}
    assert puts["a.md"]["sha"] == blob_sha(b"old entry\n") and "sha" not in puts["b.md"]
    files = hub.repos[REPO].files
    assert files["helpbot/x"]["faq/a.md"] == b"new entry\n" and files["main"]["faq/a.md"] == b"old entry\n"
    writes = [i for i, r in enumerate(hub.requests) if r.method != "GET"]
    reads = [i for i, r in enumerate(hub.requests) if r.method == "GET"]
    assert max(reads) < min(writes)  # every sha read before anything is written


def test_a_folder_where_a_draft_should_go_is_refused_before_writing() -> None:
    hub = FakeGitHub()
    hub.add_repo(REPO)
    hub.add_file(REPO, "faq/a.md/inner.md", "x")
    with pytest.raises(RunFailed, match=r"faq/a.md in acme/helpdesk is not a file"):
        _open(hub, {"a.md": "entry"})
    assert {r.method for r in hub.requests} == {"GET"}


def test_branch_names_are_url_encoded_in_the_paths() -> None:
    """A ref is a path parameter (GitHub's OpenAPI ``git-ref-only``, ``x-multi-segment``): a '#' unencoded
    would end the path; ours and the default branch's are percent-encoded, slashes kept."""
    hub = FakeGitHub()
    hub.add_repo(REPO, default_branch="release#1")
    hub.repos[REPO].can_open_pulls = False  # so the branch is deleted as well
    with pytest.raises(ConfigError):
        _open(hub, {"a.md": "entry"}, branch="helpbot/drafts#2")
    raw = [(r.method, r.url.raw_path.decode()) for r in hub.requests]
    assert ("GET", f"/repos/{REPO}/git/ref/heads/release%231") in raw
    assert ("DELETE", f"/repos/{REPO}/git/refs/heads/helpbot/drafts%232") in raw
    assert set(hub.repos[REPO].files) == {"release#1"}


@pytest.mark.parametrize(("kind", "message"), [("fine-grained", "by personal access token"),
                                               ("installation", "by integration")])
def test_a_refused_pull_request_deletes_the_branch_it_wrote(kind: TokenKind, message: str) -> None:
    """contents write without pull-requests write: nothing can tell beforehand, so the branch goes again."""
    hub = FakeGitHub(token_kind=kind)
    hub.add_repo(REPO)
    hub.repos[REPO].can_open_pulls = False
    with pytest.raises(ConfigError) as err:
        _open(hub, {"a.md": "entry"})
    text = str(err.value)
    assert "\n" not in text and f"Resource not accessible {message}" in text and "pull-requests: write" in text
    assert text.endswith("the branch helpbot/x it created was deleted again: nothing is left in acme/helpdesk")
    assert set(hub.repos[REPO].files) == {"main"} and not hub.repos[REPO].pulls
    assert hub.requests[-1].method == "DELETE"


def test_an_installation_token_reports_no_permissions_and_goes_on() -> None:
    """GITHUB_TOKEN's repository answer has no ``permissions``: no refusal before writing."""
    hub = FakeGitHub(token_kind="installation")
    hub.add_repo(REPO)
    assert _open(hub, {"a.md": "entry"}).endswith("/pull/1")


def test_a_later_failed_write_deletes_the_branch_and_keeps_its_exit_code() -> None:
    hub = FakeGitHub()
    hub.add_repo(REPO)
    hub.script("PUT", r"/contents/faq/b\.md$", *[server_error(502) for _ in range(10)])
    with pytest.raises(RunFailed, match=r"unavailable after retries.*; the branch helpbot/x it created was "
                                         r"deleted again") as err:
        _open(hub, {"a.md": "entry", "b.md": "entry 2"})
    assert type(err.value) is RunFailed and set(hub.repos[REPO].files) == {"main"}


def test_a_branch_that_cannot_be_deleted_is_named() -> None:
    hub = FakeGitHub()
    hub.add_repo(REPO)
    hub.repos[REPO].can_open_pulls = False
    hub.script("DELETE", r"/git/refs/heads/", respond(403, {"message": "Resource not accessible by integration"}))
    with pytest.raises(ConfigError, match=r"the branch helpbot/x it created could not be deleted \(.*HTTP 403.*\): "
                                          r"delete it by hand$"):
        _open(hub, {"a.md": "entry"})


def test_a_branch_that_already_exists_is_not_ours_to_delete() -> None:
    hub = FakeGitHub()
    hub.add_repo(REPO)
    hub.add_file(REPO, "faq/kept.md", "someone's work", ref="helpbot/x")
    hub.repos[REPO].commits["helpbot/x"] = "f" * 40
    with pytest.raises(RunFailed, match="Reference already exists"):
        _open(hub, {"a.md": "entry"})
    assert "DELETE" not in {r.method for r in hub.requests} and "helpbot/x" in hub.repos[REPO].files


def test_the_fake_refuses_a_content_write_without_the_current_sha() -> None:
    """docs.github.com/rest/repos/contents#create-or-update-file-contents: 422 without sha, 409 for a stale one."""
    hub = FakeGitHub()
    hub.add_repo(REPO)
    hub.add_file(REPO, "faq/a.md", "old")
    client = httpx2.Client(transport=hub.transport(), base_url="https://api.github.com",
                          headers={"Authorization": f"Bearer {hub.token}"})
    body = {"message": "m", "content": base64.b64encode(b"new").decode()}
    path = f"/repos/{REPO}/contents/faq/a.md"
    missing = client.put(path, json=body)
    assert missing.status_code == 422 and "\"sha\" wasn't supplied" in missing.json()["message"]
    assert client.put(path, json={**body, "sha": "0" * 40}).status_code == 409
    current = client.get(path).json()["sha"]
    assert client.put(path, json={**body, "sha": current}).status_code == 200
    assert client.put(f"/repos/{REPO}/contents/faq/new.md", json=body).status_code == 201
