"""Which package may import what: the engine package stays free of broker libraries."""

from __future__ import annotations

import ast
from pathlib import Path

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
