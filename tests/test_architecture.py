"""Layering rules that import-linter cannot express: protocol/ and store/ never do I/O on
sockets or run an event loop, and protocol/ imports nothing outside the standard library
(orjson aside, which it uses only through ``protocol._json`` with a stdlib fallback)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "finchmq"
NO_IO = {"asyncio", "socket", "selectors", "ssl", "uvloop"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _modules(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


@pytest.mark.parametrize("package", ["protocol", "store"])
def test_no_network_or_event_loop(package: str) -> None:
    offenders = {str(p.relative_to(SRC)): _imports(p) & NO_IO for p in _modules(package)}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_protocol_is_stdlib_only() -> None:
    allowed = set(sys.stdlib_module_names) | {"finchmq"}
    for path in _modules("protocol"):
        extra = _imports(path) - allowed
        if path.name == "_json.py":
            extra -= {"orjson"}
        assert not extra, f"{path.relative_to(SRC)} imports {sorted(extra)}"
