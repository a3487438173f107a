"""The explanation a support engineer reads: what was dropped, considered and chosen, and why."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from apportion.attach.groups import GroupWork, Offer
from apportion.attach.select import Pick


def offer_text(offers: Iterable[Offer]) -> list[str]:
    return [f"{kind}:{value}" for kind, value in sorted(offers)]


class OfferTexts:
    """:func:`offer_text` of the still-needed part of each group's offers, remembered:
    most groups offer one of a few sets (hundreds of groups per job)."""

    __slots__ = ("_known", "needed")

    def __init__(self, needed: set[Offer]) -> None:
        self.needed = frozenset(needed)
        self._known: dict[frozenset[Offer], list[str]] = {}

    def __call__(self, offers: frozenset[Offer]) -> list[str]:
        text = self._known.get(offers)
        if text is None:
            text = self._known[offers] = offer_text(offers & self.needed)
        return list(text)


def group_entry(group: GroupWork, needed: set[Offer] | OfferTexts, chosen: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "group": group.key,
        "stacked": group.stackable,
        "pools": list(group.initial) or [m.view.id for m in group.members],
        "status": group.status if not chosen else "chosen",
    }
    if group.failures:
        entry["coverage_failures"] = list(group.failures)
    if group.removed_by_validation:
        entry["removed_by_validation"] = list(group.removed_by_validation)
    if group.status in ("invalid",):
        return entry
    entry["provides"] = (
        needed(group.offers())
        if isinstance(needed, OfferTexts)
        else offer_text(group.offers() & needed)
    )
    if group.status == "provides nothing still needed":
        return entry
    if group.removed_as_extra:
        entry["removed_as_extra_attributes"] = list(group.removed_as_extra)
    if group.pruned:
        entry["pruned"] = list(group.pruned)
    entry["kept"] = [m.view.id for m in group.members]
    entry["average_priority"] = group.average_priority()
    if chosen:
        # Per-pool detail for the groups attached; the others show their average.
        entry["pool_priorities"] = {m.view.id: group.priority_of(m) for m in group.members}
        entry["host_specific_pools"] = group.host_specific()
        entry["virt_only_pools"] = group.virt_only()
        entry["quantities"] = dict(group.quantities())
    return entry


def pick_entry(order: int, pick: Pick) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "order": order,
        "group": pick.group.key,
        "reason": pick.reason,
        "covers": offer_text(pick.new),
        "pool_quantities": dict(pick.group.quantities()),
    }
    if pick.decided_by is not None:
        entry["decided_by"] = pick.decided_by
    if pick.runner_up is not None:
        entry["runner_up"] = pick.runner_up
        entry["criteria"] = pick.values
    return entry


def summary_text(
    quantities: dict[str, int], covered: Sequence[str], uncovered: Sequence[str]
) -> str:
    if not quantities:
        head = "nothing to attach"
    else:
        parts = ", ".join(f"{pid} x{q}" for pid, q in quantities.items())
        head = f"attach {parts}"
    total = len(covered) + len(uncovered)
    tail = f"; covers {len(covered)} of {total} product(s)"
    if uncovered:
        tail += f"; not coverable: {', '.join(uncovered)}"
    return head + tail
