"""Every example job, of every kind, leaves no reference cycle behind.

``apportion solve`` runs each job with the cyclic collector paused
(docs/architecture.md, "Memory") and counts on reference counting to free what the job
built. A cycle left by a job would live until the collector's next pass; in a batch of
big jobs, each such pass walks every object still alive.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apportion.engine_settings import EngineSettings, engine_context
from tests.support.cycles import cycles_left

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JOBS = sorted(p for p in EXAMPLES.glob("*.json") if not p.name.endswith(".envelope.json"))


def _kind(path: Path) -> str:
    return path.name.split(".")[0]


@pytest.mark.parametrize("path", JOBS, ids=lambda p: p.name)
def test_an_example_job_leaves_no_cycle_for_the_collector(path: Path) -> None:
    payload: Any = json.loads(path.read_text())
    status, left = cycles_left(_kind(path), payload, engine_context(EngineSettings()))

    assert status == "ok"
    assert left == 0


def test_every_kind_has_an_example_here() -> None:
    assert {_kind(p) for p in JOBS} >= {
        "auto_attach",
        "guest_host_attach",
        "launch_outcome",
        "launch_select",
        "partition",
    }
