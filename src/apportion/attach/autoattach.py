"""auto_attach: the seed's algorithm, step by step, with the reference's semantics.

1. what the consumer needs: the products still to cover, the role and addons not yet
   provided (:mod:`.needs`);
2. which pools the rules are given and what each offers (:mod:`.offers`); those given
   are validated (dates, arch, virt_only, quantity) and pass the pre-entitlement filters
   of seed footnote [2], then are read, scored and grouped;
3. groups visited in reverse input order: validate, keep those providing something still
   needed (or completing a partial stack), remove extra attributes, prune
   (:mod:`.groups`);
4. the best groups, partial stacks first (:mod:`.select`), and their quantities.

:func:`run_attach` is shared with guest_host_attach (the host's attach reads derived
products; the guest's sees the host-derived pools).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import compress, count
from typing import TYPE_CHECKING, Any

from apportion.attach.columns import PoolColumns
from apportion.attach.compliance import (
    ComplianceView,
    CoverageContext,
    Tally,
    attached_entitlements,
    combine_limits,
    effective_quantity,
    read_compliance,
)
from apportion.attach.explain import RunRecord, explain_attach, offer_text
from apportion.attach.facts import consumer_profile
from apportion.attach.groups import Attached, GroupWork, Member, build_groups
from apportion.attach.inputs import AttachInput
from apportion.attach.needs import Needs, needs_of, products_to_cover
from apportion.attach.offers import GroupKey, PoolOffers, read_offers
from apportion.attach.pools import PoolFilters, PoolView, at_or_now, view_pool
from apportion.attach.priority import PROFILES, Scorer
from apportion.attach.ranking import Pick
from apportion.attach.select import select
from apportion.contracts.attach import AutoAttachJob, AutoAttachResult, Pool

if TYPE_CHECKING:
    from apportion.context import Context


@dataclass(frozen=True, slots=True)
class AttachOutcome:
    pool_quantities: dict[str, int]
    covered: tuple[str, ...]
    uncovered: tuple[str, ...]
    picks: tuple[Pick, ...]
    explanation: dict[str, Any] = field(default_factory=dict)


def _needs(inp: AttachInput) -> Needs:
    to_cover = products_to_cover(inp.products, inp.consumer, inp.compliance)
    return needs_of(inp.consumer, to_cover, inp.compliance, inp.entitlements, inp.at, inp.profile)


def _view(item: Pool | PoolView, position: int) -> PoolView:
    return item if isinstance(item, PoolView) else view_pool(item, position)


def _attached(ctx: CoverageContext, compliance: ComplianceView) -> Attached:
    by_stack: dict[str, Tally] = {}
    limits: list[int] = []
    for ent in compliance.attached:
        unit = ctx.unit(ent.view)
        if unit.guest_limit is not None:
            limits.append(unit.guest_limit)
        if ent.view.stacked:
            tally = by_stack.setdefault(ent.view.stack_id or "", Tally(ctx))
            tally.add(unit, effective_quantity(ent.view, ent.quantity))
    return Attached(by_stack, tuple(limits))


def pool_priorities(inp: AttachInput) -> dict[str, Fraction]:
    """Every pool's priority for this consumer (what the explanation reports for kept pools)."""
    scorer = Scorer(inp.consumer, _needs(inp).wants, inp.profile)
    views = [_view(p, i) for i, p in enumerate(inp.pools)]
    return {v.id: scorer.value(scorer.score(v)) for v in views}


def _members(
    inp: AttachInput, offers: PoolOffers, scorer: Scorer, ctx: CoverageContext
) -> tuple[list[Member], list[dict[str, str]], set[GroupKey]]:
    """Step 1: the pools the rules are given, filtered, then read and scored; those
    dropped; the groups still offering something needed (or completing a partial stack)
    once the filters have run — the others are left out whole."""
    consumer, profile = inp.consumer, inp.profile
    attached_ids = frozenset(e.view.id for e in inp.entitlements if e.active(inp.at))
    partial = {("stack", sid) for sid in inp.compliance.partial_stacks}
    filters = PoolFilters(
        consumer,
        at=inp.at,
        host_uuid=inp.host_uuid,
        attached_pool_ids=attached_ids,
        below_multiplier=profile.drops_pools_below_instance_multiplier,
        plain=None if inp.columns is None else inp.columns.plain,
    )
    check, check_model = filters.check, filters.check_model
    if inp.columns is not None:
        # heal_org: its pools are the columns' views (AttachInput.columns).
        check = filters.check_live
    dropped: list[dict[str, str]] = []
    valid: list[tuple[Pool | PoolView, int, int]] = []
    still: set[GroupKey] = set()
    pools, keys, offered = inp.pools, offers.keys, offers.offers
    for position in compress(count(), offers.given):
        item = pools[position]
        # A pool is read in full (its view) only once it passes the filters, unless the
        # filters need more than the model's common fields.
        decided = None if isinstance(item, PoolView) else check_model(item)
        if decided is None:
            item = _view(item, position)
            decided = check(item)
        available, drop = decided
        if drop is not None:
            dropped.append({"pool": item.id, "filter": drop.filter, "detail": drop.detail})
            continue
        valid.append((item, available, position))
        key = keys[position]
        if offered[position] or key in partial:
            still.add(key)
    member = _member_maker(offers, scorer, ctx, inp.columns)
    members = [
        member(_view(item, position), available, position)
        for item, available, position in valid
        if keys[position] in still
    ]
    return members, dropped, still


# Built for every pool kept; tuple.__new__ skips NamedTuple's keyword-argument call.
_new_member = tuple.__new__


def _member_maker(
    offers: PoolOffers, scorer: Scorer, ctx: CoverageContext, columns: PoolColumns | None
) -> Callable[[PoolView, int, int], Member]:
    """A pool's :class:`Member` (its coverage unit, step and score) in this run, with the
    consumer's values read once: hundreds of pools a job become members."""
    if columns is not None:
        return _column_member_maker(offers, scorer, ctx, columns)
    guest = ctx.consumer.is_guest
    offered, protects = offers.offers, offers.protects
    score, unit = scorer.score, ctx.unit

    def member(view: PoolView, available: int, position: int) -> Member:
        sizes = view.sizes_for(guest)
        multiplier = view.instance_multiplier
        # pools.increment: a physical consumer steps by the pool's instance_multiplier.
        step = 1 if guest or multiplier is None else max(multiplier, 1)
        return _new_member(
            Member,
            (
                view,
                unit(view, sizes),
                available,
                step,
                score(view, sizes),
                offered[position],
                protects[position],
            ),
        )

    return member


def _column_member_maker(
    offers: PoolOffers, scorer: Scorer, ctx: CoverageContext, columns: PoolColumns
) -> Callable[[PoolView, int, int], Member]:
    """:func:`_member_maker` for heal_org: every pool's score computed at once, its step
    read once, and its coverage unit shared with the consumers of the same kind, all by
    the view's position."""
    guest = ctx.consumer.is_guest
    offered, protects = offers.offers, offers.protects
    make_unit = ctx.unit
    units = columns.units(ctx.consumer)
    steps = columns.steps(guest)
    scores = None if columns.scoring is None else scorer.score_columns(columns.scoring)
    score = scorer.score

    def member(view: PoolView, available: int, position: int) -> Member:
        at = view.position
        unit = units[at]
        if unit is None:
            unit = units[at] = make_unit(view, view.sizes_for(guest))
        return _new_member(
            Member,
            (
                view,
                unit,
                available,
                steps[at],
                score(view, view.sizes_for(guest)) if scores is None else scores[at],
                offered[position],
                protects[position],
            ),
        )

    return member


def _work(groups: Sequence[GroupWork], partial: set[str]) -> list[GroupWork]:
    """Steps 4–6 on every group, visited in reverse input order; the usable ones."""
    usable: list[GroupWork] = []
    for group in reversed(groups):
        if not group.validate():
            group.status = "invalid"
            continue
        if not group.offers() and (group.stack_id or "") not in partial:
            group.status = "provides nothing still needed"
            continue
        if group.stackable:  # both steps leave a single pool's group as it is
            group.remove_extra_attributes()
            group.prune()
        group.status = "valid, not chosen"
        usable.append(group)
    return usable


def run_attach(inp: AttachInput) -> AttachOutcome:
    """The rules on one consumer and its pools: needs, offers, groups, picks, quantities."""
    ctx = CoverageContext(inp.consumer)
    needs = _needs(inp)
    scorer = Scorer(inp.consumer, needs.wants, inp.profile)
    partial = inp.compliance.partial_stacks
    offers = read_offers(
        inp.pools,
        needs,
        partial,
        inp.consider_derived,
        inp.profile.reads_like_the_server,
        inp.columns,
    )
    members, dropped, still = _members(inp, offers, scorer, ctx)
    groups = build_groups(members, ctx, _attached(ctx, inp.compliance), scorer.scale)
    usable = _work(groups, set(partial))
    still_needed = set(needs.needed)
    picks = select(
        usable,
        still_needed,
        partial,
        inp.profile.most_products_first,
        partials_cover_products_only=inp.profile.partials_cover_products_only,
        explain=inp.explain,
    )
    quantities, covered = _quantities(picks)
    covered_list = tuple(p for p in needs.to_cover if p in covered)
    uncovered = tuple(p for p in needs.to_cover if p not in covered)
    if not inp.explain:
        return AttachOutcome(quantities, covered_list, uncovered, tuple(picks))
    not_needed = [k for k in offers.groups if k not in still]
    record = RunRecord(
        needs, offers, dropped, not_needed, groups, picks, quantities, covered_list, uncovered
    )
    explanation = explain_attach(inp, record)
    explanation["still_needed"] = offer_text(still_needed)
    return AttachOutcome(quantities, covered_list, uncovered, tuple(picks), explanation)


def _quantities(picks: Sequence[Pick]) -> tuple[dict[str, int], set[str]]:
    """Step 8 for the groups picked; the products their quantities really cover."""
    quantities: dict[str, int] = {}
    covered: set[str] = set()
    for pick in picks:
        chosen = pick.group.quantities()
        quantities.update(chosen)
        if _covers(pick.group, chosen):
            covered |= {v for kind, v in pick.group.offers() if kind == "product"}
    return quantities, covered


def _covers(group: GroupWork, chosen: dict[str, int]) -> bool:
    """Whether the chosen quantities (with what is attached) really cover the consumer."""
    members = [m for m in group.members if m.view.id in chosen]
    if not members:
        return False
    ctx = group.ctx
    limit = combine_limits([*group.attached.limits, *(m.unit.guest_limit for m in members)])
    if not group.stackable:
        tally = Tally(ctx)
        tally.add(members[0].unit, 1)
        return not tally.failures(limit)
    tally = group.attached.stack_tally(ctx, group.stack_id)
    for m in members:
        tally.add(m.unit, chosen[m.view.id])
    return not tally.failures(limit)


def solve_auto_attach(job: AutoAttachJob, ctx: Context) -> AutoAttachResult:
    """Which pools, and how many of each, to attach to the job's consumer (the job
    checked at the edge: :func:`apportion.contracts.attach_checks.check_auto_attach`)."""
    at = at_or_now(job.at, ctx.now)
    consumer = consumer_profile(job.consumer)
    entitlements = attached_entitlements(job.entitlements)
    compliance = read_compliance(job.compliance, consumer, entitlements, at)
    outcome = run_attach(
        AttachInput(
            consumer=consumer,
            pools=job.pools,
            products=job.products,
            compliance=compliance,
            entitlements=entitlements,
            at=at,
            profile=PROFILES[job.rules],
            host_uuid=job.host_uuid,
        )
    )
    return {
        "pool_quantities": outcome.pool_quantities,
        "covered_products": list(outcome.covered),
        "uncovered_products": list(outcome.uncovered),
        "explanation": outcome.explanation,
    }
