"""The candidates of a request whose slots do not interact, all at once with numpy.

When no slot's choice constrains another's (no competing amounts, no isolate, no
same_subtree, no collective traits: ``SearchSpec.bound_count == 0``), each anchor's
candidates are the Cartesian product of its slots' providers, in
``itertools.product`` order, and the answer interleaves the anchors breadth-first
(:func:`apportion.placement.search.round_robin`): round ``t`` takes the ``t``-th
candidate of every anchor that has one, anchors ascending. Both orders are plain
arithmetic, so the first ``want`` candidates are computed as arrays: which (anchor,
rank) pairs are taken, then each slot's provider from the rank in mixed radix
(the last slot varies fastest).

The result is exactly what the plain search gives (tests/unit/placement/
test_product_fast_path.py). Where the plain search would do something the
arithmetic does not model, this declines (returns None) and the plain search runs:
a candidate made only of sharing providers (it may come from two anchors and be
de-duplicated), a step budget too small for the anchors visited, or products too
large for int64.
"""

from __future__ import annotations

from itertools import chain

import numpy as np
import numpy.typing as npt

from apportion.placement.model import BoolArray
from apportion.placement.search import Budget
from apportion.placement.shapes import Found
from apportion.placement.slots import SlotPlan

IntArray = npt.NDArray[np.int64]
# Products at or above this could overflow int64 arithmetic on ranks.
_TOO_MANY = float(2**62)


def product_candidates(
    plan: SlotPlan, want: int, budget: Budget, sharing: BoolArray
) -> Found | None:
    """The first ``want`` candidates in answer order, or None (module docstring).

    ``sharing``: a mask over providers, true for sharing providers. Spends what the
    plain search would: one step per anchor visited.
    """
    # The first round visits every anchor, one candidate each, until ``want``.
    anchors = plan.anchors[:want]
    if len(anchors) > budget.left:
        return None
    counts, flats, offsets = _choices(plan, anchors)
    if np.prod(counts.astype(np.float64), axis=0).max() >= _TOO_MANY:
        return None
    sizes = np.prod(counts, axis=0)
    at, rank = _taken(sizes, want)
    columns = []
    for k in reversed(range(len(flats))):
        radix = counts[k][at]
        columns.append(flats[k][offsets[k][at] + rank % radix])
        rank = rank // radix
    assigned = np.stack(columns[::-1], axis=1)
    if sharing[assigned].all(axis=1).any():
        return None
    budget.spend(len(anchors))
    return Found(np.array(anchors, dtype=np.intp)[at], assigned)


def _choices(
    plan: SlotPlan, anchors: tuple[int, ...]
) -> tuple[IntArray, list[IntArray], list[IntArray]]:
    """Per slot and anchor: how many providers may fill it; per slot, those providers
    for every anchor one after another, and where each anchor's start."""
    counts = np.empty((len(plan.slots), len(anchors)), dtype=np.int64)
    flats: list[IntArray] = []
    offsets: list[IntArray] = []
    for k, slot in enumerate(plan.slots):
        members, shared = slot.members, slot.shared
        # members first, then sharing providers: the order of Slot.candidates
        chosen = [members.get(a, ()) + shared.get(a, ()) for a in anchors]
        counts[k] = list(map(len, chosen))
        total = int(counts[k].sum())
        flats.append(np.fromiter(chain.from_iterable(chosen), dtype=np.int64, count=total))
        offsets.append(np.cumsum(counts[k]) - counts[k])
    return counts, flats, offsets


def _taken(sizes: IntArray, want: int) -> tuple[IntArray, IntArray]:
    """(anchor position, rank within the anchor) of the first ``want`` candidates of
    the breadth-first interleaving, in order."""
    rounds = _rounds(sizes, want)
    each = np.minimum(sizes, rounds)
    at = np.repeat(np.arange(len(sizes)), each)
    starts = np.cumsum(each) - each
    rank = np.arange(int(each.sum()), dtype=np.int64) - np.repeat(starts, each)
    order = np.lexsort((at, rank))[:want]  # round first, then anchor
    return at[order], rank[order]


def _rounds(sizes: IntArray, want: int) -> int:
    """The fewest rounds that yield ``want`` candidates (all rounds when fewer exist)."""
    high = int(sizes.max())
    if int(sizes.sum()) <= want:
        return high
    low = 1  # invariant: ``high`` rounds are enough
    while low < high:
        mid = (low + high) // 2
        if int(np.minimum(sizes, mid).sum()) >= want:
            high = mid
        else:
            low = mid + 1
    return high
