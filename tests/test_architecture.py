"""Layering rules that import-linter cannot express: protocol/ and store/ never do I/O on
sockets or run an event loop, and protocol/ imports nothing outside the standard library
(orjson aside, which it uses only through ``protocol._json`` with a stdlib fallback). The whole
import graph of src/finchmq (TYPE_CHECKING and function-level imports included) has no circle,
and no module imports its own package's face."""

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


MODULES = {  # protoc's generated modules (finchmq/grpc/_pb, built by the package) are not ours to shape
    _module_name(p): p for p in sorted(SRC.rglob("*.py")) if not p.name.endswith("_pb2.py")
}


def _known(dotted: str) -> str | None:
    """``dotted`` if it is one of our modules, else the nearest enclosing one (``a.b.Name`` -> ``a.b``)."""
    while dotted and dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def _imports_in(source: str, module: str, *, is_package: bool) -> list[tuple[int, str]]:
    """``(line, target)`` for each finchmq module that ``source`` (module ``module``) imports:
    module level, under TYPE_CHECKING or inside a function, relative or absolute.

    ``import a.b`` names ``a.b``. ``from a import b`` names the package ``a`` (its ``__init__``
    runs and ``b`` is looked up on it) and also ``a.b`` when that is a module.
    """
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, _known(alias.name)) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, _known(base)))
            found.extend(
                (node.lineno, f"{base}.{a.name}") for a in node.names if f"{base}.{a.name}" in MODULES
            )
    return [(line, target) for line, target in found if target is not None and target != module]


def _imports_of(module: str) -> list[tuple[int, str]]:
    path = MODULES[module]
    return _imports_in(path.read_text(), module, is_package=path.name == "__init__.py")


GRAPH = {module: {target for _, target in _imports_of(module)} for module in MODULES}


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def _one_circle(graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """A shortest path from the first member back to itself, inside ``members``."""
    start = min(members)
    paths = {start: [start]}
    queue = [start]
    for node in queue:
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"{sorted(members)} is no circle")


def test_the_import_graph_has_no_circles() -> None:
    """The whole of src/finchmq, across packages, every kind of import: no module reaches itself."""
    circles = _circles(GRAPH)
    assert circles == [], "import circles:\n" + "\n".join(
        f"{' -> '.join(_one_circle(GRAPH, c))}\n    (all {len(c)} modules: {', '.join(sorted(c))})"
        for c in circles
    )


def test_the_circle_check_sees_every_kind_of_import() -> None:
    """So that the checks here cannot go blind to one kind of import."""
    source = """
from typing import TYPE_CHECKING
from . import _json
from .codes import RequestCode
import finchmq.store.commit_log, json
if TYPE_CHECKING:
    from finchmq.client.instance import MQClientInstance
def later():
    from ..common.tasks import BackgroundTasks
"""
    assert sorted(_imports_in(source, "finchmq.protocol.codec", is_package=False)) == [
        (3, "finchmq.protocol"),  # the package face: ``from . import _json`` runs its __init__
        (3, "finchmq.protocol._json"),
        (4, "finchmq.protocol.codes"),
        (5, "finchmq.store.commit_log"),
        (7, "finchmq.client.instance"),
        (9, "finchmq.common.tasks"),
    ]
    assert _imports_in("from . import codec", "finchmq.protocol", is_package=True) == [
        (1, "finchmq.protocol.codec")
    ]


def _enclosing_packages(module: str) -> set[str]:
    parts = module.split(".")
    own = len(parts) if MODULES[module].name == "__init__.py" else len(parts) - 1
    return {".".join(parts[:i]) for i in range(1, own + 1)} - {module}


def test_no_module_imports_its_own_package_face() -> None:
    """Inside a package, siblings import each other directly (``from .codec import X``), never
    through the package's ``__init__`` (``from finchmq.protocol import X``, ``from . import codec``),
    nor through an enclosing package's (``from finchmq import __version__`` inside finchmq.client)."""
    offenders = [
        f"{module}:{line} imports {target}"
        for module in sorted(MODULES)
        for line, target in _imports_of(module)
        if target in _enclosing_packages(module)
    ]
    assert offenders == [], "import the sibling module instead:\n" + "\n".join(offenders)


# Tasks created outside ``common.tasks.BackgroundTasks``, each with the reason it is safe there.
BARE_TASKS_ALLOWED = {
    "remoting/client.py": "async invoke: the task's outcome is handed to the caller's callback",
    "remoting/processor.py": "request executor workers: each request's failure is answered and logged",
    "remoting/local.py": "the peer's answers to the server: an invoke's outcome goes to its caller, others' failures are logged",
    "client/consumer/executor.py": "consume executor workers: each job's failure goes to its future",
    "client/producer.py": "async send: the outcome is delivered to the caller's callbacks",
    "cli/bench.py": "a command-line tool's own tasks, gathered before it exits",
    "grpc/cluster.py": "a single-flight load: its outcome goes to every caller awaiting it",
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
