"""A deployable (one launch_select job) and what a policy makes of it.

The studio is the engine's view, never its own arithmetic: a job is validated as a
worker validates it (``apportion.engine.validate``), its allocation candidates come
from the candidates engine (``apportion.placement.find_candidates``) and every
probability from the selection engine (``apportion.selection.choose``), exactly the
calls ``apportion.launch.solve`` makes. What the studio adds is caching: the
candidates (and each candidate's price, which depends only on the job) are computed
once per deployable; a policy change re-runs only the policy.

"Simulate N launches" rolls the engine's own dice (``apportion.selection.dice``) with
the seeds ``seed, seed + 1, …``: launch ``i`` is what a job with seed ``seed + i``
would be given.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from apportion.contracts.launch import LaunchSelectJob
from apportion.engine import Context, validate
from apportion.launch import failure_counts, pool_of
from apportion.limits import Limits
from apportion.placement import check_found, find_candidates
from apportion.selection import Pool, choose, dice
from apportion.selection.memo import ExpressionMemo
from apportion.selection.stored import validate_policy

# (accounts, window_hours) -> failures per account in the window (the worker's store)
FailureCounts = Callable[[Sequence[str], float], Mapping[str, int]]


@dataclass(frozen=True)
class Deployable:
    """One launch_select job with its candidates computed (immutable once built)."""

    id: str
    label: str
    source: str  # "example", "upload" or "recent"
    job: LaunchSelectJob
    pool: Pool
    # The account of each candidate (repeats and all), and the distinct ones, sorted.
    candidate_accounts: tuple[str, ...]
    accounts: tuple[str, ...]
    # Evaluations of one deployable run one at a time (the yaql child is forked per call).
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def summary(self) -> dict[str, Any]:
        job = self.job
        settings = {
            a: job.accounts[a].model_dump(mode="json") for a in self.accounts if a in job.accounts
        }
        return {
            "id": self.id,
            "label": self.label,
            "source": self.source,
            "job_id": job.job_id,
            "pool": getattr(job, "pool", None),
            "candidates": len(self.candidate_accounts),
            "accounts": list(self.accounts),
            "account_settings": settings,
            "failures": job.failures,
            "exclude_accounts": list(job.exclude_accounts),
            "seed": job.seed,
            "policy": None
            if job.policy is None
            else [m.model_dump(mode="json", exclude_none=True) for m in job.policy],
        }


def load(payload: Any, *, ident: str, label: str, source: str, limits: Limits) -> Deployable:
    """Validate ``payload`` as a launch_select job and compute its candidates once.

    Raises :class:`Rejected` (naming the field) for a job a worker would reject, and
    :class:`~apportion.errors.Infeasible` when it has no allocation candidate.
    """
    job = cast(LaunchSelectJob, validate("launch_select", payload, limits))
    candidates = find_candidates(job, Context(limits=limits))
    check_found(candidates)
    accounts = tuple(candidates.accounts)
    engine_pool = pool_of(candidates, job.providers, accounts)
    prices: dict[tuple[tuple[str, float], ...], Sequence[float]] = {}

    def costs(base: Mapping[str, float]) -> Sequence[float]:
        # The accounts' own cost_per_hour is part of the job, so the same for every
        # policy: the candidates are priced once.
        key = tuple(sorted(base.items()))
        if key not in prices:
            prices.clear()
            prices[key] = engine_pool.costs(base)
        return prices[key]

    resource_classes = engine_pool.resource_classes()
    providers = engine_pool.providers()
    pool = Pool(
        accounts=accounts,
        costs=costs,
        resource_classes=lambda: resource_classes,
        providers=lambda: providers,
    )
    return Deployable(
        id=ident,
        label=label,
        source=source,
        job=job,
        pool=pool,
        candidate_accounts=accounts,
        accounts=tuple(sorted(set(accounts))),
    )


def _no_chance(deployable: Deployable, trace: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Accounts with candidates that the dice can never pick, and why."""
    job = deployable.job
    excluded = set(job.exclude_accounts)
    out: list[dict[str, str]] = []
    final = trace[-1]["probabilities"]
    for account in deployable.accounts:
        if account in excluded:
            out.append({"account": account, "why": "excluded by the job (exclude_accounts)"})
        elif account not in final:
            out.append({"account": account, "why": "disabled (enabled: false)"})
        elif final[account] <= 0:
            first = next(i for i, step in enumerate(trace) if step["probabilities"][account] <= 0)
            module = trace[first]["module"]
            out.append(
                {"account": account, "why": f"probability 0 from policy[{first}] ({module}) on"}
            )
    return out


def evaluate(
    deployable: Deployable,
    raw_policy: Any,
    *,
    limits: Limits,
    failures: FailureCounts | None = None,
    now: datetime | None = None,
    expression_memo: ExpressionMemo | None = None,
) -> dict[str, Any]:
    """Run ``raw_policy`` on the deployable's candidates, as launch_select would.

    Returns the priority groups (each account's probability within its group), the
    trace after every module, the accounts that no longer get any chance, and the
    account the job's own seed would pick. Raises :class:`Rejected` for a policy the
    engine refuses (naming ``policy[i].field``), including a hostile expression.

    ``expression_memo`` (apportion.selection.memo) reuses an ``expression`` module's
    values while everything it reads is unchanged, e.g. while a weight slider moves:
    the engine's own results, under a key that provably determines them.
    """
    # As the store checks a policy on save (unknown keys, yaql syntax, limits): what
    # evaluates here can be saved.
    policy = validate_policy(raw_policy, limits)
    ctx = Context(limits=limits, now=now or datetime.now(UTC), failure_counts=failures)
    job = deployable.job
    with deployable.lock:
        counts, info = failure_counts(job, policy, deployable.candidate_accounts, ctx)
        choice = choose(
            deployable.pool,
            job.accounts,
            policy,
            failures=counts,
            exclude_accounts=job.exclude_accounts,
            seed=job.seed,
            now=ctx.now,
            limits=limits,
            expression_memo=expression_memo,
        )
    selection = choice.selection
    return {
        "groups": selection["groups"],
        "trace": selection["trace"],
        "no_chance": _no_chance(deployable, selection["trace"]),
        "chosen_account": selection["account"] if job.seed is not None else None,
        "failures": dict(counts),
        "failures_source": info.get("failures_source"),
    }


def simulate(group: Mapping[str, float], launches: int, seed: int) -> dict[str, int]:
    """How many of ``launches`` each account of the most preferred group wins.

    Launch ``i`` rolls the engine's dice exactly as a job with seed ``seed + i`` does
    (``choose`` rolls within the most preferred group), so the counts are what that
    many jobs would get, not a separate sampler's approximation.
    """
    wins: Counter[str] = Counter()
    for i in range(launches):
        winner, _ = dice.roll_account(dice.new_rng(seed + i), group)
        wins[winner] += 1
    return {account: wins.get(account, 0) for account in group}
