"""Select best entitlement groups: partial stacks first, then greedily the best group.

Each round scans the candidate groups in the order they were validated (reverse input
order) and keeps a running best, as rules.js ``find_best_ent_group`` does. A challenger
replaces the running best when it wins at the first rule where they differ:

1. (``seed`` profile only) more still-needed products covered — the candlepin-*
   profiles never compare this: a group covering nothing still needed is left out,
   every other group competes on the rules below alone;
2. more host-specific (``requires_host``) pools;
3. higher average pool priority;
4. more virt_only pools;
5. smaller total quantity;
6. then, on a tie of all the above, the challenger wins if the running best is stacked
   and the challenger is not, or if the challenger provides a still-needed role or
   addon (whatever the running best provides). Otherwise the running best stays, so
   on an exact tie the group met first — the later one in the input — wins.

Partial stacks come first (:func:`select`). The candlepin-* profiles take only their
products off what is still needed and keep them among the candidates, as rules.js
does: a partial stack carrying a still-needed role or addon competes for it in the
rounds like any other group, and may be picked a second time for it.

Two skipping rules make the outcome depend on the scan order: once the running best
has host-specific pools, groups with fewer are skipped; once a group has become the
running best by winning on the virt_only rule (4), groups with fewer virt_only pools
than the running best are skipped. A running best that merely happens to have
virt_only pools does not make others skip.

Large selections (:data:`SCAN_LIMIT`) follow the same scan through segment trees
(:mod:`.select_indexed`) instead of rescanning every round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from apportion.attach.groups import GroupWork
from apportion.attach.needs import Offer

PRODUCTS, HOST_SPECIFIC, AVERAGE, VIRT_ONLY, QUANTITY, UNSTACKED, ROLE_OR_ADDON, TIE = range(8)
# The name the explanation gives each rule (index as above).
RULES = (
    "products_covered",
    "host_specific_pools",
    "average_priority",
    "virt_only_pools",
    "total_quantity",
    "unstacked",
    "provides_role_or_addon",
    "input order (on an exact tie the later pool wins)",
)
SKIPPED_HOST_SPECIFIC = (
    "host_specific_pools (the runner-up, met later, was skipped: it has fewer host-specific "
    "pools than the running best)"
)
SKIPPED_VIRT_ONLY = (
    "virt_only_pools (the runner-up, met later, was skipped: it has fewer virt_only pools "
    "than the running best, which had won on virt_only_pools)"
)
PARTIAL_STACK = "partial stack: the rules complete partial stacks before choosing any other group"
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


class Candidate:
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
        "stacked",
        "total",
        "unstacked",
        "vo",
    )

    def __init__(self, group: GroupWork, fresh: frozenset[Offer], position: int) -> None:
        members = group.members
        self.group = group
        self.position = position
        if len(members) == 1:  # most groups: no generators for one pool
            view = members[0].view
            self.hs = 0 if view.requires_host is None else 1
            self.vo = 1 if view.virt_only else 0
            self.total = members[0].priority
        else:
            self.hs = sum(1 for m in members if m.view.requires_host is not None)
            self.vo = sum(1 for m in members if m.view.virt_only)
            # The average priority is total / count (scaled); compared by cross-multiplying.
            self.total = sum(m.priority for m in members)
        self.count = len(members)
        self.stacked = group.stackable
        self.unstacked = 0 if group.stackable else 1
        self.rank = 0  # dense rank of the average among the candidates (indexed path only)
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


def challenge(c: Candidate, best: Candidate, products_first: bool) -> tuple[bool, int]:
    """Whether ``c`` replaces the running best ``best``, and the rule that decided it.

    The total quantity is only computed when the earlier rules are level.
    """
    if products_first and c.inter != best.inter:
        return c.inter > best.inter, PRODUCTS
    if c.hs != best.hs:
        return c.hs > best.hs, HOST_SPECIFIC
    cross = c.total * best.count - best.total * c.count
    if cross:
        return cross > 0, AVERAGE
    if c.vo != best.vo:
        return c.vo > best.vo, VIRT_ONLY
    cq, bq = c.qty, best.qty
    if cq != bq:
        return cq < bq, QUANTITY
    if best.stacked and not c.stacked:
        return True, UNSTACKED
    if c.sp:
        return True, ROLE_OR_ADDON
    return False, UNSTACKED if c.stacked and not best.stacked else TIE


def skipped(c: Candidate, best: Candidate, virt_only_found: bool) -> str | None:
    """The skipping rule that keeps ``c`` from challenging ``best``, if any."""
    if c.hs < best.hs:
        return SKIPPED_HOST_SPECIFIC
    if virt_only_found and c.vo < best.vo:
        return SKIPPED_VIRT_ONLY
    return None


def scan(candidates: Sequence[Candidate], products_first: bool) -> tuple[Candidate, bool]:
    """The running best at the end of one round's scan (``candidates`` is not empty), and
    whether a group won on the virt_only rule on the way (so fewer virt_only pools skip)."""
    best = candidates[0]
    virt_only_found = False
    for c in candidates:
        if c is best or c.hs < best.hs or (virt_only_found and c.vo < best.vo):
            continue
        # Most challengers lose on the average priority: that rule is inlined for the
        # candlepin-* profiles, challenge() decides the rest.
        if not products_first and c.hs == best.hs:
            cross = c.total * best.count - best.total * c.count
            if cross < 0:
                continue
            if cross > 0:
                best = c
                continue
        wins, rule = challenge(c, best, products_first)
        if wins:
            best = c
            virt_only_found = virt_only_found or rule == VIRT_ONLY
    return best, virt_only_found


def rival_key(c: Candidate, products_first: bool) -> tuple[int, ...]:
    """The rules in order as one comparable tuple (greater = closer to winning)."""
    return (c.inter if products_first else 0, c.hs, c.rank, c.vo, -c.qty, c.unstacked, c.sp)


def runner_up_of(
    candidates: Sequence[Candidate], winner: Candidate, products_first: bool
) -> Candidate | None:
    """The closest rival: the best of the others by the rules in order (first met on a tie)."""
    runner: Candidate | None = None
    for c in candidates:
        if c is winner:
            continue
        if runner is None:
            runner = c
            continue
        # Most rivals differ on the average priority: that rule is inlined for the
        # candlepin-* profiles (as in scan), _better_rival decides the rest.
        if not products_first and c.hs == runner.hs:
            cross = c.total * runner.count - runner.total * c.count
            if cross < 0:
                continue
            if cross > 0:
                runner = c
                continue
        if _better_rival(c, runner, products_first):
            runner = c
    return runner


def _better_rival(c: Candidate, other: Candidate, products_first: bool) -> bool:
    if products_first and c.inter != other.inter:
        return c.inter > other.inter
    if c.hs != other.hs:
        return c.hs > other.hs
    cross = c.total * other.count - other.total * c.count
    if cross:
        return cross > 0
    return (c.vo, -c.qty, c.unstacked, c.sp) > (other.vo, -other.qty, other.unstacked, other.sp)


def decided_by(
    winner: Candidate, runner: Candidate, products_first: bool, virt_only_found: bool
) -> str:
    """The rule that put ``winner`` before ``runner`` in the scan.

    Met after the winner, the runner-up was skipped or lost its challenge against it
    (``virt_only_found`` is the scan's state then: it only changes when the running best
    does). Met before, it was the running best the winner displaced, or it had already
    lost to a group the winner then beat.
    """
    if runner.position > winner.position:
        skip = skipped(runner, winner, virt_only_found)
        return skip if skip is not None else RULES[challenge(runner, winner, products_first)[1]]
    wins, rule = challenge(winner, runner, products_first)
    if wins:
        return RULES[rule]
    return (
        "scan order: the runner-up had already lost to a group the chosen group then "
        "beat (each group is compared with the running best only)"
    )


def _metrics(c: Candidate) -> dict[str, object]:
    return {
        "products_covered": c.inter,
        "host_specific_pools": c.hs,
        "average_priority": c.average(),
        "virt_only_pools": c.vo,
        "total_quantity": c.qty,
        "unstacked": not c.stacked,
        "provides_role_or_addon": bool(c.sp),
    }


def explain_pick(
    winner: Candidate,
    runner: Candidate | None,
    pick: Pick,
    products_first: bool,
    virt_only_found: bool,
) -> None:
    """Name the runner-up and the rule that decided between it and the winner."""
    if runner is None:
        pick.decided_by = "only candidate"
        return
    pick.runner_up = runner.group.key
    chosen, other = _metrics(winner), _metrics(runner)
    names = RULES[PRODUCTS : ROLE_OR_ADDON + 1] if products_first else RULES[HOST_SPECIFIC:TIE]
    pick.values = {name: {"chosen": chosen[name], "runner_up": other[name]} for name in names}
    pick.decided_by = decided_by(winner, runner, products_first, virt_only_found)


def _partial_stack_picks(
    groups: Sequence[GroupWork],
    needed: set[Offer],
    partial_stacks: Sequence[str],
    products_only: bool,
) -> list[Pick]:
    picks: list[Pick] = []
    chosen: set[str] = set()
    by_stack: dict[str | None, list[GroupWork]] = {}
    for group in groups:
        if group.stackable:
            by_stack.setdefault(group.stack_id, []).append(group)
    for stack_id in partial_stacks:
        for found in by_stack.get(stack_id, ()):
            if found.key not in chosen:
                covered = found.offers() & needed
                if products_only:
                    covered = frozenset(o for o in covered if o[0] == "product")
                new = tuple(sorted(covered))
                picks.append(Pick(found, "completes a partial stack", new, PARTIAL_STACK))
                chosen.add(found.key)
                needed -= covered
    return picks


def select(
    groups: Sequence[GroupWork],
    needed: set[Offer],
    partial_stacks: Sequence[str],
    products_first: bool = False,
    *,
    partials_cover_products_only: bool = False,
) -> list[Pick]:
    """Choose groups until nothing still needed can be covered; ``needed`` is consumed.

    ``groups`` are in scan order; ``products_first`` is the ``seed`` profile's rule 1.

    ``partials_cover_products_only`` is rules.js ``get_best_entitlement_groups``: a
    partial stack's group takes only its products off what is still needed, so a role
    or addon it carries is still needed in the greedy rounds, where the same group
    stays a candidate (it is never left out of ``find_best_ent_group``'s groups) and
    competes for it with every other group. Otherwise (the seed's reading) the partial
    stack provides everything it offers and takes no part in the greedy rounds.
    """
    picks = (
        _partial_stack_picks(groups, needed, partial_stacks, partials_cover_products_only)
        if partial_stacks
        else []
    )
    chosen: set[str] = set() if partials_cover_products_only else {p.group.key for p in picks}
    candidates: list[Candidate] = []
    for group in groups:
        if group.key not in chosen:
            fresh = group.offers() & needed
            if fresh:
                candidates.append(Candidate(group, fresh, len(candidates)))
    if len(candidates) * len(needed) > SCAN_LIMIT:
        from apportion.attach.select_indexed import select_indexed

        picks += select_indexed(candidates, needed, products_first)
    else:
        picks += _select_scanning(candidates, needed, products_first)
    return picks


def _select_scanning(
    candidates: list[Candidate], needed: set[Offer], products_first: bool
) -> list[Pick]:
    picks: list[Pick] = []
    while candidates:
        best, virt_only_found = scan(candidates, products_first)
        covered = best.fresh
        pick = Pick(best.group, "best group", tuple(sorted(covered)))
        runner = runner_up_of(candidates, best, products_first)
        explain_pick(best, runner, pick, products_first, virt_only_found)
        picks.append(pick)
        needed -= covered
        # Only groups offering what was just covered change; a group left with nothing
        # still needed can never offer anything again.
        remaining: list[Candidate] = []
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
