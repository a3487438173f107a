"""Annotate every allocation candidate with its account's group, probability and cost.

Used by :func:`apportion.selection.apply_policy`, which takes already built
AllocationRequests. launch_select itself does not copy: it runs the policy on the
candidates engine's compact answer (:func:`apportion.selection.policy.choose`) and
builds every request once, with these fields (``CandidateSet.build``).

A launch_select can carry thousands of candidates, and ``model_copy`` costs a few
microseconds each (it deep-copies pydantic's bookkeeping through ``copy.copy``), which
alone would exceed the selection's time budget. The copy here builds the new frozen
instance the way ``model_construct`` does — a fresh ``__dict__`` plus pydantic's
three private slots — at a fraction of the cost. The values are already validated
(they come from a validated AllocationRequest and from this engine), and a unit test
pins the result to ``model_copy``'s, so a pydantic change that breaks it fails loudly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apportion.contracts.launch import AllocationRequest

_new = object.__new__
_set = object.__setattr__
_ALL_FIELDS = frozenset(AllocationRequest.model_fields)


def annotate(
    requests: Sequence[AllocationRequest],
    per_account: Mapping[str, tuple[int | None, float]],
    costs: Sequence[float],
) -> tuple[AllocationRequest, ...]:
    """Copies of ``requests`` with ``priority_group``, ``probability``, ``cost_per_hour``.

    ``per_account`` maps an account to (its group, each candidate's probability).
    """
    out: list[AllocationRequest] = []
    append = out.append
    for request, cost in zip(requests, costs, strict=True):
        fields = dict(request.__dict__)
        group, probability = per_account[fields["account"]]
        fields["priority_group"] = group
        fields["probability"] = probability
        fields["cost_per_hour"] = cost
        copy = _new(AllocationRequest)
        _set(copy, "__dict__", fields)
        _set(copy, "__pydantic_fields_set__", set(_ALL_FIELDS))
        _set(copy, "__pydantic_extra__", None)
        _set(copy, "__pydantic_private__", None)
        append(copy)
    return tuple(out)
