"""Run launch_select jobs through ``engine.run`` with the candidates-only solver.

The service registers a combined solver (candidates + selection policy) for
``launch_select``; these tests exercise the placement engine alone through the
same validation and envelope mapping.
"""

from __future__ import annotations

import pytest

from apportion import engine


@pytest.fixture(autouse=True)
def _candidates_only_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(engine._SOLVERS, "launch_select", "apportion.placement:solve")
