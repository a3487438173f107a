"""launch_select: allocation candidates, then the administrator's selection policy.

Which policy a job gets, first match wins (docs/contract.md, "Which policy decides"):

1. ``"policy": null`` — candidates only, no selection (Placement's answer);
2. ``"policy": [...]`` — that stack, where the deployment allows inline policies
   (``Context.allow_inline_policy``, APPORTION_ALLOW_INLINE_POLICY); where it does not,
   the job is rejected rather than quietly given another policy;
3. no ``policy`` key — the policy store (``Context.policy_lookup``, injected by the
   worker): the current version of the job's ``pool``, else of the global default;
4. no store (``apportion solve``), or a store with neither — the default policy file
   (``Context.default_policy``, config/default_policy.yaml); with none, candidates only.

The result's ``policy`` record says which of these decided, and for the store, which
pool and version. A store that cannot answer raises an InfrastructureError out of the
engine: the worker retries the job rather than run it with another policy.

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

from apportion.context import Context
from apportion.contracts.launch import (
    NO_POLICY,
    LaunchSelectJob,
    LaunchSelectResult,
    PolicyRecord,
    PolicySource,
    Provider,
    launch_result,
)
from apportion.contracts.policy import DEFAULT_POOL, PolicyModule
from apportion.errors import Rejected
from apportion.placement import CandidateSet, check_found, find_candidates
from apportion.placement.bounded import fit, rechosen
from apportion.selection import Pool, choose, failure_window_hours, parse_policy


def chosen_policy(
    job: LaunchSelectJob, ctx: Context
) -> tuple[list[PolicyModule] | None, PolicyRecord]:
    """The policy that decides this job and the record saying which (module docstring)."""
    if job.policy_given:
        if job.policy is None:
            return None, NO_POLICY
        if not ctx.allow_inline_policy:
            raise Rejected.at(
                "policy",
                "this deployment does not take a policy inside the job "
                "(APPORTION_ALLOW_INLINE_POLICY=false): leave `policy` out to get the policy "
                "of the job's `pool` from the policy store, or send null for candidates only",
                code="inline_policy_disabled",
            )
        return list(job.policy), {"source": "inline", "pool": None, "version": None}
    stored = ctx.policy_lookup(job.pool) if ctx.policy_lookup is not None else None
    if stored is not None:
        source: PolicySource = "default" if stored.pool == DEFAULT_POOL else "pool"
        modules = parse_policy(stored.modules, path=f"policy_store.{stored.pool}.v{stored.version}")
        return modules, {"source": source, "pool": stored.pool, "version": stored.version}
    if ctx.default_policy is None:
        return None, NO_POLICY
    modules = parse_policy(ctx.default_policy, path="default_policy")
    return modules, {"source": "file", "pool": None, "version": None}


def failure_counts(
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
    policy, record = chosen_policy(job, ctx)
    limit = ctx.limits.max_envelope_bytes
    candidates = find_candidates(job, ctx)
    check_found(candidates)  # raises Infeasible when there is no candidate
    if policy is None:
        fitted = fit(candidates, limit)
        return launch_result(
            fitted.requests,
            fitted.provider_summaries,
            None,
            {**candidates.extra(), **fitted.note},
            record,
        )
    accounts = candidates.accounts
    failures, failure_info = failure_counts(job, policy, accounts, ctx)
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
        record,
    )


__all__ = ["chosen_policy", "failure_counts", "pool_of", "solve"]
