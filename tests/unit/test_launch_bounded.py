"""launch_select stops building candidates before its answer passes the envelope limit."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.codec import encode
from apportion.engine import Context, run
from apportion.limits import Limits


def job(hosts: int, policy: Any) -> dict[str, Any]:
    providers: list[dict[str, Any]] = []
    for h in range(hosts):
        root = f"host-{h:03d}"
        providers.append({"uuid": root, "account": f"acct-{h % 4}"})
        providers += [
            {
                "uuid": f"{root}-gpu{c}",
                "parent_provider_uuid": root,
                "inventories": {"VGPU": {"total": 1}},
            }
            for c in range(6)
        ]
    request = "&".join(f"resources_G{i}=VGPU:1" for i in range(4)) + "&group_policy=isolate"
    return {"job_id": "j", "providers": providers, "request": request, "policy": policy, "seed": 5}


def answer(limit: int, policy: Any) -> dict[str, Any]:
    envelope = run(
        "launch_select", job(40, policy), Context(limits=Limits(max_envelope_bytes=limit))
    )
    assert envelope.status == "ok", envelope.error
    return {**envelope.as_dict(), "elapsed_ms": None}


@pytest.mark.parametrize("policy", [None, [{"module": "equal"}]])
def test_an_answer_that_fits_is_the_same_as_without_any_limit(policy: Any) -> None:
    assert answer(8 * 1024 * 1024, policy) == answer(10**9, policy)
    assert "truncated" not in answer(8 * 1024 * 1024, policy)["result"]["extra"]


@pytest.mark.parametrize("policy", [None, [{"module": "equal"}]])
def test_an_answer_over_the_limit_is_cut_says_so_and_fits(policy: Any) -> None:
    full = answer(10**9, policy)["result"]
    limit = 200_000

    envelope = answer(limit, policy)
    result = envelope["result"]

    assert len(encode({**envelope, "elapsed_ms": 12345.678})) <= limit
    extra = result["extra"]
    assert extra["truncated"] is True
    assert extra["valid_candidates"] == len(full["allocation_requests"])
    assert extra["returned"] == len(result["allocation_requests"]) < extra["valid_candidates"]
    assert extra["max_envelope_bytes"] == limit
    # The candidates returned are the first ones, as found.
    cut = result["allocation_requests"]
    if policy is None:
        assert cut == full["allocation_requests"][: len(cut)]
    # Summaries cover the trees of the candidates returned, no others.
    roots = {uuid.split("-gpu")[0] for r in cut for uuid in r["allocations"]}
    assert {uuid.split("-gpu")[0] for uuid in result["provider_summaries"]} == roots


def test_the_chosen_candidate_is_always_among_those_returned() -> None:
    full = answer(10**9, [{"module": "equal"}])["result"]
    for limit in (30_000, 60_000, 120_000):
        result = answer(limit, [{"module": "equal"}])["result"]
        chosen = result["selection"]["chosen"]
        picked = result["allocation_requests"][chosen]
        assert (
            picked["allocations"]
            == full["allocation_requests"][full["selection"]["chosen"]]["allocations"]
        )
