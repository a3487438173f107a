"""examples/launch_select.candidates.json: the seed's same_subtree FPGA/NUMA
example, answered as OpenStack Placement answers it."""

from __future__ import annotations

import json

from apportion.engine import run
from tests.conftest import load_example, load_reference


def canonical(requests: list[dict[str, object]]) -> list[str]:
    return sorted(
        json.dumps(
            {"allocations": r["allocations"], "mappings": r.get("mappings", {})}, sort_keys=True
        )
        for r in requests
    )


def test_the_candidates_example_matches_placements_answer() -> None:
    job = load_example("launch_select.candidates.json")
    expected = load_reference("launch_select.candidates.json")
    env = run("launch_select", job)
    assert env.status == "ok"
    assert env.result is not None
    assert canonical(env.result["allocation_requests"]) == canonical(
        expected["allocation_requests"]
    )
    assert sorted(env.result["provider_summaries"]) == expected["provider_uuids_in_summaries"]
    assert env.result["selection"] is None
    assert {r["account"] for r in env.result["allocation_requests"]} == {"cn"}
