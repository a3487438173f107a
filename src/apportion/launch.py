"""launch_select: allocation candidates, then the administrator's selection policy.

Which policy a job gets:

* ``"policy": null`` — candidates only, no selection (Placement's answer);
* ``"policy": [...]`` — that stack;
* no ``policy`` key — the default policy from ``config/default_policy.yaml``
  (``Context.default_policy``); with no default configured, candidates only.

Failure counts: the job's ``failures`` map when given; otherwise, when the policy has a
``failure_penalty`` module, ``Context.failure_counts`` (the worker's failure-history
store) is asked for the candidates' accounts over the widest penalty window. Without a
store (``apportion solve``) the counts are zero, and the result says so in ``extra``.

The policy runs on the candidates engine's compact answer (accounts and prices per
candidate), so each ``AllocationRequest`` is built once, with its selection fields,
rather than built and then copied to add them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apportion.contracts.launch import (
    LaunchSelectJob,
    LaunchSelectResult,
    Provider,
    launch_result,
)
from apportion.contracts.policy import PolicyModule
from apportion.engine import Context
from apportion.placement import CandidateSet, check_found, find_candidates
from apportion.placement.bounded import fit, rechosen
from apportion.selection import Pool, choose, failure_window_hours, parse_policy


def chosen_policy(job: LaunchSelectJob, ctx: Context) -> list[PolicyModule] | None:
    if job.policy_given:
        return None if job.policy is None else list(job.policy)
    if ctx.default_policy is None:
        return None
    return parse_policy(ctx.default_policy, path="default_policy")


def _failures(
    job: LaunchSelectJob, policy: Sequence[PolicyModule], accounts: Sequence[str], ctx: Context
) -> tuple[Mapping[str, int], dict[str, Any]]:
    """The failure counts the policy uses; ``accounts``: each candidate's (repeats and all)."""
    if job.failures is not None:
        return job.failures, {"failures_source": "job"}
    window = failure_window_hours(policy)
    if window is None:
        return {}, {}
    if ctx.failure_counts is None:
        return {}, {"failures_source": "none (no failure-history store)"}
    counts = ctx.failure_counts(sorted(set(accounts)), window)
    return counts, {"failures_source": "store", "failures": dict(counts), "window_hours": window}


def pool_of(
    candidates: CandidateSet, providers: Sequence[Provider], accounts: Sequence[str] | None = None
) -> Pool:
    """What the selection policy needs about ``candidates`` (``accounts``: theirs, if known)."""
    return Pool(
        accounts=candidates.accounts if accounts is None else accounts,
        costs=candidates.costs,
        resource_classes=candidates.resource_classes,
        providers=lambda: {p["uuid"]: p for p in providers},
    )


def solve(job: LaunchSelectJob, ctx: Context) -> LaunchSelectResult:
    policy = chosen_policy(job, ctx)
    limit = ctx.limits.max_envelope_bytes
    candidates = find_candidates(job, ctx)
    check_found(candidates)  # raises Infeasible when there is no candidate
    if policy is None:
        fitted = fit(candidates, limit)
        return launch_result(
            fitted.requests, fitted.provider_summaries, None, {**candidates.extra(), **fitted.note}
        )
    accounts = candidates.accounts
    failures, failure_info = _failures(job, policy, accounts, ctx)
    choice = choose(
        pool_of(candidates, job.providers, accounts),
        job.accounts,
        policy,
        failures=failures,
        exclude_accounts=job.exclude_accounts,
        seed=job.seed,
        now=ctx.now,
        limits=ctx.limits,
    )
    # The answer stays under the envelope limit (placement/bounded.py): candidates past
    # it are not built; the policy and the dice saw them all.
    fitted = fit(
        candidates,
        limit,
        selection=choice.selection,
        per_account=choice.per_account,
        costs=choice.costs,
        chosen=choice.selection["chosen"],
    )
    return launch_result(
        fitted.requests,
        fitted.provider_summaries,
        rechosen(choice.selection, fitted.chosen),
        {**candidates.extra(), **failure_info, **fitted.note},
    )


__all__ = ["chosen_policy", "pool_of", "solve"]
