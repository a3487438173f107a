"""A policy as the policy store keeps it: checked on save as a job's inline policy is.

An administrator's saved policy decides every job of its pool, so everything the
engine would reject in a job's inline ``policy`` is rejected when the policy is saved,
with the same paths (``policy[2].percent``), the same limits and the same messages:

* the shape rules of a job (strings, nesting, no NaN; apportion.edge);
* the module models (``parse_policy``) and the stack rules (``check_policy``: a base
  module first, ``max_policy_modules``, yaql expression length);
* what the engine only finds when a job runs: a yaql expression that does not parse
  (``bad_expression``), so that a saved policy cannot reject every job of its pool;
* unknown keys (``percnt``), as a ``strict`` job's are (code ``unknown_field``): in a
  job they are warned about, but a typo saved in a pool's policy would silently change
  every job of the pool.

Pure: no I/O; the store (apportion.workers.policies) and the CLI call it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from apportion import edge, unknown_fields
from apportion.contracts.base import WireModel
from apportion.contracts.policy import DEFAULT_POOL, ExpressionModule, PolicyModule, check_pool
from apportion.errors import Problem, Rejected
from apportion.limits import DEFAULT_LIMITS, Limits
from apportion.selection import expression
from apportion.selection.policy import check_policy, parse_policy


class _Document(WireModel):
    """The shape unknown keys are looked for in (the policy as a job would carry it)."""

    policy: list[PolicyModule] = Field(default_factory=list)


def validate_policy(raw: Any, limits: Limits = DEFAULT_LIMITS) -> list[PolicyModule]:
    """The parsed stack of ``raw`` (a list of module objects), or :class:`Rejected`
    naming every problem's field (see the module docstring)."""
    if not isinstance(raw, list) or not all(isinstance(m, dict) for m in raw):
        raise Rejected.at(
            "policy",
            "a policy is a list of modules, each an object such as {module: equal}",
        )
    found = edge.shape_problem({"policy": raw}, limits)
    if found is not None:
        raise found.rejected()
    parsed = parse_policy(raw, path="policy")
    unknown = unknown_fields.find(_Document, {"policy": raw})
    if unknown:
        raise Rejected.of(unknown_fields.rejection(unknown).problems, code=unknown_fields.CODE)
    check_policy(parsed, limits)
    problems: list[Problem] = []
    for i, module in enumerate(parsed):
        if isinstance(module, ExpressionModule):
            problems.extend(expression.syntax_problems(module, f"policy[{i}]", limits))
    if problems:
        raise Rejected.of(problems, code="bad_expression")
    return parsed


__all__ = ["DEFAULT_POOL", "check_pool", "validate_policy"]
