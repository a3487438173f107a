"""launch_select: allocation candidates, then the administrator's selection policy.

Which policy a job gets (SPEC.md §2.3):

* ``"policy": null`` — candidates only, no selection (Placement's answer);
* ``"policy": [...]`` — that stack;
* no ``policy`` key — the default policy from ``config/default_policy.yaml``
  (``Context.default_policy``); with no default configured, candidates only.

Failure counts: the job's ``failures`` map when given; otherwise, when the policy has a
``failure_penalty`` module, ``Context.failure_counts`` (the worker's failure-history
store) is asked for the candidates' accounts over the widest penalty window. Without a
store (``apportion solve``) the counts are zero, and the result says so in ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apportion.contracts.launch import LaunchSelectJob, LaunchSelectResult
from apportion.contracts.policy import PolicyModule
from apportion.engine import Context
from apportion.placement import find_candidates, result_of
from apportion.selection.policy import apply_policy, failure_window_hours, parse_policy


def chosen_policy(job: LaunchSelectJob, ctx: Context) -> list[PolicyModule] | None:
    if job.policy_given:
        return None if job.policy is None else list(job.policy)
    if ctx.default_policy is None:
        return None
    return parse_policy(ctx.default_policy, path="default_policy")


def _failures(
    job: LaunchSelectJob, policy: Sequence[PolicyModule], accounts: Sequence[str], ctx: Context
) -> tuple[Mapping[str, int], dict[str, Any]]:
    if job.failures is not None:
        return job.failures, {"failures_source": "job"}
    window = failure_window_hours(policy)
    if window is None:
        return {}, {}
    if ctx.failure_counts is None:
        return {}, {"failures_source": "none (no failure-history store)"}
    counts = ctx.failure_counts(accounts, window)
    return counts, {"failures_source": "store", "failures": dict(counts), "window_hours": window}


def solve(job: LaunchSelectJob, ctx: Context) -> LaunchSelectResult:
    policy = chosen_policy(job, ctx)
    candidates = find_candidates(job, ctx)
    plain = result_of(candidates)  # raises Infeasible when there is no candidate
    if policy is None:
        return plain
    accounts = sorted({r.account for r in candidates.requests if r.account is not None})
    failures, failure_info = _failures(job, policy, accounts, ctx)
    outcome = apply_policy(
        candidates.requests,
        {p.uuid: p for p in job.providers},
        job.accounts,
        policy,
        failures=failures,
        exclude_accounts=job.exclude_accounts,
        seed=job.seed,
        now=ctx.now,
        limits=ctx.limits,
    )
    return LaunchSelectResult(
        allocation_requests=list(outcome.requests),
        provider_summaries=plain.provider_summaries,
        selection=outcome.selection,
        extra={**plain.extra, **failure_info},
    )


__all__ = ["chosen_policy", "solve"]
