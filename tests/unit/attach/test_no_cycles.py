"""An attach job, answered or rejected, leaves no reference cycle behind (the examples
are in tests/unit/test_no_cycles.py).

``apportion solve`` runs each job with the cyclic collector paused and counts on
reference counting to free what the job built: a cycle per job would stay until the
collector's next pass (and a big job's thousands of pools would be walked by it).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.cycles import cycles_left
from tests.unit.attach.support import CTX, consumer, ent, job, pool, stacking, syspurpose


def _stacked_job(**purpose: Any) -> dict[str, Any]:
    pools = [
        pool(
            f"p{i}",
            f"sku-{i % 3}",
            provided=(f"prod-{i % 5}",),
            pattrs={**stacking(f"s{i % 4}", "2"), **syspurpose(roles="RHEL Server")},
        )
        for i in range(40)
    ]
    pools += [pool("single", "sku-x", provided=("prod-9",), pattrs={"sockets": "8"})]
    return job(
        consumer(installed=tuple(f"prod-{i}" for i in range(10)), **purpose),
        pools,
        entitlements=[ent("e1", pools[0])],
    )


def _jobs() -> list[tuple[str, dict[str, Any]]]:
    stacked = _stacked_job()
    duplicate = _stacked_job()
    duplicate["pools"].append(duplicate["pools"][0])  # rejected: a repeated pool id
    misspelt = _stacked_job()
    misspelt["pools"][0]["quantty"] = 3  # a warning: unknown field
    purpose = _stacked_job(role="RHEL Server", addons=("RHEL EUS",))
    return [
        ("auto_attach", stacked),
        ("auto_attach", duplicate),
        ("auto_attach", misspelt),
        ("auto_attach", purpose),
        ("auto_attach", {"consumer": {"uuid": ""}, "pools": [{"id": 3}]}),  # rejected
    ]


@pytest.mark.parametrize(("kind", "payload"), _jobs())
def test_a_job_leaves_no_cycle_for_the_collector(kind: str, payload: dict[str, Any]) -> None:
    status, left = cycles_left(kind, payload, CTX)

    assert status in {"ok", "rejected"}
    assert left == 0
