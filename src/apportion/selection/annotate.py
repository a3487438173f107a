"""Annotate every allocation candidate with its account's group, probability and cost.

Used by :func:`apportion.selection.apply_policy`, which takes already built
AllocationRequests. launch_select itself does not copy: it runs the policy on the
candidates engine's compact answer (:func:`apportion.selection.policy.choose`) and
builds every request once, with these fields (``CandidateSet.build``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apportion.contracts.launch import AllocationRequest


def annotate(
    requests: Sequence[AllocationRequest],
    per_account: Mapping[str, tuple[int | None, float]],
    costs: Sequence[float],
) -> tuple[AllocationRequest, ...]:
    """Copies of ``requests`` with ``priority_group``, ``probability``, ``cost_per_hour``.

    ``per_account`` maps an account to (its group, each candidate's probability).
    The copies share the requests' allocations and mappings, which nobody changes.
    """
    out: list[AllocationRequest] = []
    for request, cost in zip(requests, costs, strict=True):
        group, probability = per_account[request["account"]]  # type: ignore[index]
        out.append(
            {
                "allocations": request["allocations"],
                "mappings": request["mappings"],
                "account": request["account"],
                "priority_group": group,
                "probability": probability,
                "cost_per_hour": cost,
            }
        )
    return tuple(out)
