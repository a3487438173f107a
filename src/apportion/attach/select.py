"""Select best entitlement groups: partial stacks first, then greedily the best group.

The greedy step scans the valid groups in the order they were validated (reverse
input order) and keeps a running best. A challenger replaces it when it is better on
the first criterion where they differ, in this order:

1. more still-needed products covered;
2. more host-specific (``requires_host``) pools;
3. higher average pool priority;
4. more virt_only pools;
5. smaller total quantity;
6. not stacked (over stacked);
7. provides a still-needed role or addon.

On an exact tie the running best stays, so the group met first — the later one in
the input — wins. A group offering nothing still needed is skipped, and once a
host-specific (or virt_only) group has become the best, groups with fewer such
pools are skipped.

Two exact implementations of that scan, chosen by size:

* small selections rescan the candidates every round (what the reference does; each
  round is a handful of integer comparisons per candidate);
* large ones (tens of thousands of groups, thousands of products: a scan per pick would
  be quadratic) keep the candidates in segment trees over their scan positions, keyed
  by the criteria, and find each round's winner with logarithmic queries: the running
  best of the scan only moves to a later candidate that beats it and has at least as
  many host-specific and virt_only pools (that is what the skipping amounts to), so the
  scan is followed by jumping from one best to the next ("the first later candidate
  of a class with at least these counts whose criteria are greater").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cmp_to_key

from apportion.attach.groups import GroupWork, Offer

CRITERIA = (
    "products_covered",
    "host_specific_pools",
    "average_priority",
    "virt_only_pools",
    "total_quantity",
    "unstacked",
    "provides_role_or_addon",
)

# Above this many (candidates × things still needed) the rounds use the segment trees;
# below it, rescanning is cheaper than building them. Both give the same picks.
SCAN_LIMIT = 60_000


@dataclass(slots=True)
class Pick:
    group: GroupWork
    reason: str
    new: tuple[Offer, ...]
    decided_by: str | None = None
    runner_up: str | None = None
    values: dict[str, object] = field(default_factory=dict)


class _Candidate:
    """A group's standing in the greedy selection, updated as needs are covered."""

    __slots__ = (
        "_qty",
        "count",
        "fresh",
        "group",
        "hs",
        "inter",
        "position",
        "rank",
        "sp",
        "total",
        "unstacked",
        "vo",
    )

    def __init__(self, group: GroupWork, fresh: frozenset[Offer], position: int) -> None:
        members = group.members
        self.group = group
        self.position = position
        self.hs = sum(1 for m in members if m.view.requires_host is not None)
        self.vo = sum(1 for m in members if m.view.virt_only)
        # The average priority is total / count (scaled); compared by cross-multiplying.
        self.total = sum(m.priority for m in members)
        self.count = len(members)
        self.unstacked = 0 if group.stackable else 1
        self.rank = 0  # dense rank of the average among the candidates (tree path only)
        self._qty: int | None = None
        self.update(fresh)

    def update(self, fresh: frozenset[Offer]) -> None:
        self.fresh = fresh
        inter = 0
        for kind, _ in fresh:
            if kind == "product":
                inter += 1
        self.inter = inter
        self.sp = 1 if len(fresh) > inter else 0

    @property
    def qty(self) -> int:
        if self._qty is None:
            self._qty = self.group.total_quantity()
        return self._qty

    def average(self) -> float:
        return self.total / (self.count * self.group.scale)


def _order(c: _Candidate, b: _Candidate) -> tuple[int, int]:
    """Compare ``c`` with ``b`` on the criteria: (sign, index of the deciding criterion).

    sign > 0 when ``c`` is better, < 0 when worse, 0 on an exact tie (index 7). The total
    quantity is only computed when the earlier criteria are level.
    """
    if c.inter != b.inter:
        return (1 if c.inter > b.inter else -1), 0
    if c.hs != b.hs:
        return (1 if c.hs > b.hs else -1), 1
    cross = c.total * b.count - b.total * c.count
    if cross:
        return (1 if cross > 0 else -1), 2
    if c.vo != b.vo:
        return (1 if c.vo > b.vo else -1), 3
    cq, bq = c.qty, b.qty
    if cq != bq:
        return (1 if cq < bq else -1), 4
    if c.unstacked != b.unstacked:
        return (1 if c.unstacked > b.unstacked else -1), 5
    if c.sp != b.sp:
        return (1 if c.sp > b.sp else -1), 6
    return 0, 7


def _metrics(c: _Candidate) -> dict[str, object]:
    return {
        "products_covered": c.inter,
        "host_specific_pools": c.hs,
        "average_priority": c.average(),
        "virt_only_pools": c.vo,
        "total_quantity": c.qty,
        "unstacked": not c.group.stackable,
        "provides_role_or_addon": bool(c.sp),
    }


def _explain(winner: _Candidate, runner: _Candidate | None, pick: Pick) -> None:
    """Name the runner-up (the best rival by the criteria, the first met on a tie) and
    the criterion that decided between them."""
    if runner is None:
        pick.decided_by = "only candidate"
        return
    pick.runner_up = runner.group.key
    chosen, other = _metrics(winner), _metrics(runner)
    pick.values = {name: {"chosen": chosen[name], "runner_up": other[name]} for name in CRITERIA}
    sign, index = _order(runner, winner)
    if sign == 0:
        pick.decided_by = "input order (on an exact tie the later pool wins)"
    elif sign > 0:
        pick.decided_by = (
            "host-specific/virt_only preference (the runner-up was skipped because it has "
            "fewer such pools than a group already preferred)"
        )
    else:
        pick.decided_by = CRITERIA[index]


def select(
    groups: Sequence[GroupWork], needed: set[Offer], partial_stacks: Sequence[str]
) -> list[Pick]:
    """Choose groups until nothing still needed can be covered; ``needed`` is consumed."""
    picks: list[Pick] = []
    chosen: set[str] = set()
    if partial_stacks:
        by_stack: dict[str | None, list[GroupWork]] = {}
        for group in groups:
            if group.stackable:
                by_stack.setdefault(group.stack_id, []).append(group)
        for stack_id in partial_stacks:
            for found in by_stack.get(stack_id, ()):
                if found.key not in chosen:
                    new = tuple(sorted(found.offers() & needed))
                    picks.append(Pick(found, "completes a partial stack", new))
                    chosen.add(found.key)
                    needed -= found.offers()
    candidates: list[_Candidate] = []
    for group in groups:
        if group.key not in chosen:
            fresh = group.offers() & needed
            if fresh:
                candidates.append(_Candidate(group, fresh, len(candidates)))
    if len(candidates) * len(needed) > SCAN_LIMIT:
        picks += _select_indexed(candidates, needed)
    else:
        picks += _select_scanning(candidates, needed)
    return picks


def _select_scanning(candidates: list[_Candidate], needed: set[Offer]) -> list[Pick]:
    picks: list[Pick] = []
    while candidates:
        best = candidates[0]
        for c in candidates:
            # Once the best has host-specific (virt_only) pools, groups with fewer are
            # skipped: the best's counts only grow from then on, so this is that rule.
            if c is best or c.hs < best.hs or c.vo < best.vo:
                continue
            if c.inter != best.inter:
                if c.inter > best.inter:
                    best = c
            elif c.hs != best.hs:
                if c.hs > best.hs:
                    best = c
            elif _order(c, best)[0] > 0:
                best = c
        runner: _Candidate | None = None
        for c in candidates:
            if c is not best and (runner is None or _order(c, runner)[0] > 0):
                runner = c
        covered = best.fresh
        pick = Pick(best.group, "best group", tuple(sorted(covered)))
        _explain(best, runner, pick)
        picks.append(pick)
        needed -= covered
        # Only groups offering what was just covered change; a group left with nothing
        # still needed can never offer anything again.
        remaining: list[_Candidate] = []
        for c in candidates:
            if c is best:
                continue
            if not c.fresh.isdisjoint(covered):
                fresh = c.fresh - covered
                if not fresh:
                    continue
                c.update(fresh)
            remaining.append(c)
        candidates = remaining
    return picks


# ---- the indexed rounds (large selections) ------------------------------------------

_DEAD: tuple[int, ...] = (-1,)  # below every live key (inter is never negative)


class _MaxTree:
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


def _exact_order(a: _Candidate, b: _Candidate) -> int:
    cross = a.total * b.count - b.total * a.count
    return (cross > 0) - (cross < 0)


def _key(c: _Candidate) -> tuple[int, ...]:
    """The criteria as one comparable tuple (greater = better); ties: earlier slot."""
    return (c.inter, c.hs, c.rank, c.vo, -c.qty, c.unstacked, c.sp)


def _select_indexed(candidates: list[_Candidate], needed: set[Offer]) -> list[Pick]:
    # Dense ranks of the exact average priorities, so every criterion is an integer.
    # Sorted by the float average (monotone in the exact one), then runs of equal floats
    # by the exact average (cross-multiplied).
    order = sorted(candidates, key=_Candidate.average)
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
    keys = [_key(c) for c in candidates]
    everyone = _MaxTree(keys)
    # One tree per (host-specific, virt_only) count pair, over that class's slots.
    classes: dict[tuple[int, int], list[int]] = {}
    for c in candidates:
        classes.setdefault((c.hs, c.vo), []).append(c.position)
    class_trees = {
        cls: (slots, _MaxTree([keys[s] for s in slots]), {s: j for j, s in enumerate(slots)})
        for cls, slots in classes.items()
    }
    by_offer: dict[Offer, list[_Candidate]] = {}
    for c in candidates:
        for offer in c.fresh:
            by_offer.setdefault(offer, []).append(c)
    alive = len(candidates)
    picks: list[Pick] = []

    def put(c: _Candidate, key: tuple[int, ...]) -> None:
        everyone.set(c.position, key)
        _, tree, where = class_trees[(c.hs, c.vo)]
        tree.set(where[c.position], key)

    while alive:
        best = _winner(candidates, everyone, class_trees)
        runner = _runner_up(candidates, everyone, best)
        covered = best.fresh
        pick = Pick(best.group, "best group", tuple(sorted(covered)))
        _explain(best, runner, pick)
        picks.append(pick)
        needed -= covered
        put(best, _DEAD)
        best.fresh = frozenset()
        alive -= 1
        touched: dict[int, _Candidate] = {}
        for offer in covered:
            for c in by_offer.get(offer, ()):
                if c.fresh:
                    touched[c.position] = c
        for c in touched.values():
            fresh = c.fresh - covered
            if fresh:
                c.update(fresh)
                put(c, _key(c))
            else:
                c.fresh = fresh
                put(c, _DEAD)
                alive -= 1
    return picks


def _winner(
    candidates: list[_Candidate],
    everyone: _MaxTree,
    class_trees: dict[tuple[int, int], tuple[list[int], _MaxTree, dict[int, int]]],
) -> _Candidate:
    """Where the scan's running best ends: from the first live candidate, jump to the
    first later candidate with at least its host-specific and virt_only counts and a
    greater key, until there is none."""
    if len(class_trees) == 1:
        # One class: nothing is ever skipped, the scan ends on the first greatest key.
        return candidates[everyone.first_at_least(0, everyone.top(), strict=False)]
    best = candidates[everyone.first_at_least(0, (0,), strict=False)]
    while True:
        key = _key(best)
        following = -1
        for (hs, vo), (slots, tree, _) in class_trees.items():
            if hs < best.hs or vo < best.vo:
                continue
            j = tree.first_at_least(_after(slots, best.position), key, strict=True)
            if j >= 0 and (following < 0 or slots[j] < following):
                following = slots[j]
        if following < 0:
            return best
        best = candidates[following]


def _after(slots: list[int], position: int) -> int:
    """The index of the first slot after ``position`` in the sorted ``slots``."""
    lo, hi = 0, len(slots)
    while lo < hi:
        mid = (lo + hi) // 2
        if slots[mid] <= position:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _runner_up(
    candidates: list[_Candidate], everyone: _MaxTree, best: _Candidate
) -> _Candidate | None:
    """The first live candidate other than ``best`` with the greatest key."""
    saved = everyone.tree[everyone.size + best.position]
    everyone.set(best.position, _DEAD)
    top = everyone.top()
    found = None if top == _DEAD else candidates[everyone.first_at_least(0, top, strict=False)]
    everyone.set(best.position, saved)
    return found
