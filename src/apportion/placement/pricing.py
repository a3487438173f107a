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
from itertools import chain
from operator import itemgetter
from typing import cast

import numpy as np
import numpy.typing as npt

# What a shape's candidates give: per allocated provider, the slot holding it and
# its (class, summed amount) list, in allocation order.
Gives = tuple[tuple[int, tuple[tuple[str, int], ...]], ...]
Found = Sequence[tuple[int, tuple[int, ...]]]
FloatArray = npt.NDArray[np.float64]
_SECOND = itemgetter(1)


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
    assigned = _assignments(found)
    codes, shape_of = _shapes(assigned)
    total = np.array(base, dtype=np.float64)
    unit = _UnitPrices(prices, providers)
    everyone = np.arange(len(found))
    for u in range(len(codes)):
        at = np.flatnonzero(shape_of == u) if len(codes) > 1 else everyone
        for k, gives in gives_of(found[int(at[0])][1]):
            held = assigned[at, k]
            has = unit.priced[held]
            if not has.any():
                continue
            where, held = at[has], held[has]
            with np.errstate(over="ignore", invalid="ignore"):  # inf, as floats do
                for rc, amount in gives:
                    total[where] += np.float64(amount) * unit.column(rc)[held]
    return cast(list[float], total.tolist())


def _assignments(found: Found) -> npt.NDArray[np.intp]:
    """The providers of every candidate, one row each."""
    slots = len(found[0][1])
    flat = chain.from_iterable(map(_SECOND, found))
    return np.fromiter(flat, dtype=np.intp, count=len(found) * slots).reshape(len(found), slots)


def _shapes(assigned: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.intp]]:
    """The distinct shapes and each row's: per slot, the first slot with the same provider."""
    rows, slots = assigned.shape
    first = np.empty_like(assigned)
    for j in range(slots):
        first[:, j] = j
        for i in range(j - 1, -1, -1):  # ends at the smallest such slot
            first[assigned[:, i] == assigned[:, j], j] = i
    if slots == 1:  # one shape: (0,)
        return np.zeros(1, dtype=np.int64), np.zeros(rows, dtype=np.intp)
    if slots**slots < 2**62:  # the shape as one number in base ``slots``: a fast unique
        code = np.zeros(rows, dtype=np.int64)
        for j in range(slots):
            code = code * slots + first[:, j]
        return cast(
            tuple[npt.NDArray[np.int64], npt.NDArray[np.intp]],
            np.unique(code, return_inverse=True),
        )
    # 16 slots or more: rows compared whole (slower, exact)
    codes, shape_of = np.unique(first, axis=0, return_inverse=True)
    return codes, shape_of.reshape(-1)


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
