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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

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


@dataclass(slots=True)
class Pick:
    group: GroupWork
    reason: str
    new: tuple[Offer, ...]
    decided_by: str | None = None
    runner_up: str | None = None
    values: dict[str, object] = field(default_factory=dict)


class _Static:
    """What does not change between rounds: a group's pools, counts and offers."""

    __slots__ = ("group", "hs", "offers", "vo")

    def __init__(self, group: GroupWork) -> None:
        self.group = group
        self.offers = group.offers()
        self.hs = group.host_specific()
        self.vo = group.virt_only()


class _Candidate:
    """A group's standing in the greedy selection, updated as needs are covered."""

    __slots__ = ("_head", "_qty", "fresh", "group", "hs", "inter", "sp", "static", "vo")

    def __init__(self, static: _Static, fresh: frozenset[Offer]) -> None:
        self.static = static
        self.group = static.group
        self.hs = static.hs
        self.vo = static.vo
        self._qty: int | None = None
        self.update(fresh)

    def update(self, fresh: frozenset[Offer]) -> None:
        self.fresh = fresh
        self.inter = sum(1 for kind, _ in fresh if kind == "product")
        self.sp = len(fresh) > self.inter
        self._head: tuple[int, int, tuple[float, Fraction], int] | None = None

    @property
    def qty(self) -> int:
        if self._qty is None:
            self._qty = self.group.total_quantity()
        return self._qty

    def head(self) -> tuple[int, int, tuple[float, Fraction], int]:
        if self._head is None:
            self._head = (self.inter, self.hs, _exact(self.group.average_priority()), self.vo)
        return self._head

    def key(self) -> tuple[int, int, tuple[float, Fraction], int, int, int, int]:
        return (
            *self.head(),
            -self.qty,
            0 if self.group.stackable else 1,
            1 if self.sp else 0,
        )


def _exact(value: Fraction) -> tuple[float, Fraction]:
    """An exact sort key that compares fast: rounding to float is monotone, so floats
    decide whenever they differ and the exact value only breaks float ties."""
    return (float(value), value)


def _beats(c: _Candidate, best: _Candidate) -> bool:
    """The reference's chain of comparisons (qty only computed when it is reached)."""
    if c.inter != best.inter:
        return c.inter > best.inter
    if c.hs != best.hs:
        return c.hs > best.hs
    # Averages compared exactly without building fractions: a/n > b/m ⇔ a·m > b·n.
    total, count = c.group.priority_sum()
    best_total, best_count = best.group.priority_sum()
    if total * best_count != best_total * count:
        return total * best_count > best_total * count
    if c.vo != best.vo:
        return c.vo > best.vo
    if c.qty != best.qty:
        return c.qty < best.qty
    if c.group.stackable != best.group.stackable:
        return not c.group.stackable
    return c.sp and not best.sp


def _metrics(c: _Candidate) -> dict[str, object]:
    return {
        "products_covered": c.inter,
        "host_specific_pools": c.hs,
        "average_priority": float(c.group.average_priority()),
        "virt_only_pools": c.vo,
        "total_quantity": c.qty,
        "unstacked": not c.group.stackable,
        "provides_role_or_addon": c.sp,
    }


def _explain(winner: _Candidate, rivals: Sequence[_Candidate], pick: Pick) -> None:
    if not rivals:
        pick.decided_by = "only candidate"
        return
    # The runner-up is the best rival by the same criteria; total quantity is only
    # computed for rivals level with it on the criteria before it.
    head = max(c.head() for c in rivals)
    runner = max((c for c in rivals if c.head() == head), key=_Candidate.key)
    wkey, rkey = winner.key(), runner.key()
    pick.runner_up = runner.group.key
    chosen, other = _metrics(winner), _metrics(runner)
    pick.values = {name: {"chosen": chosen[name], "runner_up": other[name]} for name in CRITERIA}
    if rkey == wkey:
        pick.decided_by = "input order (on an exact tie the later pool wins)"
        return
    if rkey > wkey:
        pick.decided_by = (
            "host-specific/virt_only preference (the runner-up was skipped because it has "
            "fewer such pools than a group already preferred)"
        )
        return
    for name, w, r in zip(CRITERIA, wkey, rkey, strict=True):
        if w != r:
            pick.decided_by = name
            return


def select(
    groups: Sequence[GroupWork], needed: set[Offer], partial_stacks: Sequence[str]
) -> list[Pick]:
    """Choose groups until nothing still needed can be covered; ``needed`` is consumed."""
    picks: list[Pick] = []
    chosen: set[str] = set()
    for stack_id in partial_stacks:
        for group in groups:
            if group.stackable and group.stack_id == stack_id and group.key not in chosen:
                new = tuple(sorted(group.offers() & needed))
                picks.append(Pick(group, "completes a partial stack", new))
                chosen.add(group.key)
                needed -= group.offers()
    candidates: list[_Candidate] = []
    for group in groups:
        if group.key not in chosen:
            static = _Static(group)
            fresh = static.offers & needed
            if fresh:
                candidates.append(_Candidate(static, fresh))
    while candidates:
        best: _Candidate | None = None
        host_found = virt_found = False
        for c in candidates:
            if best is not None and (
                (host_found and c.hs < best.hs) or (virt_found and c.vo < best.vo)
            ):
                continue
            if best is None or _beats(c, best):
                best = c
                host_found = host_found or c.hs > 0
                virt_found = virt_found or c.vo > 0
        assert best is not None
        winner = best.group
        covered = best.fresh
        pick = Pick(winner, "best group", tuple(sorted(covered)))
        _explain(best, [c for c in candidates if c is not best], pick)
        picks.append(pick)
        needed -= covered
        # Only groups offering what was just covered change; a group left with nothing
        # still needed can never offer anything again.
        remaining: list[_Candidate] = []
        for c in candidates:
            if c is best:
                continue
            if c.fresh & covered:
                fresh = c.fresh - covered
                if not fresh:
                    continue
                c.update(fresh)
            remaining.append(c)
        candidates = remaining
    return picks
