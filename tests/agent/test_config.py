"""The configuration declaration: every variable the code reads is declared once, and every surface follows it."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
import yaml

from agent import generate
from agent.config import DECLARED, VARIABLES, WORKFLOWS, passed_by
from mcp_lib import config as tools_config
from mcp_lib.config import env_bool, env_datetime, env_float, env_int, env_list, env_str, env_url

ROOT = Path(__file__).resolve().parents[2]
PREFIXES = ("HELPBOT_", "SLACK_", "REDMINE_", "GITHUB_", "GROWI_", "AWS_", "ANTHROPIC_")
READERS = {"env_str", "env_url", "env_int", "env_float", "env_list", "env_bool", "env_datetime", "env_timezone",
           "getenv", "get"}


def sources() -> list[Path]:
    return sorted(p for pkg in ("agent", "mcp_lib") for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)


def names_in(path: Path) -> dict[str, list[int]]:
    """Environment variable names a module reads: string constants that look like one (HELPBOT_X, SLACK_X, ...),
    and the first string argument of env readers (``env_int(env, "X", ...)``, ``os.environ.get("X")``,
    ``os.environ["X"]``), whatever its prefix. Docstrings do not count."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)}
    found: dict[str, list[int]] = {}

    def add(node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.setdefault(node.value, []).append(node.lineno)

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PREFIXES) \
                and node.value.replace("_", "").isalnum() and node.value.upper() == node.value:
            add(node)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            args = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            is_environ = isinstance(func, ast.Attribute) and "environ" in ast.unparse(func.value)
            if name.startswith("env_") and name in READERS and len(node.args) > 1:
                add(node.args[1])
            elif (name == "getenv" or (name == "get" and is_environ)) and args:
                add(args[0])
        elif isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value):
            add(node.slice)
    return found


def test_every_variable_the_code_reads_is_declared() -> None:
    # (Names taken from helpbot.toml -- an MCP server's ``env`` and ``header_env`` -- are the team's, not ours.)
    undeclared = {f"{name} ({path.relative_to(ROOT)}:{lines[0]})" for path in sources()
                  if path.name != "config.py" for name, lines in names_in(path).items() if name not in DECLARED}
    assert sorted(undeclared) == [], "declare these in agent/config.py, or mcp_lib/config.py for the tools"


def test_the_tool_library_reads_only_what_it_declares() -> None:
    # mcp_lib/doors.py names where the application's credentials go (the model's, the relay's): the one exception.
    theirs = {f"{name} ({path.relative_to(ROOT)}:{lines[0]})" for path in sources()
              if path.relative_to(ROOT).parts[0] == "mcp_lib" and path.name not in ("config.py", "doors.py")
              for name, lines in names_in(path).items() if name not in tools_config.DECLARED}
    assert sorted(theirs) == [], "declare these in mcp_lib/config.py"


def test_helpbot_passes_each_of_the_tool_librarys_variables_as_declared_there() -> None:
    ours = {v.name: v for v in VARIABLES}
    assert all(vars(v).items() <= vars(ours[v.name]).items() for v in tools_config.VARIABLES)


def test_the_scan_finds_reads_of_every_shape(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""HELPBOT_IN_A_DOCSTRING is not a read."""\nimport os\n'
                      'a = env_int(env, "HELPBOT_A", 3)\nb = os.environ.get("PLAIN_B")\nc = os.environ["C_C"]\n'
                      'd = ("SLACK_D", "GITHUB_E")\ne = os.getenv("F")\n', encoding="utf-8")
    assert set(names_in(module)) == {"HELPBOT_A", "PLAIN_B", "C_C", "SLACK_D", "GITHUB_E", "F"}


def test_every_declared_variable_is_read_somewhere() -> None:
    code = "\n".join(p.read_text(encoding="utf-8") for p in sources() if p.name != "config.py")
    unused = [v.name for v in VARIABLES if f'"{v.name}"' not in code]
    assert unused == [], "declared but never read: remove them from agent/config.py (or mcp_lib/config.py) or read them"


def _typed_reads() -> list[tuple[str, str, ast.Call, str]]:
    """Every call of a typed reader with a literal name: (reader, variable, call, file:line)."""
    found = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("env_int", "env_float", "env_bool", "env_timezone") and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant):
                found.append((node.func.id, node.args[1].value, node, f"{path.relative_to(ROOT)}:{node.lineno}"))
    return found


def _defaults(call: ast.Call) -> list[ast.expr]:
    return call.args[2:3] + [keyword.value for keyword in call.keywords if keyword.arg == "default"]


def test_no_reader_repeats_a_declared_default() -> None:
    reads = _typed_reads()
    assert len(reads) >= 30  # the scan sees the readers
    repeated = [f"{name} at {where}" for _, name, call, where in reads
                if name in DECLARED and any(isinstance(given, ast.Constant) for given in _defaults(call))]
    assert repeated == [], "let the reader take the declared default"


def test_each_number_read_without_a_default_has_one_of_its_kind_declared() -> None:
    for reader, name, call, where in _typed_reads():
        if reader in ("env_int", "env_float") and not _defaults(call):
            assert (int if reader == "env_int" else float)(DECLARED[name].default) is not None, where


def test_no_module_repeats_a_declared_url_path_or_id() -> None:
    values = {v.default: v.name for v in VARIABLES if ("/" in v.default or "." in v.default)
              and not set(v.default) & set(" {")}
    assert "https://api.github.com" in values and "Asia/Tokyo" in values
    repeated = [f"{values[node.value]} in {path.relative_to(ROOT)}:{node.lineno}" for path in sources()
                if path.name != "config.py" for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values]
    assert repeated == [], "read the declared default (DECLARED[name].default)"


def test_unset_reads_as_the_declared_default_and_each_package_reads_with_its_own_declaration() -> None:
    from agent import config as helpbot_config

    assert env_float({"HELPBOT_HTTP_TIMEOUT_S": " "}, "HELPBOT_HTTP_TIMEOUT_S") == float(
        tools_config.DECLARED["HELPBOT_HTTP_TIMEOUT_S"].default)
    assert helpbot_config.env_bool({}, "HELPBOT_MASK_PERSONAL") is True
    assert helpbot_config.env_int({}, "HELPBOT_TOOL_MAX_ITEMS") == env_int({}, "HELPBOT_TOOL_MAX_ITEMS")
    with pytest.raises(KeyError):  # the tool library knows nothing of helpbot's own variables
        env_bool({}, "HELPBOT_MASK_PERSONAL")
    with pytest.raises(ValueError):  # declared, but with no number to fall back on
        helpbot_config.env_float({}, "HELPBOT_PRICE_INPUT")


def test_a_bad_time_zone_is_one_message_wherever_it_is_read() -> None:
    from agent.core.settings import Settings
    from mcp_lib.config import ConfigError
    from mcp_lib.platforms import slack

    env = {"HELPBOT_TIMEZONE": "Mars/Olympus", "SLACK_BOT_TOKEN": "xoxb-1-2-abc"}
    messages = set()
    for load in (Settings.from_env, slack.load_config):
        with pytest.raises(ConfigError) as err:
            load(env)
        messages.add(str(err.value))
    assert messages == {"HELPBOT_TIMEZONE: 'Mars/Olympus' is not a time zone name like Asia/Tokyo"}


@pytest.mark.parametrize("value", ["", "   ", "\t\n"])
def test_empty_means_unset_for_every_reader(value: str) -> None:
    env = {"X": value}
    assert env_str(env, "X") is None and env_url(env, "X") is None and env_datetime(env, "X") is None
    assert env_int(env, "X", 7) == 7 and env_float(env, "X", 1.5) == 1.5
    assert env_list(env, "X") == [] and DECLARED.env_bool({"HELPBOT_MASK_PERSONAL": value}, "HELPBOT_MASK_PERSONAL")


def test_each_variable_is_declared_once_with_a_meaning_and_a_place() -> None:
    assert len(DECLARED) == len(VARIABLES)
    for v in VARIABLES:
        assert v.meaning and v.where, v.name
        assert not ("local" in v.where and set(WORKFLOWS) & set(v.where)), v.name
        assert not (v.secret and v.value), v.name  # a secret comes from secrets.*, never from an expression
        assert not (v.source or v.name).startswith("GITHUB_") or not set(WORKFLOWS) & set(v.where) \
            or v.source, f"{v.name}: GitHub refuses secrets and variables named GITHUB_*"


def _step_env(workflow: str, step_id_or_name: str) -> dict[str, str]:
    data = yaml.safe_load((ROOT / ".github" / "workflows" / f"{workflow}.yml").read_text(encoding="utf-8"))
    steps = [s for job in data["jobs"].values() for s in job["steps"]]
    return next(s for s in steps if step_id_or_name in (s.get("id"), s.get("name")))["env"]


@pytest.mark.parametrize("workflow,step", [("help", "answer"), ("feedback", "Report and post"),
                                           ("faq-draft", "Draft")])
def test_the_workflow_passes_every_declared_variable_not_marked_local(workflow: str, step: str) -> None:
    env = _step_env(workflow, step)
    for v in passed_by(workflow):  # type: ignore[arg-type]
        assert env.get(v.name) == v.expression(), v.name
        if v.secret:
            assert v.expression().startswith("${{ secrets."), v.name
    ours = {name for name in env if name.startswith(PREFIXES)}
    assert ours == {v.name for v in passed_by(workflow)}, "a variable in the workflow that is not declared"  # type: ignore[arg-type]
    assert all(name in DECLARED or not name.startswith(PREFIXES) for name in env)


def test_doctor_counts_records_as_the_workflows_it_checks_do() -> None:
    """doctor.yml passes the repository's visibility, so its records are public or private as the others' are."""
    doctor = next(s["env"] for job in yaml.safe_load((ROOT / ".github/workflows/doctor.yml").read_text(
        encoding="utf-8"))["jobs"].values() for s in job["steps"] if "helpbot doctor" in s.get("run", ""))
    for workflow, step in (("help", "answer"), ("feedback", "Report and post"), ("faq-draft", "Draft")):
        assert doctor["HELPBOT_REPOSITORY_VISIBILITY"] == _step_env(workflow, step)["HELPBOT_REPOSITORY_VISIBILITY"]
    assert not any("inputs." in value or "steps." in value for value in doctor.values())


def test_the_surfaces_are_current() -> None:
    assert generate.stale() == [], "run `uv run helpbot config --write`"


def _copy_surfaces(tmp_path: Path) -> Path:
    for path in {p for p, _ in generate.SURFACES} | {generate.MANIFEST}:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    return tmp_path


def test_a_variable_dropped_from_a_workflow_fails_the_check(tmp_path: Path) -> None:
    root = _copy_surfaces(tmp_path)
    help_yml = root / ".github" / "workflows" / "help.yml"
    text = help_yml.read_text(encoding="utf-8")
    help_yml.write_text(text.replace("          HELPBOT_REDMINE_PROJECTS: ${{ vars.HELPBOT_REDMINE_PROJECTS }}\n", ""),
                        encoding="utf-8")
    assert generate.stale(root) == [".github/workflows/help.yml"]
    assert generate.write(root) == [".github/workflows/help.yml"]
    assert help_yml.read_text(encoding="utf-8") == text and generate.stale(root) == []


def test_a_scope_added_to_the_manifest_fails_the_check_until_the_table_is_written(tmp_path: Path) -> None:
    root = _copy_surfaces(tmp_path)
    manifest = root / generate.MANIFEST
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(
        "      - mpim:read ", "      - pins:read          # pinned messages\n      - mpim:read "), encoding="utf-8")
    assert generate.stale(root) == ["docs/slack-setup.md"]
    assert generate.write(root) == ["docs/slack-setup.md"]
    table = (root / "docs" / "slack-setup.md").read_text(encoding="utf-8")
    assert "|  | `pins:read` |  | pinned messages |" in table  # needed by nothing helpbot calls: the row says so
    assert "| `files:read` | `files.info` | attachments of the question" in table


def test_a_surface_without_its_markers_is_reported(tmp_path: Path) -> None:
    root = _copy_surfaces(tmp_path)
    readme = root / "docs" / "configuration.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace("config:end", "gone"), encoding="utf-8")
    [problem] = generate.stale(root)
    assert problem.startswith("docs/configuration.md: expected one block")


def test_the_tables_name_every_variable_and_the_setup_table_what_teams_set() -> None:
    readme = "\n".join(generate.readme_table())
    assert all(f"`{v.name}`" in readme for v in VARIABLES)
    setup = "\n".join(generate.setup_table())
    assert "`HELPBOT_GITHUB_TOKEN` | secret" in setup and "`SLACK_SIGNING_SECRET` | relay env" in setup
    assert "`SLACK_API_URL`" not in setup and "`GITHUB_RUN_ID`" not in setup  # local and runner-set ones


def test_helpbot_config_check_is_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    from agent.cli import main

    assert main(["config", "--check"]) == 0
    assert "up to date" in capsys.readouterr().out
