"""Select best entitlement groups: partial stacks first, then greedily the best group.

Each round keeps the running best of a scan over the candidate groups, by the rules in
order of :mod:`.ranking`. Small selections rescan the candidates every round; large
ones (:data:`SCAN_LIMIT`) follow the same scan through segment trees
(:mod:`.select_indexed`). Both give the same picks.

Partial stacks come first (:func:`select`). The candlepin-* profiles take only their
products off what is still needed and keep them among the candidates, as rules.js
does: a partial stack carrying a still-needed role or addon competes for it in the
rounds like any other group, and may be picked a second time for it.
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
    explain: bool = True,
) -> list[Pick]:
    """Choose groups until nothing still needed can be covered; ``needed`` is consumed.

    ``groups`` are in scan order; ``products_first`` is the ``seed`` profile's rule 1.

    ``partials_cover_products_only`` is rules.js ``get_best_entitlement_groups``: a
    partial stack's group takes only its products off what is still needed, so a role
    or addon it carries is still needed in the greedy rounds, where the same group
    stays a candidate (it is never left out of ``find_best_ent_group``'s groups) and
    competes for it with every other group. Otherwise (the seed's reading) the partial
    stack provides everything it offers and takes no part in the greedy rounds.

    ``explain``: name each pick's runner-up and the rule that decided (what the
    explanation reports; the picks are the same without).
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
        picks += select_indexed(candidates, needed, products_first, explain)
    else:
        picks += _select_scanning(candidates, needed, products_first, explain)
    return picks


def _select_scanning(
    candidates: list[Candidate], needed: set[Offer], products_first: bool, explain: bool
) -> list[Pick]:
    picks: list[Pick] = []
    while candidates:
        best, virt_only_found = scan(candidates, products_first)
        covered = best.fresh
        pick = Pick(best.group, "best group", tuple(sorted(covered)))
        if explain:
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
