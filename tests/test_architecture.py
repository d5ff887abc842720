"""Layering rules that import-linter cannot express: protocol/ and store/ never do I/O on
sockets or run an event loop, and protocol/ imports nothing outside the standard library
(orjson aside, which it uses only through ``protocol._json`` with a stdlib fallback)."""

from __future__ import annotations

import ast
import subprocess
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _internal_edges(path: Path, inside: str, known: set[str]) -> set[str]:
    """Modules of ``inside`` that ``path`` imports, TYPE_CHECKING and function-level imports included."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` names a module; ``from mod import Class`` names the module itself
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for candidate in candidates:
            if candidate in known and candidate.startswith(inside) and candidate != name:
                targets.add(candidate)
                break
    return targets


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


@pytest.mark.parametrize("package", ["broker", "store", "client/consumer"])
def test_no_import_cycles_inside(package: str) -> None:
    """Package ``__init__`` re-exports aside, no module of ``package`` reaches itself through imports."""
    paths = [p for p in _modules(package) if p.name != "__init__.py"]
    known = {_module_name(p) for p in paths}
    inside = "finchmq." + package.replace("/", ".")
    graph = {_module_name(p): _internal_edges(p, inside, known) for p in paths}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


# Tasks created outside ``common.tasks.BackgroundTasks``, each with the reason it is safe there.
BARE_TASKS_ALLOWED = {
    "remoting/client.py": "async invoke: the task's outcome is handed to the caller's callback",
    "remoting/processor.py": "request executor workers: each request's failure is answered and logged",
    "client/consumer/executor.py": "consume executor workers: each job's failure goes to its future",
    "client/producer.py": "async send: the outcome is delivered to the caller's callbacks",
    "cli/bench.py": "a command-line tool's own tasks, gathered before it exits",
}


def test_background_work_runs_under_the_supervisor() -> None:
    """No silent task: every ``create_task``/``ensure_future`` is in ``common/tasks.py`` or allowed above."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        relative = str(path.relative_to(SRC))
        if relative == "common/tasks.py" or relative in BARE_TASKS_ALLOWED:
            continue
        text = path.read_text()
        if "create_task(" in text or "ensure_future(" in text:
            offenders.append(relative)
    assert offenders == [], f"use finchmq.common.tasks.BackgroundTasks in {offenders}"
    for relative in BARE_TASKS_ALLOWED:
        text = (SRC / relative).read_text()
        assert "create_task(" in text or "ensure_future(" in text, f"{relative} no longer needs its exception"


@pytest.mark.parametrize("package", ["protocol", "store"])
def test_importing_the_package_loads_no_event_loop_or_sockets(package: str) -> None:
    """Through every import, not only each file's own: ``finchmq.store`` must not drag asyncio in."""
    probe = (
        f"import sys, finchmq.{package}; "
        "loaded = sorted(m for m in ('asyncio', 'socket', 'ssl', 'selectors') if m in sys.modules); "
        "print(','.join(loaded))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"importing finchmq.{package} loads {done.stdout.strip()}"
