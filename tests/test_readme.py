"""The docs' command list and module map are checked against the code, so they cannot drift.

The map is the first fenced block of docs/architecture.md that starts with ``agent/``: every module of ``agent/``
and ``mcp_lib/`` is named in it, and every ``*.py`` it names exists. The command list is the fenced block under
``## `helpbot``` in docs/commands.md: exactly the subcommands registered in ``agent.cli``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
COMMANDS = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")


def fenced_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)


def module_map() -> str:
    blocks = [b for b in fenced_blocks(ARCHITECTURE) if b.startswith("agent/")]
    assert blocks, "docs/architecture.md has no module map (a fenced block starting with agent/)"
    return blocks[0]


def mapped_files(block: str) -> set[str]:
    """Paths the map names: each ``name.py`` belongs to the ``dir/`` headings above it at smaller indents."""
    found: set[str] = set()
    dirs: list[tuple[int, str]] = []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        head = line.split()[0] if line.strip() else ""
        while dirs and dirs[-1][0] >= indent:
            dirs.pop()
        if head.endswith("/"):
            dirs.append((indent, head))
            line = line.strip()[len(head):]
        prefix = "".join(d for _, d in dirs)
        names = re.findall(r"\b([a-z_0-9]+\.py)\b", line)
        for name in names:
            found.add(prefix + name)
    return found


def test_the_map_parser_reads_nesting() -> None:
    block = ("agent/        x\n  slack/  front.py\n  core/       y\n    loop.py   z\n  cli.py report.py   w\n"
             "mcp_lib/\n  core.py\n")
    assert mapped_files(block) == {"agent/slack/front.py", "agent/core/loop.py", "agent/cli.py", "agent/report.py",
                                   "mcp_lib/core.py"}


def test_every_module_is_on_the_map_and_every_mapped_file_exists() -> None:
    mapped = mapped_files(module_map())
    modules = {str(p.relative_to(ROOT)) for pkg in ("agent", "mcp_lib") for p in (ROOT / pkg).rglob("*.py")
               if p.name != "__init__.py" and "__pycache__" not in p.parts}
    assert sorted(modules - mapped) == [], "modules missing from the module map (docs/architecture.md)"
    assert sorted(mapped - modules) == [], "the module map (docs/architecture.md) names files that do not exist"


def test_the_command_list_is_the_command_table() -> None:
    from agent.cli import SUBCOMMANDS

    section = COMMANDS.split("## `helpbot`", 1)[1]
    listed = re.findall(r"^uv run helpbot ([a-z][a-z-]*)", fenced_blocks(section)[0], flags=re.M)
    assert len(listed) == len(set(listed)) and sorted(listed) == sorted(SUBCOMMANDS)
