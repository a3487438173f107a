"""The explanation a support engineer reads: what was dropped, considered and chosen, and
the rule that decided each choice (including the reference's quirks, named as such)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from apportion.attach.groups import GroupWork, Member
from apportion.attach.inputs import AttachInput
from apportion.attach.needs import Needs, Offer
from apportion.attach.offers import GroupKey, PoolOffers
from apportion.attach.pools import PoolView
from apportion.attach.ranking import Pick

_TIE = (
    "equal priority and end date: Candlepin's sort is unstable and may order them either "
    "way; this answer keeps the input order"
)
_IDENTICAL = "; they are identical but for their ids, so either is a right answer"


def offer_text(offers: Iterable[Offer]) -> list[str]:
    return [f"{kind}:{value}" for kind, value in sorted(offers)]


def _key_text(key: GroupKey) -> str:
    return f"{key[0]}:{key[1]}"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What one run of the rules did, for the explanation."""

    needs: Needs
    offers: PoolOffers
    dropped: list[dict[str, str]]
    not_needed: list[GroupKey]
    groups: Sequence[GroupWork]
    picks: Sequence[Pick]
    quantities: dict[str, int]
    covered: tuple[str, ...]
    uncovered: tuple[str, ...]


class _OfferTexts:
    """:func:`offer_text` of the still-needed part of each group's offers, remembered:
    most groups offer one of a few sets (hundreds of groups per job)."""

    __slots__ = ("_known", "needed")

    def __init__(self, needed: frozenset[Offer]) -> None:
        self.needed = needed
        self._known: dict[frozenset[Offer], list[str]] = {}

    def __call__(self, offers: frozenset[Offer]) -> list[str]:
        text = self._known.get(offers)
        if text is None:
            text = self._known[offers] = offer_text(offers & self.needed)
        return list(text)


def explain_attach(inp: AttachInput, run: RunRecord) -> dict[str, Any]:
    needs = run.needs
    provides = _OfferTexts(needs.needed)
    chosen = {p.group.key for p in run.picks}
    left_out = run.offers.left_out
    return {
        "summary": summary_text(run.quantities, run.covered, run.uncovered, _nothing(run)),
        "rules": inp.profile.name,
        "at": inp.at.isoformat(),
        "consider_derived": inp.consider_derived,
        "consumer": inp.consumer.summary(),
        "compliance": inp.compliance.summary(),
        "products_to_cover": list(needs.to_cover),
        "roles_needed": sorted(needs.still_needed("role")),
        "addons_needed": sorted(needs.still_needed("addon")),
        "dropped_pools": run.dropped,
        "groups_not_needed": [_key_text(k) for k in run.not_needed],
        "groups": [
            group_entry(g, provides, g.key in chosen, left_out.get(("stack", g.stack_id or "")))
            for g in reversed(run.groups)
        ],
        "picks": [pick_entry(i + 1, p) for i, p in enumerate(run.picks)],
    }


def group_entry(
    group: GroupWork, provides: _OfferTexts, chosen: bool, left_out: Sequence[str] | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "group": group.key,
        "stacked": group.stackable,
        "pools": list(group.initial) or [m.view.id for m in group.members],
        "status": group.status if not chosen else "chosen",
    }
    if left_out and group.stackable:
        entry["not_given_to_the_rules"] = list(left_out)
    if group.failures:
        entry["coverage_failures"] = list(group.failures)
    if group.removed_by_validation:
        entry["removed_by_validation"] = list(group.removed_by_validation)
    if group.status == "invalid":
        return entry
    entry["provides"] = provides(group.offers())
    if group.status == "provides nothing still needed":
        return entry
    if group.removed_as_extra:
        entry["removed_as_extra_attributes"] = list(group.removed_as_extra)
    if group.lost_as_extra:
        entry["lost_as_extra_attributes"] = offer_text(group.lost_as_extra)
        entry["note"] = (
            "remove_extra_attrs keeps a smaller set of pools if it covers the consumer and "
            "the same products; the role and addons are compared on the whole group (as "
            "rules.js does), so the pools providing them may go"
        )
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
    group = pick.group
    entry: dict[str, Any] = {
        "order": order,
        "group": group.key,
        "reason": pick.reason,
        "covers": offer_text(pick.new),
        "pool_quantities": dict(group.quantities()),
    }
    if pick.decided_by is not None:
        entry["decided_by"] = pick.decided_by
    if pick.runner_up is not None:
        entry["runner_up"] = pick.runner_up
        entry["criteria"] = pick.values
    notes = [*_below_multiplier_notes(group, pick), *_tie_notes(group)]
    if notes:
        entry["notes"] = notes
    return entry


def _starved(group: GroupWork) -> list[Member]:
    """Pools of a chosen group with less available than one quantity step (a physical
    consumer's pool below its instance_multiplier, which rules.js keeps)."""
    chosen = group.quantities()
    return [m for m in group.members if m.view.id not in chosen and m.available < m.step]


def _below_multiplier_notes(group: GroupWork, pick: Pick) -> list[str]:
    notes = []
    for m in _starved(group):
        notes.append(
            f"pool {m.view.id} has {m.available} available, below its instance_multiplier "
            f"{m.step}: Candlepin's rules keep such a pool but can give it no quantity, so "
            "nothing is attached from it"
        )
    if notes and not group.quantities():
        covered = [v for kind, v in pick.new if kind == "product"]
        notes.append(
            "so the group's total quantity is 0, which wins the smaller-total-quantity "
            "rule; Candlepin then counts "
            + (", ".join(covered) if covered else "what it offers")
            + " as covered with nothing attached (no other group is picked for it), and "
            "this answer reports it uncovered"
        )
    return notes


def _tie_notes(group: GroupWork) -> list[str]:
    kept = {m.view.id for m in group.members}
    notes = []
    for views in group.sort_ties:
        ids = [v.id for v in views]
        if kept.isdisjoint(ids):
            continue  # all pruned: their order changed nothing kept
        note = f"pools {', '.join(ids)}: {_TIE}"
        notes.append(note + _IDENTICAL if _identical(views) else note)
    return notes


def _identical(views: Sequence[PoolView]) -> bool:
    """Whether the pools differ only in their ids."""
    dumps = [v.model.model_dump(exclude={"id"}) for v in views]
    return all(d == dumps[0] for d in dumps[1:])


def _nothing(run: RunRecord) -> list[str]:
    """Products a pick counted as covered although nothing was attached for them."""
    out: list[str] = []
    for pick in run.picks:
        if not pick.group.quantities() and _starved(pick.group):
            out += [v for kind, v in pick.new if kind == "product" and v in run.uncovered]
    return out


def summary_text(
    quantities: dict[str, int],
    covered: Sequence[str],
    uncovered: Sequence[str],
    counted_with_nothing: Sequence[str] = (),
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
    if counted_with_nothing:
        tail += (
            f" ({', '.join(counted_with_nothing)} counted as covered with nothing attached: "
            "a pool below its instance_multiplier, as Candlepin does)"
        )
    return head + tail
