"""Which package may import what.

The engine package stays free of broker libraries, and the house has floors, from the
ground up:

1. the contracts and what every engine shares (errors, limits, the kinds registry, the
   engines' ``Context``, the JSON edge, bounded yaql);
2. the engines (attach, placement, partition, selection, launch, outcome, explain);
3. ``engine.py``, which dispatches to them through the kinds registry, and the engine's
   settings;
4. the service's configuration (config/);
5. the service around the engine (workers/);
6. the Celery tasks (tasks/), thin adapters over the service's runtime, publisher and
   stores; the Celery application names them (``apportion.tasks:register``) as Celery
   names a task module, and a task carries what GatedRequest answers for it;
7. the ``apportion`` command (cli/), which reaches the service lazily.

A module imports only from its own floor or below, and no modules, nor packages, import
each other in a circle. The import graph is grimp's, read from a copy of the tree laid
out as it installs (pyproject's package-dir), so workers/, tasks/ and config/ are
``apportion.*`` packages as at run time.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

import apportion

BROKER_LIBRARIES = {"celery", "kombu", "redis"}
ENGINE_ROOT = Path(apportion.__file__).parent
# Installed without --editable, the service folders land inside the package directory.
SERVICE_PACKAGES = {"workers", "tasks", "config"}


def broker_imports(path: Path) -> list[str]:
    """``file:line module`` for every import of a broker library in ``path``, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [
            f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] in BROKER_LIBRARIES
        ]
    return found


def test_no_module_of_the_apportion_package_imports_celery_kombu_or_redis() -> None:
    # src/apportion (the engine, the contracts, the CLI) reaches the broker only through
    # apportion.workers, which installs from workers/ beside it.
    modules = [
        path
        for path in sorted(ENGINE_ROOT.rglob("*.py"))
        if path.relative_to(ENGINE_ROOT).parts[0] not in SERVICE_PACKAGES
    ]
    found = [hit for path in modules for hit in broker_imports(path)]

    assert len(modules) > 50
    assert found == []


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from kombu.exceptions import OperationalError\n")

    assert broker_imports(module) == ["lazy.py:2 kombu.exceptions"]


# ---- the floors ------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
Graph = Mapping[str, Sequence[str]]

FLOORS: tuple[tuple[str, ...], ...] = (
    (
        "apportion",
        "apportion.codec",
        "apportion.collector",
        "apportion.context",
        "apportion.contracts",
        "apportion.edge",
        "apportion.edge_fast",
        "apportion.errors",
        "apportion.kinds",
        "apportion.limits",
        "apportion.schemas",
        "apportion.setting_names",
        "apportion.unknown_fields",
        "apportion.walk",
        "apportion.yaql_eval",
    ),
    (
        "apportion.attach",
        "apportion.explain",
        "apportion.launch",
        "apportion.outcome",
        "apportion.partition",
        "apportion.placement",
        "apportion.selection",
    ),
    ("apportion.engine", "apportion.engine_settings"),
    ("apportion.config",),
    ("apportion.workers",),
    ("apportion.tasks",),
    ("apportion.cli",),
)


def floor_of(module: str) -> int:
    """The floor of ``module``: that of the longest listed name it is, or is inside."""
    best, found = -1, None
    for number, names in enumerate(FLOORS, start=1):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, found = len(name), number
    if found is None:
        raise AssertionError(f"{module} is on no floor: add it to FLOORS")
    return found


def _installed_layout(into: Path) -> Path:
    """A copy of the Python files, laid out as pyproject's package-dir installs them."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for package, folder in pyproject["tool"]["setuptools"]["package-dir"].items():
        source = ROOT / folder
        target = into.joinpath(*package.split("."))
        for path in source.rglob("*.py"):
            relative = path.relative_to(source)
            if "__pycache__" in relative.parts or (target / relative).exists():
                continue
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / relative)
    return into


_READ_GRAPH = """
import json, grimp
graph = grimp.build_graph("apportion", cache_dir=None)
print(json.dumps({m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}))
"""


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    """Every module of apportion and the modules of apportion it imports (at any depth
    of the file: inside functions and under TYPE_CHECKING too)."""
    tree = _installed_layout(tmp_path_factory.mktemp("installed"))
    # A process of its own: this one has apportion imported from the editable install,
    # where workers/, tasks/ and config/ are not below src/apportion.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", _READ_GRAPH], env=env, capture_output=True, text=True, check=True
    )
    found: dict[str, list[str]] = json.loads(done.stdout)
    return found


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def packages(graph: Graph) -> dict[str, list[str]]:
    """The graph between apportion's direct children (``apportion.attach``, ...)."""
    out: dict[str, set[str]] = {}
    for module, imported in graph.items():
        here = ".".join(module.split(".")[:2])
        for other in imported:
            there = ".".join(other.split(".")[:2])
            if there != here:
                out.setdefault(here, set()).add(there)
    return {name: sorted(found) for name, found in out.items()}


def test_the_graph_reads_every_room_of_the_installed_package(graph: Graph) -> None:
    assert {"apportion.context", "apportion.workers.app", "apportion.tasks.jobs"} <= set(graph)
    assert "apportion.context" in graph["apportion.engine"]
    assert "apportion.workers.runtime" in graph["apportion.tasks.jobs"]


def test_every_module_imports_only_from_its_floor_or_below(graph: Graph) -> None:
    upward = [
        f"{module} (floor {floor_of(module)}) -> {other} (floor {floor_of(other)})"
        for module, imported in sorted(graph.items())
        for other in imported
        if floor_of(other) > floor_of(module)
    ]

    assert upward == []


def test_no_modules_import_each_other_in_a_circle(graph: Graph) -> None:
    assert circles(graph) == []


def test_no_packages_import_each_other_in_a_circle(graph: Graph) -> None:
    assert circles(packages(graph)) == []


def test_the_checks_see_a_circle_and_an_import_from_a_higher_floor() -> None:
    assert circles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert packages({"apportion.x.one": ["apportion.y.two"]}) == {"apportion.x": ["apportion.y"]}
    assert floor_of("apportion.engine") > floor_of("apportion.attach.select")
    assert floor_of("apportion.tasks.jobs") > floor_of("apportion.workers.runtime")
