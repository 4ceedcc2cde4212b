"""Each package's exceptions live in its one errors module, and that module's docstring tree names every one.

Read from the source with ``ast``: a class whose base is an exception (a builtin one, or one found so far) is an
exception, wherever it is defined. A private one (``_NoTime``) never leaves its module and is not counted.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = {name for name, value in vars(builtins).items()
           if isinstance(value, type) and issubclass(value, BaseException)}


def exceptions(package: str, known: set[str]) -> dict[str, str]:
    """Public exception class -> the module defining it, for every module of ``package``."""
    trees = {str(path.relative_to(ROOT)): ast.parse(path.read_text()) for path in (ROOT / package).rglob("*.py")}
    found: dict[str, str] = {}
    grew = True
    while grew:
        grew = False
        for where, tree in trees.items():
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef) or node.name in found or node.name.startswith("_"):
                    continue
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & (known | set(found)):
                    found[node.name] = where
                    grew = True
    return found


MCP_LIB = exceptions("mcp_lib", BUILTIN)
AGENT = exceptions("agent", BUILTIN | set(MCP_LIB))


def test_the_scan_finds_the_exceptions_it_judges() -> None:
    assert {"ToolError", "ConfigError", "GaveUp"} <= set(MCP_LIB) and {"RunFailed", "ModelError"} <= set(AGENT)


@pytest.mark.parametrize("package,found", [("mcp_lib", MCP_LIB), ("agent", AGENT)])
def test_every_exception_is_defined_in_the_errors_module_and_named_in_its_tree(package: str,
                                                                                 found: dict[str, str]) -> None:
    home = f"{package}/errors.py"
    assert {name: where for name, where in found.items() if where != home} == {}
    tree = importlib.import_module(f"{package}.errors").__doc__ or ""
    named = set(re.findall(r"^[\s│├└─]*(\w+)", tree, re.MULTILINE))
    assert sorted(set(found) - named) == []
