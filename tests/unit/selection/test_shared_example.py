"""The example examples/launch_select.json, computed by hand.

vsphere-a (priority 10, weight 2, 2 failures; two hosts), vsphere-b (priority 10,
weight 1), ec2 (priority 1, cost 0.4/h); policy equal → weights → failure_penalty
5 %/6 h → strict priority. Every host prices VCPU at 0.02 per unit-hour and the
request takes 2 VCPU (+ unpriced memory), so a candidate costs 0.04 plus its
account's cost_per_hour.

  equal:            1/3, 1/3, 1/3
  weights 2:1:1:    a 0.5, b 0.25, ec2 0.25
  penalty 2 × 5 %:  a 0.40, b 0.25, ec2 0.25 (sum 0.9) → a 4/9, b 5/18, ec2 5/18
  strict priority:  group 0 {a, b} → a 8/13, b 5/13; group 1 {ec2} → 1
Candidates: a-host1 4/13, a-host2 4/13, b-host1 5/13 (group 0), ec2-east 1 (group 1).
Seed 42 rolls 0.6394… > 8/13 = 0.6154 → vsphere-b (its only candidate, index 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from apportion.contracts.launch import AllocationRequest, LaunchSelectJob
from apportion.limits import Limits
from apportion.selection import PolicyOutcome, apply_policy
from tests.unit.selection.builders import NOW

REQUEST: TypeAdapter[AllocationRequest] = TypeAdapter(AllocationRequest)
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "launch_select.json"


def _outcome(**overrides: object) -> PolicyOutcome:
    job = LaunchSelectJob.model_validate({**json.loads(EXAMPLE.read_text()), **overrides})
    # The candidates engine's answer for resources=VCPU:2,MEMORY_MB:4096: one per host.
    requests = [
        REQUEST.validate_python(
            {
                "allocations": {p["uuid"]: {"resources": {"VCPU": 2, "MEMORY_MB": 4096}}},
                "mappings": {"": [p["uuid"]]},
                "account": p["account"],
            }
        )
        for p in job.providers
    ]
    assert job.policy is not None
    return apply_policy(
        requests,
        {p["uuid"]: p for p in job.providers},
        job.accounts,
        job.policy,
        failures=job.failures or {},
        exclude_accounts=job.exclude_accounts,
        seed=job.seed,
        now=NOW,
        limits=Limits(),
    )


def test_the_trace_shows_the_hand_computed_numbers_after_every_module() -> None:
    trace = _outcome().selection["trace"]
    assert [step["module"] for step in trace] == ["equal", "weights", "failure_penalty", "priority"]
    assert trace[0]["probabilities"] == pytest.approx(
        {"vsphere-a": 1 / 3, "vsphere-b": 1 / 3, "ec2": 1 / 3}
    )
    assert trace[1]["probabilities"] == pytest.approx(
        {"vsphere-a": 0.5, "vsphere-b": 0.25, "ec2": 0.25}
    )
    assert trace[2]["probabilities"] == pytest.approx(
        {"vsphere-a": 4 / 9, "vsphere-b": 5 / 18, "ec2": 5 / 18}
    )
    assert trace[3]["probabilities"] == pytest.approx(
        {"vsphere-a": 8 / 13, "vsphere-b": 5 / 13, "ec2": 1.0}
    )


def test_ec2_is_the_spillover_group() -> None:
    groups = _outcome().selection["groups"]
    assert [g["priority"] for g in groups] == [0, 1]
    assert groups[0]["probabilities"] == pytest.approx({"vsphere-a": 8 / 13, "vsphere-b": 5 / 13})
    assert groups[1]["probabilities"] == pytest.approx({"ec2": 1.0})


def test_every_candidate_carries_account_group_probability_and_cost() -> None:
    requests = _outcome().requests
    assert [r["account"] for r in requests] == ["vsphere-a", "vsphere-a", "vsphere-b", "ec2"]
    assert [r["priority_group"] for r in requests] == [0, 0, 0, 1]
    assert [r["probability"] for r in requests] == pytest.approx([4 / 13, 4 / 13, 5 / 13, 1.0])
    assert [r["cost_per_hour"] for r in requests] == pytest.approx([0.04, 0.04, 0.04, 0.44])


def test_seed_42_chooses_vsphere_b() -> None:
    selection = _outcome().selection
    assert selection["roll"] == pytest.approx(0.6394267984578837)
    assert (selection["account"], selection["chosen"]) == ("vsphere-b", 2)


def test_excluding_both_vsphere_accounts_spills_over_to_ec2() -> None:
    selection = _outcome(exclude_accounts=["vsphere-a", "vsphere-b"]).selection
    assert (selection["account"], selection["chosen"]) == ("ec2", 3)
