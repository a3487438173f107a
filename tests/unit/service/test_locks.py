"""The lock files pin every dependency pyproject.toml names, inside its allowed range.

scripts/test, CI and the Dockerfile install from the locks; scripts/lock regenerates
them. A dependency added to pyproject.toml without re-locking fails here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def pins(lock: str) -> dict[str, str]:
    found = {}
    for line in (REPO / "requirements" / lock).read_text().splitlines():
        if line and not line.startswith((" ", "#", "-")):
            name, _, version = line.partition("==")
            found[canonicalize_name(name)] = version.strip()
    return found


def requirements(*extras: str) -> list[Requirement]:
    names = list(PROJECT["dependencies"])
    for extra in extras:
        names += PROJECT["optional-dependencies"][extra]
    return [Requirement(name) for name in names]


@pytest.mark.parametrize(
    ("lock", "extras"),
    [("runtime.lock", ("flower", "studio")), ("dev.lock", tuple(PROJECT["optional-dependencies"]))],
)
def test_every_dependency_is_pinned_within_its_range(lock: str, extras: tuple[str, ...]) -> None:
    pinned = pins(lock)
    problems = []
    for req in requirements(*extras):
        version = pinned.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req.name} is not pinned in {lock}")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}=={version} in {lock} is outside {req.specifier}")
    assert problems == [], "run scripts/lock"
