"""The search's answer computed as arrays, when its products are small enough.

Per anchor, the plain search (:mod:`search`) yields, in lexicographic order of the
slots in visiting order (``SearchSpec.order``), every choice of the *bound* slots
that satisfies the rules between slots, each followed by the Cartesian product of
the *free* slots' providers; the answer interleaves the anchors breadth-first
(:func:`~apportion.placement.search.round_robin`): round ``t`` takes the ``t``-th
candidate of every anchor that has one, anchors ascending.

Here the same is computed with numpy: every combination of the bound slots'
providers of every anchor is a row (in that lexicographic order), the rules are
checked on whole columns (capacity, isolate, same_subtree, the unsuffixed group's
traits — each exactly as the search checks a complete choice), and which (anchor,
rank) pairs the interleaving takes is plain arithmetic, the free slots' providers
following from the rank in mixed radix (the last slot varies fastest).

The result is exactly what the plain search gives (tests/unit/placement/
test_product_fast_path.py). Where the search would do what this does not model, this
declines (returns None) and the search runs: a candidate made only of sharing
providers (it may come from two anchors and be de-duplicated), a step budget the
search might run out of, or more rows than :func:`max_rows` (where the search,
stopping at ``want`` candidates, may prune most of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from apportion.placement.model import BoolArray, Forest
from apportion.placement.search import Budget, SearchSpec
from apportion.placement.shapes import Found
from apportion.placement.slots import ByRoot, SlotPlan

IntArray = npt.NDArray[np.int64]
# The search prunes where rows are all enumerated here: past this many rows of bound
# choices (memory, and work the search would not do) the search runs instead.
MAX_ROWS = 1 << 18


def max_rows(want: int) -> int:
    """How many rows of bound choices are enumerated for ``want`` candidates at most:
    a small ``limit`` is answered by a search that stops early."""
    return min(MAX_ROWS, 64 * want + 4096)


@dataclass(frozen=True, slots=True)
class _Choices:
    """Per position (visiting order) and anchor, the providers that may fill it."""

    counts: IntArray  # (positions, anchors): how many
    flats: list[IntArray]  # per position: every anchor's providers, one after another
    offsets: list[IntArray]  # per position: where each anchor's providers start

    def column(self, k: int, at: IntArray, index: IntArray) -> IntArray:
        """The ``index``-th provider of position ``k`` for anchors ``at``."""
        column: IntArray = self.flats[k][self.offsets[k][at] + index]
        return column


def product_candidates(
    forest: Forest, plan: SlotPlan, spec: SearchSpec, want: int, budget: Budget
) -> Found | None:
    """The first ``want`` candidates in answer order, or None (module docstring)."""
    anchors = plan.anchors
    if want < len(anchors):
        # The first round may end after ``want`` anchors: when each has a candidate.
        found = _answer(forest, plan, spec, anchors[:want], want, budget)
        if found is not None and len(found) == want and (np.diff(found.anchors) > 0).all():
            return found
    return _answer(forest, plan, spec, anchors, want, budget)


def _answer(
    forest: Forest,
    plan: SlotPlan,
    spec: SearchSpec,
    anchors: tuple[int, ...],
    want: int,
    budget: Budget,
) -> Found | None:
    choices = _choices(plan, spec, anchors)
    counts, bound = choices.counts.astype(np.float64), spec.bound_count
    if _steps(counts[:bound]) > budget.left:
        return None
    if (
        np.prod(counts[:bound], axis=0).sum() > max_rows(want)
        or np.prod(counts, axis=0).max() >= 2**62
    ):
        return None
    owner, columns = _bound_rows(choices, bound)
    valid = _valid(forest, plan, spec, columns, len(owner))
    owner, columns = owner[valid], [c[valid] for c in columns]
    kept = np.bincount(owner, minlength=len(anchors))
    first_row = np.cumsum(kept) - kept
    free = np.prod(choices.counts[bound:], axis=0)
    at, rank = _taken(kept * free, want)
    rows = first_row[at] + rank // free[at]
    picked = [c[rows] for c in columns]
    rank = rank % free[at]
    tail = []
    for k in reversed(range(bound, len(choices.flats))):
        radix = choices.counts[k][at]
        tail.append(choices.column(k, at, rank % radix))
        rank = rank // radix
    by_position = picked + tail[::-1]
    assigned = np.empty((len(at), len(by_position)), dtype=np.intp)
    for i, slot in enumerate(spec.order):
        assigned[:, slot] = by_position[i]
    if _sharing(forest)[assigned].all(axis=1).any():
        return None
    return Found(np.array(anchors, dtype=np.intp)[at], assigned)


def _choices(plan: SlotPlan, spec: SearchSpec, anchors: tuple[int, ...]) -> _Choices:
    counts = np.empty((len(plan.slots), len(anchors)), dtype=np.int64)
    flats: list[IntArray] = []
    offsets: list[IntArray] = []
    at = np.array(anchors, dtype=np.int64)
    for i, k in enumerate(spec.order):
        flat, counts[i] = _joined(at, plan.slots[k].members, plan.slots[k].shared)
        flats.append(flat)
        offsets.append(np.cumsum(counts[i]) - counts[i])
    return _Choices(counts, flats, offsets)


def _joined(at: IntArray, members: ByRoot, shared: ByRoot) -> tuple[IntArray, IntArray]:
    """Every anchor's members, then its sharing providers, one anchor after another
    (as ``members.get(a, ()) + shared.get(a, ())`` for each anchor ``a`` of ``at``), and
    how many each anchor has."""
    m_start, m_count = members.spans(at)
    s_start, s_count = shared.spans(at)
    count = m_count + s_count
    offset = np.cumsum(count) - count
    flat = np.empty(int(count.sum()), dtype=np.int64)
    for start, n, source, first in (
        (m_start, m_count, members.providers, offset),
        (s_start, s_count, shared.providers, offset + m_count),
    ):
        owner = np.repeat(np.arange(len(at)), n)
        rank = np.arange(len(owner)) - np.repeat(np.cumsum(n) - n, n)
        flat[first[owner] + rank] = source[start[owner] + rank]
    return flat, count


def _steps(counts: npt.NDArray[np.float64]) -> float:
    """At most how many steps the search spends on these anchors: one for a product;
    else the first position's options, and each later position's options every time
    the positions before it are placed (at most every combination of them)."""
    if not len(counts):
        return float(counts.shape[1])
    spent = counts[0].copy()
    placed = np.ones(counts.shape[1])
    for k in range(len(counts) - 1):
        placed = placed * counts[k]
        spent += placed * counts[k + 1]
    return float(spent.sum())


def _bound_rows(choices: _Choices, bound: int) -> tuple[IntArray, list[IntArray]]:
    """Every combination of the bound positions' providers, anchor by anchor, in
    lexicographic order: each row's anchor (position in ``anchors``) and the columns."""
    sizes = np.prod(choices.counts[:bound], axis=0)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    rank = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    columns = []
    for k in reversed(range(bound)):
        radix = choices.counts[k][owner]
        columns.append(choices.column(k, owner, rank % radix))
        rank = rank // radix
    return owner, columns[::-1]


def _valid(
    forest: Forest, plan: SlotPlan, spec: SearchSpec, columns: list[IntArray], rows: int
) -> BoolArray:
    """Which of ``rows`` rows of bound choices satisfy every rule between slots."""
    ok = np.ones(rows, dtype=np.bool_)
    isolated = sorted(spec.isolated)
    for i, k in enumerate(isolated):
        for m in isolated[:i]:
            ok &= columns[k] != columns[m]
    ok &= _capacity(forest, spec, columns, rows)
    for members in _subtree_positions(spec):
        ok &= _same_subtree(forest, [columns[k] for k in members])
    if spec.collective_at >= 0:
        for clause in plan.collective:
            has = _with_any(forest, clause)
            ok &= np.logical_or.reduce([has[columns[k]] for k in spec.unsuffixed])
    return ok


def _capacity(forest: Forest, spec: SearchSpec, columns: list[IntArray], rows: int) -> BoolArray:
    """Amounts of one class on one provider, summed over the positions, within its
    headroom (free capacity and max_unit), at every position that asks for it."""
    ok = np.ones(rows, dtype=np.bool_)
    asks: dict[str, list[tuple[int, int]]] = {}
    for k, checked in enumerate(spec.checked):
        for rc, amount in checked:
            asks.setdefault(rc, []).append((k, amount))
    for rc, positions in asks.items():
        inv = forest.inventories[rc]
        room = np.full(forest.size, -1, dtype=np.int64)
        room[inv.providers] = np.minimum(inv.capacity - inv.used, inv.max_unit)
        for k, _ in positions:
            load = np.zeros(rows, dtype=np.int64)
            for m, amount in positions:
                load += np.where(columns[m] == columns[k], amount, 0)
            ok &= load <= room[columns[k]]
    return ok


def _subtree_positions(spec: SearchSpec) -> list[list[int]]:
    """The positions of each same_subtree."""
    out: list[list[int]] = [[] for _ in range(spec.subtree_count)]
    for k, entries in enumerate(spec.subtrees):
        for j, _, _ in entries:
            out[j].append(k)
    return out


def _same_subtree(forest: Forest, chosen: list[IntArray]) -> BoolArray:
    """Rows whose providers have a lowest common ancestor that is one of them."""
    parents = np.array(forest.parents, dtype=np.int64)
    depths = np.array(forest.depths, dtype=np.int64)
    top = chosen[0]
    for other in chosen[1:]:
        top = _lowest_common(top, other, parents, depths, forest.roots_array)
    ok: BoolArray = top >= 0
    among: BoolArray = np.logical_or.reduce([c == top for c in chosen])
    return ok & among


def _lowest_common(
    a: IntArray, b: IntArray, parents: IntArray, depths: IntArray, roots: IntArray
) -> IntArray:
    """Per row, the deepest provider above or equal to both; -1 for different trees
    (or where ``a`` is already -1)."""
    same = (a >= 0) & (roots[np.maximum(a, 0)] == roots[b])
    a, b = np.where(same, a, 0), np.where(same, b, 0)
    for x, y in ((a, b), (b, a)):
        deeper = depths[x] > depths[y]
        while deeper.any():
            x[deeper] = parents[x[deeper]]
            deeper = depths[x] > depths[y]
    apart = a != b
    while apart.any():
        a[apart], b[apart] = parents[a[apart]], parents[b[apart]]
        apart = a != b
    return np.where(same, a, -1)


def _with_any(forest: Forest, traits: frozenset[str]) -> BoolArray:
    out = np.zeros(forest.size, dtype=np.bool_)
    for trait in traits:
        out |= forest.with_trait(trait)
    return out


def _sharing(forest: Forest) -> BoolArray:
    return forest.mask(np.fromiter(forest.sharing, dtype=np.int64, count=len(forest.sharing)))


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
    high = int(sizes.max()) if len(sizes) else 0
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
