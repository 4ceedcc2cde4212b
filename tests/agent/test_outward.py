"""Every outward writer in ``agent/`` is a door of the egress guard: a new ``print``, file write, stream write,
Slack write or HTTP request anywhere else fails here until it goes through :mod:`agent.guard` (or is listed
below with the reason it needs no guard)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Writers outside the guard, each with why it needs none. Keyed by (file, what).
ALLOWED = {
    ("agent/slack/markers.py", "print"): "prints its own JSON (channel id and ts it validated) for the workflow; "
                                         "runs under `python -S`, without the packages the guard needs",
    ("agent/slack/relay_server.py", "wfile.write"): "the relay's HTTP reply to Slack/GitHub: a fixed acknowledgement",
    ("agent/slack/relay.py", "post"): "the relay's repository_dispatch: ids and the reaction name it validated",
    ("agent/faq_pr.py", "send"): "the FAQ pull request over mcp_lib.http: its JSON bodies pass guard.current().deep",
    ("agent/faq_draft.py", "write_text"): "a temporary file, only parsed back to validate a draft",
    ("agent/generate.py", "write_text"): "`helpbot config --write`: the repository's docs tables and workflow env, "
                                         "generated from the declaration (no run's data; a mask would make --check "
                                         "disagree with --write)",
    **{("agent/slack/post.py", method): "SlackOut._call, the front's one Slack write door: sends through "
                                       "guard.slack" for method in ("chat.postMessage", "chat.update", "chat.delete",
                                                                    "chat.postEphemeral")},
}
DOORS = "agent/guard.py"
SLACK_WRITES = ("chat_", "files_upload")
SLACK_READS = ("chat_getPermalink",)
WRITE_METHODS = ("chat.postMessage", "chat.update", "chat.delete", "chat.postEphemeral", "chat.scheduleMessage",
                 "chat.meMessage", "files.upload", "files.uploadV2")


def writers(path: Path) -> list[tuple[str, int]]:
    """(what, line) of every outward write in one module."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and node.value in WRITE_METHODS:
            found.append((str(node.value), node.lineno))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("print", "open", "send"):  # send: mcp_lib.http's request
            found.append((func.id, node.lineno))
        elif isinstance(func, ast.Attribute):
            name = func.attr
            owner = func.value.attr if isinstance(func.value, ast.Attribute) else ""
            tracing = name == "write" and (owner == "trace" or (isinstance(func.value, ast.Name)
                                                                 and func.value.id == "self"
                                                                 and path.name == "report.py"))
            if tracing:  # Trace.write: the guard's event door for the trace file (report.Trace)
                continue
            client = (isinstance(func.value, ast.Name) and func.value.id in ("client", "httpx2")) or (
                isinstance(func.value, ast.Attribute) and func.value.attr == "client")
            if name in ("write", "writelines", "write_text", "write_bytes", "print_help", "print_usage"):
                found.append((f"{owner}.{name}" if owner else name, node.lineno))
            elif (name.startswith(SLACK_WRITES) and name not in SLACK_READS) or (
                    client and name in ("post", "put", "patch", "delete", "request", "send")):
                found.append((name, node.lineno))
    return found


def outward_writers() -> dict[tuple[str, str], list[int]]:
    sites: dict[tuple[str, str], list[int]] = {}
    for path in sorted((ROOT / "agent").rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        for what, line in writers(path):
            sites.setdefault((relative, what), []).append(line)
    return sites


def test_nothing_writes_outward_except_through_the_guard() -> None:
    stray = {site: lines for site, lines in outward_writers().items() if site[0] != DOORS and site not in ALLOWED}
    assert stray == {}, "write through agent.guard (out, err, append, write_file, slack, slack_call)"


def test_the_allowlist_is_still_needed() -> None:
    """An entry whose writer went away must go too, so the list never grows a blind spot."""
    present = set(outward_writers())
    assert set(ALLOWED) <= present, set(ALLOWED) - present


def test_the_scan_sees_each_kind_of_writer(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import sys\nprint('x')\nsys.stderr.write('x')\nweb.chat_postMessage(channel='C')\n"
                      "call(ctx, 'chat.update')\nopen('f', 'w')\nPath('f').write_text('x')\n"
                      "self.client.request('POST', '/x')\nsend(ctx, 'GitHub', 'PUT', '/x')\n"
                      "web.reactions_add(name='eyes')\nweb.chat_getPermalink(channel='C')\n", encoding="utf-8")
    kinds = {what for what, _ in writers(sample)}
    assert kinds == {"print", "stderr.write", "chat_postMessage", "chat.update", "open", "write_text", "request",
                     "send"}


# Registries that start no in-house MCP server, each with why.
SILENT_REGISTRIES = {
    "agent/build.py": "check_configuration reads helpbot.toml; no server is contacted",
    "agent/slack/feedback.py": "builtin_platforms only: the platform labels",
}


def test_every_registry_that_may_start_a_server_logs_through_the_guard() -> None:
    """An in-house stdio server's stderr is an outward channel: a ``Registry`` in ``agent/`` hands its lines to
    ``guard.server_err`` (mcp_lib's default only masks: it knows neither the credentials nor a private run)."""
    unguarded = []
    for path in sorted((ROOT / "agent").rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Registry":
                logs = [k.value for k in node.keywords if k.arg == "server_log"]
                if not (logs and ast.unparse(logs[0]) == "guard.server_err"):
                    unguarded.append(relative)
    assert sorted(set(unguarded)) == sorted(SILENT_REGISTRIES), unguarded


# Python logging is an outward writer too: one handler (mcp_lib/logs.py), installed by every entry point, renders
# every record -- ours and every library's -- through the guard in effect (helpbot) or mcp_lib's Masker (mcp-lib).
ENTRY_POINTS = {("agent/cli.py", "main"): "guard.logging_installed",
                ("agent/slack/relay.py", "lambda_handler"): "guard.logging_installed",
                ("mcp_lib/cli.py", "main"): "logs.installed"}
LOGGING_DOOR = "mcp_lib/logs.py"


def test_every_entry_point_installs_the_logging_door() -> None:
    scripts = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'helpbot = "agent.cli:console"' in scripts and 'mcp-lib = "mcp_lib.cli:main"' in scripts  # all of them
    for (relative, function), door in ENTRY_POINTS.items():
        tree = ast.parse((ROOT / relative).read_text(encoding="utf-8"))
        body = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == function)
        installs = [node for node in ast.walk(body) if isinstance(node, ast.With)
                    for item in node.items if door in ast.unparse(item.context_expr)]
        assert installs, f"{relative}:{function} must run inside {door}"


def test_the_logging_doors_one_writer_is_its_handler() -> None:
    tree = ast.parse((ROOT / LOGGING_DOOR).read_text(encoding="utf-8"))
    emitting = {line for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "emit"
                for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
    assert [line for _, line in writers(ROOT / LOGGING_DOOR) if line not in emitting] == []
    assert any(line in emitting for _, line in writers(ROOT / LOGGING_DOOR))
