"""Select best entitlement groups: partial stacks first, then greedily the best group.

Each round keeps the running best of a scan over the candidate groups, by the rules in
order of :mod:`.ranking`. Small selections rescan the candidates every round; large
ones (:data:`SCAN_LIMIT`) follow the same scan through segment trees
(:mod:`.select_indexed`). Both give the same picks.
"""

from __future__ import annotations

from collections.abc import Sequence

from apportion.attach.groups import GroupWork
from apportion.attach.needs import Offer
from apportion.attach.ranking import Candidate, Pick, explain_pick, runner_up_of, scan
from apportion.attach.select_indexed import select_indexed

PARTIAL_STACK = "partial stack: the rules complete partial stacks before choosing any other group"
# Above this many (candidates × things still needed) the rounds use the segment trees;
# below it, rescanning is cheaper than building them. Both give the same picks.
SCAN_LIMIT = 60_000


def _partial_stack_picks(
    groups: Sequence[GroupWork], needed: set[Offer], partial_stacks: Sequence[str]
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
                new = tuple(sorted(found.offers() & needed))
                picks.append(Pick(found, "completes a partial stack", new, PARTIAL_STACK))
                chosen.add(found.key)
                needed -= found.offers()
    return picks


def select(
    groups: Sequence[GroupWork],
    needed: set[Offer],
    partial_stacks: Sequence[str],
    products_first: bool = False,
) -> list[Pick]:
    """Choose groups until nothing still needed can be covered; ``needed`` is consumed.

    ``groups`` are in scan order; ``products_first`` is the ``seed`` profile's rule 1.
    """
    picks = _partial_stack_picks(groups, needed, partial_stacks) if partial_stacks else []
    chosen = {p.group.key for p in picks}
    candidates: list[Candidate] = []
    for group in groups:
        if group.key not in chosen:
            fresh = group.offers() & needed
            if fresh:
                candidates.append(Candidate(group, fresh, len(candidates)))
    if len(candidates) * len(needed) > SCAN_LIMIT:
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
