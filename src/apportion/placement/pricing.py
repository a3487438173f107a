"""cost_per_hour of every candidate, computed on the engine's compact candidates.

A candidate costs its account's ``cost_per_hour`` plus Σ amount × the provider's
unit price over its allocations. Candidates of one *shape* (which slots share a
provider) price the same (slot, class, amount) list on different providers, so per
shape each term is one numpy operation over all its candidates rather than a
Python loop per candidate.

The floats must be the ones ``selection.facts.request_costs`` gets by walking a
built candidate: every candidate gets its terms added one by one in allocation
order, each a float64 multiply and add; a provider without any price adds nothing
(not even 0.0, which would turn a -0.0 base into 0.0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import cast

import numpy as np
import numpy.typing as npt

from apportion.placement.shapes import Found, rows_of_shapes, shape_codes

# What a shape's candidates give: per allocated provider, the slot holding it and
# its (class, summed amount) list, in allocation order.
Gives = tuple[tuple[int, tuple[tuple[str, int], ...]], ...]
FloatArray = npt.NDArray[np.float64]


def candidate_costs(
    found: Found,
    base: Sequence[float],
    prices: Mapping[int, Mapping[str, float]],
    providers: int,
    gives_of: Callable[[tuple[int, ...]], Gives],
) -> list[float]:
    """Each candidate's cost: ``base[i]`` (its account's) plus its priced amounts.

    ``found``: (anchor, assignment) per candidate; ``prices``: provider index → unit
    prices; ``providers``: how many providers the job has.
    """
    if not prices or not found:
        return list(base)
    assigned = found.assigned
    first, shape_of = shape_codes(assigned)
    total = np.array(base, dtype=np.float64)
    unit = _UnitPrices(prices, providers)
    for u, at in enumerate(rows_of_shapes(shape_of, len(first))):
        for k, gives in gives_of(found[first[u]][1]):
            held = assigned[at, k]
            has = unit.priced[held]
            if not has.any():
                continue
            where, held = at[has], held[has]
            with np.errstate(over="ignore", invalid="ignore"):  # inf, as floats do
                for rc, amount in gives:
                    total[where] += np.float64(amount) * unit.column(rc)[held]
    return cast(list[float], total.tolist())


class _UnitPrices:
    """Unit prices as columns over every provider, built per class on first use."""

    def __init__(self, prices: Mapping[int, Mapping[str, float]], providers: int) -> None:
        self.prices = prices
        self.size = providers
        # One index array for every lookup (a list would be converted each time).
        self.holders = np.fromiter(prices, dtype=np.intp, count=len(prices))
        self.priced = np.zeros(providers, dtype=bool)
        self.priced[self.holders] = True
        self.columns: dict[str, FloatArray] = {}

    def column(self, rc: str) -> FloatArray:
        col = self.columns.get(rc)
        if col is None:
            col = self.columns[rc] = np.zeros(self.size, dtype=np.float64)
            col[self.holders] = [unit.get(rc, 0.0) for unit in self.prices.values()]
        return col
