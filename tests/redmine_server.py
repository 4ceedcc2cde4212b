"""Start a real Redmine 5 (the Debian packages installed by .ci/redmine.sh) on loopback for the tests.

Each start works on a fresh copy of the packaged SQLite database (migrated, default trackers and statuses),
so runs never see each other's data and the system database is left untouched. The copy may hold whatever
someone put into that installation: the seed first deletes every project (with its issues and wikis) and every
user but admin, so the tests see their own data only. ``start(foreign_data=True)`` (the tests' fixture) first
adds another team's project, issue and a clashing user, so that this deletion is exercised on every run.
One ``rails runner`` enables REST, reads the admin's API key and seeds the data below; then the web server
boots. It is stopped by the process group id we started, never by name.

    server = start()            # RedmineUnavailable(reason) when it cannot be started
    ... server.url, server.api_key, server.ids["stock_sync"] ...
    server.stop()

Seeding and booting share one bound, ``HELPBOT_REDMINE_START_TIMEOUT`` (default 300 s: a start took 74 s at load 9
on 2 cores, and a CI machine can be busier); the log and the first answer are looked at once a second, never in a
sub-second spin. Under CI (:func:`required`) a Redmine that cannot start fails the tests that need it: a skipped
platform would be a hole in CI.

Run it by hand to poke at the data: ``uv run python -m tests.redmine_server`` (Ctrl-C stops it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

REDMINE_DIR = Path(os.environ.get("HELPBOT_REDMINE_DIR", "/usr/share/redmine"))
DATABASE_YML = REDMINE_DIR / "config" / "database.yml"
START_TIMEOUT_S = float(os.environ.get("HELPBOT_REDMINE_START_TIMEOUT", "300"))
POLL_S = 1.0  # between two looks at the log or two readiness requests

T = TypeVar("T")

LONG_NOTE = "在庫ログの調査結果です。" + "倉庫Aと倉庫Bの差分を確認しました。" * 200  # ~3,400 characters

# Ruby, run by `bin/rails runner`: everything the tests rely on, created the way Redmine itself would.
SEED_RB = r"""
require "json"
if ENV["HELPBOT_SEED_FOREIGN"] == "1"
  # what a used installation may hold: another team's project with a 在庫 issue and wiki page, a user "tanaka"
  other = Project.create!(name: "他チーム", identifier: "foreign-team", is_public: true)
  other.trackers = Tracker.all
  other.enabled_module_names = %w[issue_tracking wiki]
  other.save!
  Issue.create!(project: other, tracker: Tracker.first, author: User.find_by_login("admin"),
                priority: IssuePriority.default || IssuePriority.first,
                subject: "在庫同期が遅延する（他チーム）", description: "他チームの在庫の件")
  User.create!(login: "tanaka", firstname: "他", lastname: "チーム", mail: "tanaka@foreign.test",
               password: "foreign-pass-1", status: User::STATUS_ACTIVE)
end
# Start from no data but the defaults: whatever the packaged database holds is not ours.
removed = {"projects" => Project.count, "issues" => Issue.count,
           "users" => User.where(type: "User").where.not(login: "admin").count}
Project.where(parent_id: nil).find_each(&:destroy)   # children, issues, wikis, journals go with them
Issue.delete_all
User.where(type: "User").where.not(login: "admin").find_each(&:destroy)

Setting.rest_api_enabled = "1"
Setting.cross_project_subtasks = "system"   # so a child can live in another project
admin = User.find_by_login("admin")
admin.update!(status: User::STATUS_ACTIVE, admin: true)
tanaka = User.create!(login: "tanaka", firstname: "太郎", lastname: "田中", mail: "tanaka@example.test",
                      password: "helpbot-tests-1", status: User::STATUS_ACTIVE)
bug = Tracker.find_by_name!("Bug")
feature = Tracker.find_by_name!("Feature")
closed = IssueStatus.find_by_name!("Closed")
priority = IssuePriority.default || IssuePriority.first

def project(name, identifier, parent = nil)
  p = Project.create!(name: name, identifier: identifier, is_public: true, parent: parent)
  p.trackers = Tracker.all
  p.enabled_module_names = %w[issue_tracking wiki]
  p.save!
  p
end

def wiki_page(project, title, text, author)
  wiki = project.wiki || Wiki.create!(project: project, start_page: title)
  page = WikiPage.new(wiki: wiki, title: title)
  page.content = WikiContent.new(page: page, text: text, author: author)
  page.save!
  page
end

# A journal the way the UI makes one: on a fresh object each time, because init_journal reuses an earlier
# journal of the same object and callbacks bump lock_version behind our back.
def note(issue, user, text, private = false)
  issue = Issue.find(issue.id)
  issue.init_journal(user, text)
  issue.private_notes = private
  issue.save!
end

ec = project("EC連携", "ec-sync")
lab = project("EC連携ラボ", "ec-lab", ec)
hr = project("社内総務", "internal-hr")
new_issue = lambda do |proj, tracker, subject, description, extra = {}|
  Issue.create!({project: proj, tracker: tracker, author: admin, priority: priority,
                 subject: subject, description: description}.merge(extra))
end

ids = {}
stock = new_issue.call(ec, bug, "在庫同期が遅延する",
  "Shopify と楽天の在庫同期が30分以上遅れることがある。夜間バッチの後に発生。")
ids["stock_sync"] = stock.id
[[tanaka, "夜間バッチのログを確認しました。在庫APIがタイムアウトしています。"],
 [admin, "Retry-After を守るように修正します。"],
 [tanaka, "修正版をステージングで確認中です。"]].each { |user, text| note(stock, user, text) }
note(stock, admin, "社外秘: 取引先Xの在庫は手動で調整済み", true)
Attachment.create!(container: stock, filename: "inventory_log.csv", disk_filename: "0000_inventory_log.csv",
                   filesize: 2048, content_type: "text/csv", digest: "0" * 64, author: tanaka)

order = new_issue.call(ec, bug, "Order import fails with 429 from Shopify API",
  "The hourly order import stops when Shopify answers 429 Too Many Requests.", status: closed)
ids["order_import"] = order.id
note(order, admin, "Fixed by honouring the Retry-After header; see the 在庫 sync fix as well.")

parent = new_issue.call(ec, feature, "楽天 API v2 移行", "楽天の新しい API へ移行する親チケット。")
ids["parent"] = parent.id
child = new_issue.call(ec, feature, "楽天 在庫API の切り替え", "在庫APIを v2 に切り替える。",
                       parent_issue_id: parent.id)
ids["child"] = child.id
IssueRelation.create!(issue_from: Issue.find(stock.id), issue_to: Issue.find(order.id), relation_type: "relates")

long = new_issue.call(ec, bug, "Long discussion about stock reservations", "Inventory reservation design.")
ids["long"] = long.id
(1..8).each do |n|
  note(long, n.odd? ? admin : tanaka, n == 8 ? ENV.fetch("HELPBOT_SEED_LONG_NOTE") : "journal note number #{n}")
end

lab_issue = new_issue.call(lab, bug, "在庫引当の実験", "サブプロジェクトの在庫実験。")
ids["lab"] = lab_issue.id
hr_issue = new_issue.call(hr, feature, "在庫管理ツールのライセンス更新", "総務の在庫管理ツールの契約更新。")
ids["hr"] = hr_issue.id
note(hr_issue, admin, "在庫管理ツールの見積もりを依頼しました。")
# a child in another project: its subject must not leak through the allowlist
hr_child = new_issue.call(hr, feature, "総務側の在庫ツール設定", "", parent_issue_id: parent.id)
ids["hr_child"] = hr_child.id

# a private issue (admin's key can read it; the answer's readers may not): a child of the parent, related to
# the stock issue, with 在庫 in its subject, so every tool would meet it
secret = new_issue.call(ec, bug, "在庫の非公開チケット", "極秘：取引先Yの在庫調整メモ", is_private: true,
                        parent_issue_id: parent.id)
ids["private"] = secret.id
IssueRelation.create!(issue_from: Issue.find(stock.id), issue_to: Issue.find(secret.id), relation_type: "relates")

# twins that differ only by a private note between two public ones: the tools must not tell them apart
[["note_gap", true], ["note_twin", false]].each do |key, with_private|
  twin = new_issue.call(ec, bug, "コメント番号の確認", "番号の確認用チケット。")
  ids[key] = twin.id
  note(twin, tanaka, "一つ目の公開コメント")
  note(twin, admin, "社外秘: 間の非公開コメント", true) if with_private
  note(twin, admin, "二つ目の公開コメント")
end

wiki_page(ec, "在庫同期の手順",
          "h1. 在庫同期の手順\n\n在庫同期は15分ごとに走る。遅延したら夜間バッチを確認する。", admin)
wiki_page(hr, "在庫ツール契約", "総務の在庫ツール契約の一覧。", admin)
# a redirect in ec-sync's wiki to a page that lives in internal-hr (what moving a page to another project leaves)
WikiRedirect.create!(wiki: Wiki.find_by!(project_id: ec.id), title: "契約一覧", redirects_to: "在庫ツール契約",
                     redirects_to_wiki_id: Wiki.find_by!(project_id: hr.id).id)

puts "HELPBOT_SEED " + JSON.generate(api_key: admin.api_key, ids: ids, removed: removed)
"""


class RedmineUnavailable(Exception):
    """Redmine is not installed here or could not be started; the message says why."""


def required(env: Mapping[str, str] = os.environ) -> bool:
    """True under CI (``CI`` set to true, 1 or yes, in any case, as CI services set it): the real-Redmine tests
    must run there, so a Redmine that cannot start is a failure, never a skip."""
    return env.get("CI", "").strip().lower() in {"true", "1", "yes"}


def poll(check: Callable[[], T | None], deadline: float, failed: str, *, detail: Callable[[], str] = lambda: "",
         clock: Callable[[], float] | None = None, sleep: Callable[[float], None] = time.sleep,
         interval_s: float = POLL_S) -> T:
    """``check()`` until it returns something, ``interval_s`` apart, up to ``deadline`` (a ``clock()`` value);
    then RedmineUnavailable: ``failed``, the bound, and ``detail()``. ``check`` may raise RedmineUnavailable to
    stop at once. The clock is ``time.monotonic`` as of the call (the suite's, see tests/conftest.py)."""
    clock = clock or time.monotonic
    while True:
        value = check()
        if value is not None:
            return value
        left = deadline - clock()
        if left <= 0:
            raise RedmineUnavailable(f"{failed} within {START_TIMEOUT_S:.0f} s (HELPBOT_REDMINE_START_TIMEOUT)"
                                     f"{detail()}")
        sleep(min(interval_s, left))


@dataclass
class RedmineServer:
    url: str
    api_key: str
    ids: dict[str, int]
    workdir: Path
    removed: dict[str, int] = field(default_factory=dict)  # what the seed found and deleted first
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    seconds_to_start: float = 0.0

    def stop(self) -> None:
        """Stop the server by the process group we started (setsid), then remove the work directory."""
        if self.process is not None and self.process.poll() is None:
            _stop(self.process)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def refusing_port() -> tuple[socket.socket, int]:
    """A port where connections are refused for as long as the socket stays open: bound, never listening (so no
    other process can take it meanwhile, as it could a port found free and closed again)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock, int(sock.getsockname()[1])


_WEBRICK_PORT = re.compile(rb"WEBrick::HTTPServer#start: pid=\d+ port=(\d+)")


def _bound_port(process: subprocess.Popen[bytes], log: Path, deadline: float) -> int:
    """The port WEBrick bound (started with -p 0, it chooses a free one itself and logs it: no port race)."""

    def port() -> int | None:
        found = _WEBRICK_PORT.search(log.read_bytes()) if log.exists() else None
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            raise RedmineUnavailable(f"Redmine exited with code {process.returncode}:\n{_tail(log)}")
        return None

    return poll(port, deadline, "Redmine did not start", detail=lambda: f":\n{_tail(log)}")


def template_database() -> Path:
    """The packaged production database (already migrated, default data loaded by the package's postinst)."""
    try:
        text = DATABASE_YML.read_text()
    except OSError as exc:
        raise RedmineUnavailable(f"cannot read {DATABASE_YML} ({exc.strerror}); run `sudo bash .ci/redmine.sh`"
                                 " (and the tests as root, or with read access to it)") from None
    match = re.search(r"^production:.*?^\s+database:\s*(\S+)", text, re.S | re.M)
    if not match:
        raise RedmineUnavailable(f"no production sqlite database in {DATABASE_YML}")
    path = Path(match.group(1))
    if not os.access(path, os.R_OK):
        raise RedmineUnavailable(f"cannot read the Redmine database {path}; run the tests as root")
    return path


def check_installed() -> None:
    if not (REDMINE_DIR / "config.ru").exists():
        raise RedmineUnavailable(f"Redmine is not installed ({REDMINE_DIR} missing); run `sudo bash .ci/redmine.sh`")
    if shutil.which("rackup") is None:
        raise RedmineUnavailable("`rackup` not found; run `sudo bash .ci/redmine.sh`")
    if not (REDMINE_DIR / "Gemfile.local").exists():
        raise RedmineUnavailable("Redmine has no web server configured; run `sudo bash .ci/redmine.sh`")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _seed(env: dict[str, str], workdir: Path, foreign_data: bool, deadline: float
          ) -> tuple[str, dict[str, int], dict[str, int]]:
    script = workdir / "seed.rb"
    script.write_text(SEED_RB, encoding="utf-8")
    try:
        done = subprocess.run(["bin/rails", "runner", str(script)], cwd=REDMINE_DIR,
                              env={**env, "HELPBOT_SEED_LONG_NOTE": LONG_NOTE,
                                   "HELPBOT_SEED_FOREIGN": "1" if foreign_data else ""},
                              capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise RedmineUnavailable(f"seeding Redmine did not finish within {START_TIMEOUT_S:.0f} s "
                                 "(HELPBOT_REDMINE_START_TIMEOUT)") from None
    except OSError as exc:
        raise RedmineUnavailable(f"seeding Redmine failed: {exc}") from None
    for line in done.stdout.splitlines():
        if line.startswith("HELPBOT_SEED "):
            data = json.loads(line.removeprefix("HELPBOT_SEED "))
            return (data["api_key"], {k: int(v) for k, v in data["ids"].items()},
                    {k: int(v) for k, v in data["removed"].items()})
    detail = (done.stderr or done.stdout).strip().splitlines()[:8]  # the error, then the top of the trace
    raise RedmineUnavailable("seeding Redmine failed:\n" + "\n".join(detail))


SEED_ATTEMPTS = 3


def _seeded(env: dict[str, str], workdir: Path, template: Path, database: Path, foreign_data: bool,
            deadline: float) -> tuple[str, dict[str, int], dict[str, int]]:
    """:func:`_seed` on a fresh copy of the template, again when SQLite answered "database is locked": the seed's
    own connections can meet so on a loaded machine (seen in CI) although nothing else has the copy open."""
    for attempt in range(1, SEED_ATTEMPTS + 1):
        try:
            return _seed(env, workdir, foreign_data, deadline)
        except RedmineUnavailable as exc:
            if "database is locked" not in str(exc) or attempt == SEED_ATTEMPTS:
                raise
            shutil.copyfile(template, database)
    raise AssertionError("unreachable")


def _wait_ready(url: str, api_key: str, process: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    """The first API answer: the first request after the boot is slow on a loaded machine, so each may take up
    to 30 s (of the time left) rather than be abandoned and sent again."""
    request = urllib.request.Request(f"{url}/issues.json?limit=1", headers={"X-Redmine-API-Key": api_key})
    last = ["no answer yet"]

    def answered() -> bool | None:
        if process.poll() is not None:
            raise RedmineUnavailable(f"Redmine exited with code {process.returncode}:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(request, timeout=max(1.0, min(30.0, deadline - time.monotonic()))) as answer:
                if answer.status == 200:
                    return True
                last[0] = f"HTTP {answer.status}"
        except urllib.error.HTTPError as exc:
            last[0] = f"HTTP {exc.code}"
        except OSError as exc:
            last[0] = str(exc)
        return None

    poll(answered, deadline, "Redmine did not answer", detail=lambda: f" ({last[0]}):\n{_tail(log)}")


def start(*, foreign_data: bool = False) -> RedmineServer:
    """A seeded Redmine on 127.0.0.1 at a port it chose itself, or RedmineUnavailable with the reason. ``foreign_data``:
    put another team's data into the copy first (the seed must delete it)."""
    check_installed()
    template = template_database()
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="helpbot-redmine-"))
    database = workdir / "redmine.sqlite3"
    shutil.copyfile(template, database)
    env = {**os.environ, "RAILS_ENV": "production", "DATABASE_URL": f"sqlite3:{database}?timeout=15000"}
    server = RedmineServer(url="", api_key="", ids={}, workdir=workdir)
    try:
        # Seed before the server boots: the booting server also touches the SQLite file, and two writers
        # can fail at once with "database is locked" (seen in about 1 start of 8 when they overlapped).
        server.api_key, server.ids, server.removed = _seeded(env, workdir, template, database, foreign_data,
                                                             started + START_TIMEOUT_S)
        log = workdir / "server.log"
        with log.open("wb") as out:
            server.process = subprocess.Popen(
                ["rackup", "-s", "webrick", "-p", "0", "-o", "127.0.0.1", "config.ru"],
                cwd=REDMINE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        server.url = f"http://127.0.0.1:{_bound_port(server.process, log, started + START_TIMEOUT_S)}"
        _wait_ready(server.url, server.api_key, server.process, log, started + START_TIMEOUT_S)
    except BaseException:
        server.stop()
        raise
    server.seconds_to_start = time.monotonic() - started
    return server


if __name__ == "__main__":
    running = start()
    print(f"REDMINE_URL={running.url}\nREDMINE_API_KEY={running.api_key}\n# ids: {running.ids}"
          f"\n# started in {running.seconds_to_start:.1f} s; Ctrl-C stops it", flush=True)
    try:
        while running.process is not None and running.process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
