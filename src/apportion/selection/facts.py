"""What the policy modules know about each account, computed once per job.

Costs (the contract, and the seed's "cost per realm, per hour, for each hardware
profile, for each provider account"): a candidate costs its account's
``cost_per_hour`` plus Σ amount * the provider's price per unit-hour over its
allocations (a class without a price costs nothing). An account's cost is the mean
over its candidates — the expected cost of launching there, because the dice takes
a candidate within the account uniformly (see dice.py). Aeolus likewise averaged the
hardware-profile price across a deployment.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from apportion.contracts.launch import Account, AllocationRequest, Provider
from apportion.limits import Limits
from apportion.selection.distribution import FloatArray, frozen
from apportion.selection.memo import ExpressionMemo

DEFAULT_ACCOUNT = Account()
"""What an account missing from the job's ``accounts`` gets: priority 0, weight 1,
cost 0, enabled."""

# A price times a huge amount can overflow; the largest float keeps every formula finite.
MAX_COST = sys.float_info.max


class ExpressionClock:
    """The one wall-time budget every ``expression`` module of a job shares
    (``limits.yaql_job_seconds``), started by the first module that asks."""

    __slots__ = ("deadline",)

    def __init__(self) -> None:
        self.deadline: float | None = None

    def remaining(self, budget: float) -> float:
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + budget
        return max(0.0, self.deadline - now)


@dataclass(frozen=True, slots=True)
class Facts:
    """Inputs of the modules, as arrays aligned with ``accounts`` (eligible, sorted)."""

    accounts: tuple[str, ...]
    weight: FloatArray
    priority: FloatArray
    cost_per_hour: FloatArray  # the account setting
    failures: FloatArray  # counts in the window
    cost: FloatArray  # mean cost of the account's candidates
    candidates: FloatArray  # how many candidates each account has
    # None unless a module needs it (walking every provider is not free).
    free_share: FloatArray | None
    now: datetime
    limits: Limits
    expression_clock: ExpressionClock = field(default_factory=ExpressionClock)
    # The caller's memo of expression results (selection/memo.py); None in a worker.
    expression_memo: ExpressionMemo | None = None

    @classmethod
    def build(
        cls,
        accounts: tuple[str, ...],
        settings: Mapping[str, Account],
        failures: Mapping[str, int],
        cost: Mapping[str, float],
        candidates: Mapping[str, int],
        free_share: Mapping[str, float] | None,
        now: datetime,
        limits: Limits,
        expression_memo: ExpressionMemo | None = None,
    ) -> Facts:
        def column(values: Sequence[float]) -> FloatArray:
            return frozen(np.asarray(values, dtype=np.float64))

        chosen = [settings[a] for a in accounts]
        return cls(
            accounts=accounts,
            weight=column([s.weight for s in chosen]),
            priority=column([s.priority for s in chosen]),
            cost_per_hour=column([s.cost_per_hour for s in chosen]),
            failures=column([float(failures.get(a, 0)) for a in accounts]),
            cost=column([cost.get(a, 0.0) for a in accounts]),
            candidates=column([float(candidates[a]) for a in accounts]),
            free_share=column([free_share[a] for a in accounts])
            if free_share is not None
            else None,
            now=now,
            limits=limits,
            expression_memo=expression_memo,
        )


def candidate_costs(
    requests: Sequence[AllocationRequest],
    providers: Mapping[str, Provider],
    settings: Mapping[str, Account],
) -> list[float]:
    """cost_per_hour of every candidate, in request order (finite)."""
    base = {a: s.cost_per_hour for a, s in settings.items()}
    return finite_costs(request_costs(requests, providers, base))


def request_costs(
    requests: Sequence[AllocationRequest],
    providers: Mapping[str, Provider],
    base: Mapping[str, float],
) -> list[float]:
    """Each request's account ``cost_per_hour`` (``base``) plus Σ amount × unit price.

    Terms are added one by one in allocation order (a class without a price adds
    0.0), which the candidates engine repeats exactly on its compact candidates
    (``CandidateSet.costs``). Not clamped: see :func:`finite_costs`.
    """
    prices = {uuid: p["prices"] for uuid, p in providers.items() if p["prices"]}
    price_of = prices.get
    out: list[float] = []
    append = out.append
    for request in requests:
        total = base.get(request["account"], 0.0)  # type: ignore[arg-type]
        if prices:
            for uuid, alloc in request["allocations"].items():
                price = price_of(uuid)
                if price:
                    for rc, amount in alloc["resources"].items():
                        total += amount * price.get(rc, 0.0)
        append(total)
    return out


def finite_costs(costs: Sequence[float]) -> list[float]:
    """``costs`` with every infinite or NaN value clamped (see :func:`_clamp`)."""
    # One vectorised check first: absurd prices are rare, and thousands of candidates
    # are then passed through without a Python step each.
    if np.isfinite(np.asarray(costs, dtype=np.float64)).all():
        return list(costs)
    return [c if -MAX_COST <= c <= MAX_COST else _clamp(c) for c in costs]


def account_costs(accounts_of: Sequence[str], costs: Sequence[float]) -> dict[str, float]:
    """account → mean cost of its candidates."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for account, value in zip(accounts_of, costs, strict=True):
        sums[account] = sums.get(account, 0.0) + value
        counts[account] = counts.get(account, 0) + 1
    return {a: _clamp(sums[a] / counts[a]) for a in sums}


def _clamp(cost: float) -> float:
    """Keep a cost finite: absurd prices can overflow to ±inf, or NaN from inf - inf."""
    if cost != cost:  # NaN
        return MAX_COST
    return max(-MAX_COST, min(cost, MAX_COST))
