"""What `pip install apportion` puts into site-packages: one top-level package, apportion.

The service folders (config/, workers/, tasks/) stay at the top of the repository but
install as apportion.config, apportion.workers and apportion.tasks (pyproject's
package-dir), so nothing else lands at the top level where it could collide with
another project's `config`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def setuptools_table() -> dict[str, object]:
    table: dict[str, object] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]
    return table


def packages_on_disk() -> set[str]:
    """Every folder with an __init__.py, named as it installs."""
    package_dir: dict[str, str] = setuptools_table()["package-dir"]  # type: ignore[assignment]
    found = set()
    for name, folder in package_dir.items():
        root = REPO / folder
        for init in root.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            relative = init.parent.relative_to(root).parts
            found.add(".".join((name, *relative)))
    return found


def test_every_package_folder_is_listed_for_installation() -> None:
    listed = set(setuptools_table()["packages"])  # type: ignore[arg-type]
    assert listed == packages_on_disk()


def test_the_service_folders_install_inside_the_apportion_namespace() -> None:
    import apportion.config.settings
    import apportion.tasks
    import apportion.workers.app

    assert Path(apportion.config.settings.__file__).parent == REPO / "config"
    assert Path(apportion.tasks.__file__).parent == REPO / "tasks"
    assert Path(apportion.workers.app.__file__).parent == REPO / "workers"


def test_no_module_imports_the_service_folders_by_their_old_top_level_names() -> None:
    offenders = []
    for folder in ("src", "config", "workers", "tasks", "tests", "bench"):
        for path in (REPO / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                words = line.split()
                if words[:1] in (["from"], ["import"]) and words[1].split(".")[0] in (
                    "config",
                    "workers",
                    "tasks",
                ):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


@pytest.mark.slow
def test_the_wheel_holds_only_the_apportion_package_at_its_top_level(tmp_path: Path) -> None:
    pytest.importorskip("setuptools", minversion="77")
    # Built from a copy: setuptools writes build/ beside the sources it builds.
    source = tmp_path / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("pyproject.toml", "README.md", "src", "config", "workers", "tasks"):
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=ignore)
        else:
            shutil.copy(REPO / name, source / name)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    subprocess.run(
        [*pip_wheel, "--no-build-isolation", "--wheel-dir", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("apportion-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"apportion"}
    assert "apportion/config/default_policy.yaml" in names
    assert "apportion/workers/broker/transport.py" in names
