"""The policy modules of provider-selection.txt, one function each.

A base module (``equal``, ``least_used``) makes the first distribution; every other
module maps a :class:`Distribution` to the next. Each returns a :class:`Step` with a
note for the trace. Probabilities are per account and always renormalised within
the account's priority group (distribution.py).

Weight (the seed: "the weightings could be adjusted" under both base policies):
account ``weight`` is applied exactly once. A base module multiplies by it unless a
``weights`` module comes later in the stack (then that module applies it, so the
trace shows the base and the weighting as separate steps); ``weighted: true/false``
on the base module overrides this. Hence ``equal, weights`` with weights 2:1:1 and
``equal`` alone with the same weights both give 0.5/0.25/0.25.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from apportion.contracts.policy import (
    CostModule,
    EqualModule,
    FailurePenaltyModule,
    LeastUsedModule,
    PriorityModule,
    WeightsModule,
)
from apportion.selection.distribution import SHOWN, Distribution, FloatArray, Normalised, names
from apportion.selection.facts import Facts

# Costs that differ only by float noise (0.1 + 0.2 vs 0.3) must share a cost group.
COST_DIGITS = 9
COST_CLIP = 1e290


@dataclass(frozen=True, slots=True)
class Step:
    dist: Distribution
    note: str


def make_step(result: Normalised, note: str) -> Step:
    return Step(result.dist, "; ".join((note, *result.notes)))


# ---- the modules table ------------------------------------------------------------------
# One registration per module, next to its function: the policy runs whatever a name is
# registered to, so adding a module is its contract model plus one decorated function.

# (module, facts, weighted) -> the first distribution
Base = Callable[[Any, Facts, bool], Step]
# (module, distribution so far, facts, the module's JSON path) -> the next distribution
Adjustment = Callable[[Any, Distribution, Facts, str], Step]
BASES: dict[str, Base] = {}
ADJUSTMENTS: dict[str, Adjustment] = {}
_B = TypeVar("_B", bound=Base)
_A = TypeVar("_A", bound=Adjustment)


def base(name: str) -> Callable[[_B], _B]:
    """Register a base distribution module under ``name``."""

    def register(fn: _B) -> _B:
        BASES[name] = fn
        return fn

    return register


def adjustment(name: str) -> Callable[[_A], _A]:
    """Register a module that adjusts the distribution so far under ``name``."""

    def register(fn: _A) -> _A:
        ADJUSTMENTS[name] = fn
        return fn

    return register


def _listing(accounts: tuple[str, ...], values: FloatArray, skip: float | None, fmt: str) -> str:
    """``a=v`` for the accounts whose value is not ``skip``, only the named ones formatted."""
    listed = np.flatnonzero(values != skip) if skip is not None else np.arange(len(accounts))
    first = listed[:SHOWN].tolist()
    shown = [f"{accounts[i]}={v:{fmt}}" for i, v in zip(first, values[first].tolist(), strict=True)]
    return names(shown, total=len(listed))


# ---- base distributions ---------------------------------------------------------------


@base("equal")
def equal(module: EqualModule, facts: Facts, weighted: bool) -> Step:
    """The same probability for every account (* weight when ``weighted``)."""
    n = len(facts.accounts)
    if weighted:
        raw = facts.weight
        note = f"1/{n} each, {_weight_note(facts.accounts, facts.weight)}"
    else:
        raw = np.ones(n)
        note = f"1/{n} each"
    return make_step(Distribution.single_group(facts.accounts, raw), note)


@base("least_used")
def least_used(module: LeastUsedModule, facts: Facts, weighted: bool) -> Step:
    """Probability proportional to the account's free share (utilisation.py)."""
    free = facts.free_share
    assert free is not None, "policy.py computes free shares when least_used is used"
    raw = free * facts.weight if weighted else free
    note = "proportional to free share " + names(
        f"{a}={share:.0%}" for a, share in zip(facts.accounts, free.tolist(), strict=True)
    )
    if weighted:
        note += f", {_weight_note(facts.accounts, facts.weight)}"
    return make_step(Distribution.single_group(facts.accounts, raw), note)


def _weight_note(accounts: tuple[str, ...], weights: FloatArray) -> str:
    if bool(np.all(weights == 1.0)):
        return "all weights 1"
    return "times weight " + _listing(accounts, weights, 1.0, "g")


# ---- adjustments ----------------------------------------------------------------------


@adjustment("weights")
def weights(module: WeightsModule, dist: Distribution, facts: Facts, path: str) -> Step:
    """Multiply by the administrator's capacity weights (then renormalise).

    A ``weights`` map in the module overrides the named accounts' own ``weight``.
    """
    factors = facts.weight
    if module.weights:
        given = module.weights
        factors = np.asarray(
            [given.get(a, w) for a, w in zip(dist.accounts, factors.tolist(), strict=True)],
            dtype=np.float64,
        )
    return make_step(dist.multiplied(factors), _weight_note(dist.accounts, factors))


@adjustment("priority")
def priority(module: PriorityModule, dist: Distribution, facts: Facts, path: str) -> Step:
    if module.mode == "strict":
        result = dist.regrouped(-facts.priority)
        return make_step(result, "groups by priority, highest first: " + _group_list(result.dist))
    # Probabilistic: rank r = 0 for the highest priority present in the group, 1 for
    # the next distinct one ...; probability * (1 + strength)^-r. Ranks rather than raw
    # priority values because priorities are an ordering (10 vs 1 says "before", not
    # "ten times"); strength 0 changes nothing, a large strength approaches strict.
    base = 1.0 + module.strength
    rank = dist.rank_within_group(-facts.priority)
    factors = np.power(base, -rank.astype(np.float64))
    note = f"each priority step down divides by {base:g} within its group"
    return make_step(dist.multiplied(factors), note)


@adjustment("failure_penalty")
def failure_penalty(
    module: FailurePenaltyModule, dist: Distribution, facts: Facts, path: str
) -> Step:
    """Each failure in the window fines ``percent`` points, never below 0.

    The failure counts are inputs already restricted to the module's window (the
    failure-history store reads them with ``window_hours``). The fine is taken from
    the probability the account has within its group at this point of the stack,
    then the group is renormalised — three failures at 5 % on a third gives
    (1/3 - 0.15) / 0.85. With ``hard_limit``, accounts with at least that many
    failures then move to a last-resort group behind every other group.
    """
    fine = module.percent / 100.0
    raw = np.maximum(0.0, dist.probs - fine * facts.failures)
    penalised = facts.failures > 0
    hits = np.flatnonzero(penalised)
    first = hits[:SHOWN].tolist()
    fined = (
        names(
            [
                f"{dist.accounts[i]} x{int(n)}"
                for i, n in zip(first, facts.failures[first].tolist(), strict=True)
            ],
            total=len(hits),
        )
        if len(hits)
        else "none"
    )
    parts = [f"-{module.percent:g} points per failure in {module.window_hours:g} h: {fined}"]
    result = dist.reweighted(raw)
    notes = list(result.notes)
    if module.hard_limit is not None:
        last = facts.failures >= module.hard_limit
        if bool(last.any()):
            demoted = result.dist.demoted(last)
            notes.extend(demoted.notes)
            result = demoted
            moved = [a for a, hit in zip(dist.accounts, last.tolist(), strict=True) if hit]
            parts.append(f"last resort (>= {module.hard_limit} failures): {names(moved)}")
    return Step(result.dist, "; ".join((*parts, *notes)))


@adjustment("cost")
def cost(module: CostModule, dist: Distribution, facts: Facts, path: str) -> Step:
    # Clipped so that rounding and the spread below cannot overflow to infinity.
    costs = np.round(np.clip(facts.cost, -COST_CLIP, COST_CLIP), COST_DIGITS).astype(np.float64)
    if module.mode == "strict":
        result = dist.regrouped(costs)
        return make_step(
            result, "groups by cost per hour, cheapest first: " + _group_list(result.dist)
        )
    # Probabilistic: within each group x = (c - c_min) / (c_max - c_min) in [0, 1] and
    # probability * (1 + amount)^-x — the dearest account ends with 1/(1 + amount)
    # of the cheapest's relative share, accounts in between geometrically. Scaling by
    # the group's spread makes the shift independent of currency and price level and
    # well defined when the cheapest account is free (private cloud at cost 0).
    base = 1.0 + module.amount
    low = np.full(dist.n_groups, np.inf)
    high = np.full(dist.n_groups, -np.inf)
    np.minimum.at(low, dist.group, costs)
    np.maximum.at(high, dist.group, costs)
    spread = (high - low)[dist.group]
    excess = costs - low[dist.group]
    x = np.divide(excess, spread, out=np.zeros_like(costs), where=spread > 0)
    factors = np.power(base, -x)
    note = f"dearest in each group divided by {base:g} relative to the cheapest"
    return make_step(dist.multiplied(factors), note)


def _group_list(dist: Distribution, shown: int = 6) -> str:
    groups = dist.groups()
    text = " > ".join(f"[{names(group, 4)}]" for group in groups[:shown])
    return text + (f" > ... ({len(groups)} groups)" if len(groups) > shown else "")
