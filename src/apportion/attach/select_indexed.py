"""The greedy selection's scan, followed through segment trees (large selections).

Tens of thousands of groups and thousands of products make a rescan per pick
quadratic. The running best of a scan only moves to a later candidate that passes the
skipping rules and beats it (see :mod:`.ranking`), so each round is followed by jumping
from one best to the next: "the first later candidate, of a (host-specific, virt_only)
class the skipping rules let through, whose rules-in-order key beats the best's".

Every rule is made an integer: the exact average priorities become dense ranks. The
last rule is not a plain comparison (at a tie, the challenger wins if the best is
stacked and it is not, or if it provides a role or addon), so each class keeps two
trees whose last key component is what wins against an unstacked best (``sp``) and
what wins against a stacked one (``sp`` or unstacked); "beats the best" is then "key
greater than the best's first five rules followed by 0".
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cmp_to_key

from apportion.attach.needs import Offer
from apportion.attach.ranking import (
    VIRT_ONLY,
    Candidate,
    Pick,
    challenge,
    explain_pick,
    rival_key,
)

_DEAD: tuple[int, ...] = (-(1 << 62),)  # below every live key


class MaxTree:
    """Maximum over a fixed range of slots, with point updates and first-index searches."""

    __slots__ = ("size", "tree")

    def __init__(self, values: Sequence[tuple[int, ...]]) -> None:
        size = 1
        while size < max(len(values), 1):
            size *= 2
        self.size = size
        tree = [_DEAD] * (2 * size)
        tree[size : size + len(values)] = values
        for i in range(size - 1, 0, -1):
            left, right = tree[2 * i], tree[2 * i + 1]
            tree[i] = left if left >= right else right
        self.tree = tree

    def set(self, index: int, value: tuple[int, ...]) -> None:
        tree = self.tree
        i = index + self.size
        tree[i] = value
        i //= 2
        while i:
            left, right = tree[2 * i], tree[2 * i + 1]
            tree[i] = left if left >= right else right
            i //= 2

    def top(self) -> tuple[int, ...]:
        return self.tree[1]

    def first_at_least(self, start: int, bound: tuple[int, ...], strict: bool) -> int:
        """The first slot ≥ ``start`` whose value is ≥ ``bound`` (> when ``strict``), or −1."""
        tree, size = self.tree, self.size
        if start >= size:
            return -1

        def fits(value: tuple[int, ...]) -> bool:
            return value > bound if strict else value >= bound

        # Walk up from the start leaf, checking the right siblings of the path, then
        # descend into the first subtree that holds a fitting value.
        i = start + size
        if fits(tree[i]):
            return start
        while i > 1:
            if i % 2 == 0 and fits(tree[i + 1]):
                i += 1
                while i < size:
                    i = 2 * i if fits(tree[2 * i]) else 2 * i + 1
                return i - size
            i //= 2
        return -1


def _exact_order(a: Candidate, b: Candidate) -> int:
    cross = a.total * b.count - b.total * a.count
    return (cross > 0) - (cross < 0)


def _rank_averages(candidates: Sequence[Candidate]) -> None:
    """Dense ranks of the exact average priorities: sorted by the float average (monotone
    in the exact one), then runs of equal floats by the exact average."""
    order = sorted(candidates, key=Candidate.average)
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and order[end].average() == order[start].average():
            end += 1
        if end - start > 1:
            order[start:end] = sorted(order[start:end], key=cmp_to_key(_exact_order))
        start = end
    rank, previous = 0, None
    for c in order:
        if previous is not None and c.total * previous.count != previous.total * c.count:
            rank += 1
        c.rank = rank
        previous = c


def _first_five(c: Candidate, products_first: bool) -> tuple[int, ...]:
    return (c.inter if products_first else 0, c.hs, c.rank, c.vo, -c.qty)


def _beats_unstacked(c: Candidate, products_first: bool) -> tuple[int, ...]:
    return (*_first_five(c, products_first), c.sp)


def _beats_stacked(c: Candidate, products_first: bool) -> tuple[int, ...]:
    return (*_first_five(c, products_first), max(c.sp, c.unstacked))


class _Class:
    """The candidates of one (host-specific, virt_only) count pair, in scan order."""

    __slots__ = ("slots", "stacked", "unstacked", "where")

    def __init__(self, slots: list[int], candidates: Sequence[Candidate], pf: bool) -> None:
        self.slots = slots
        self.where = {s: j for j, s in enumerate(slots)}
        self.unstacked = MaxTree([_beats_unstacked(candidates[s], pf) for s in slots])
        self.stacked = MaxTree([_beats_stacked(candidates[s], pf) for s in slots])

    def after(self, position: int) -> int:
        """The index of the first slot after ``position``."""
        lo, hi = 0, len(self.slots)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.slots[mid] <= position:
                lo = mid + 1
            else:
                hi = mid
        return lo


class _Index:
    def __init__(self, candidates: list[Candidate], products_first: bool) -> None:
        _rank_averages(candidates)
        self.candidates = candidates
        self.pf = products_first
        self.everyone = MaxTree([rival_key(c, products_first) for c in candidates])
        slots: dict[tuple[int, int], list[int]] = {}
        for c in candidates:
            slots.setdefault((c.hs, c.vo), []).append(c.position)
        self.classes = {k: _Class(v, candidates, products_first) for k, v in slots.items()}

    def put(self, c: Candidate, alive: bool) -> None:
        pf = self.pf
        self.everyone.set(c.position, rival_key(c, pf) if alive else _DEAD)
        cls = self.classes[(c.hs, c.vo)]
        j = cls.where[c.position]
        cls.unstacked.set(j, _beats_unstacked(c, pf) if alive else _DEAD)
        cls.stacked.set(j, _beats_stacked(c, pf) if alive else _DEAD)

    def winner(self) -> tuple[Candidate, bool]:
        """Where the scan's running best ends, and whether virt_only decided on the way."""
        best = self.candidates[self.everyone.first_at_least(0, (-(1 << 61),), strict=False)]
        virt_only_found = False
        while True:
            bound = (*_first_five(best, self.pf), 0)
            following = -1
            for (hs, vo), cls in self.classes.items():
                if hs < best.hs or (virt_only_found and vo < best.vo):
                    continue
                tree = cls.stacked if best.stacked else cls.unstacked
                j = tree.first_at_least(cls.after(best.position), bound, strict=True)
                if j >= 0 and (following < 0 or cls.slots[j] < following):
                    following = cls.slots[j]
            if following < 0:
                return best, virt_only_found
            nxt = self.candidates[following]
            virt_only_found = virt_only_found or challenge(nxt, best, self.pf)[1] == VIRT_ONLY
            best = nxt

    def runner_up(self, best: Candidate) -> Candidate | None:
        """The first live candidate other than ``best`` with the greatest rival key."""
        everyone = self.everyone
        saved = everyone.tree[everyone.size + best.position]
        everyone.set(best.position, _DEAD)
        top = everyone.top()
        found = None
        if top != _DEAD:
            found = self.candidates[everyone.first_at_least(0, top, strict=False)]
        everyone.set(best.position, saved)
        return found


def select_indexed(
    candidates: list[Candidate], needed: set[Offer], products_first: bool, explain: bool = True
) -> list[Pick]:
    """:func:`.select`'s greedy rounds over an index of the candidates; ``explain``: name
    each pick's runner-up and deciding rule (the explanation's, not the answer's)."""
    index = _Index(candidates, products_first)
    by_offer: dict[Offer, list[Candidate]] = {}
    for c in candidates:
        for offer in c.fresh:
            by_offer.setdefault(offer, []).append(c)
    alive = len(candidates)
    picks: list[Pick] = []
    while alive:
        best, virt_only_found = index.winner()
        covered = best.fresh
        pick = Pick(best.group, "best group", tuple(sorted(covered)))
        if explain:
            explain_pick(best, index.runner_up(best), pick, products_first, virt_only_found)
        picks.append(pick)
        needed -= covered
        index.put(best, alive=False)
        best.fresh = frozenset()
        alive -= 1
        touched: dict[int, Candidate] = {}
        for offer in covered:
            for c in by_offer.get(offer, ()):
                if c.fresh:
                    touched[c.position] = c
        for c in touched.values():
            c.update(c.fresh - covered)
            index.put(c, alive=bool(c.fresh))
            alive -= 0 if c.fresh else 1
    return picks
