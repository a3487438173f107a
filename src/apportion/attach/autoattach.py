"""auto_attach: the seed's algorithm, step by step, with the reference's semantics.

1. validate pools (dates, arch, virt_only, quantity) and apply the pre-entitlement
   filters of seed footnote [2];
2. take the attached entitlements from the compliance status (given, or computed
   from the job's entitlements);
3. the products still to cover, and the role/addons not yet provided;
4. build entitlement groups, visit them in reverse input order: validate, keep those
   providing something still needed, remove extra attributes, prune;
5. select the best groups (partial stacks first) and their quantities.

:func:`run_attach` is shared with guest_host_attach (the host's attach reads derived
products; the guest's sees the host-derived pools).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from apportion.attach.compliance import (
    AttachedEntitlement,
    ComplianceView,
    CoverageContext,
    Tally,
    combine_limits,
    effective_quantity,
)
from apportion.attach.explain import OfferTexts, group_entry, offer_text, pick_entry, summary_text
from apportion.attach.facts import ConsumerProfile
from apportion.attach.groups import Attached, GroupWork, Member, Offer, build_groups
from apportion.attach.inputs import (
    check_compliance_limit,
    check_limits,
    check_pool_list,
    check_time,
    read_compliance,
    read_consumer,
    read_entitlements,
    reject_if,
)
from apportion.attach.pools import (
    PoolView,
    currently_available,
    drop_reason,
    increment,
    view_pool,
)
from apportion.attach.pools import (
    split_values_cached as _split,
)
from apportion.attach.priority import PROFILES, RuleProfile, Scorer, Wants
from apportion.attach.select import Pick, select
from apportion.attach.values import ProblemLog
from apportion.contracts.attach import AutoAttachJob, AutoAttachResult, Pool

if TYPE_CHECKING:
    from apportion.engine import Context


@dataclass(frozen=True, slots=True)
class AttachInput:
    consumer: ConsumerProfile
    pools: Sequence[Pool | PoolView]  # already checked; read lazily when given as Pool
    products: Sequence[str] | None
    compliance: ComplianceView
    entitlements: Sequence[AttachedEntitlement]
    at: datetime
    profile: RuleProfile
    consider_derived: bool = False
    host_uuid: str | None = None


@dataclass(frozen=True, slots=True)
class AttachOutcome:
    pool_quantities: dict[str, int]
    covered: tuple[str, ...]
    uncovered: tuple[str, ...]
    picks: tuple[Pick, ...]
    explanation: dict[str, Any] = field(default_factory=dict)


def _lower(value: str | None) -> frozenset[str]:
    return frozenset() if value is None else frozenset({value.strip().lower()})


def _products_to_cover(inp: AttachInput) -> list[str]:
    compliant = set(inp.compliance.compliant)
    source = inp.products if inp.products is not None else inp.consumer.installed
    return [pid for pid in dict.fromkeys(source) if pid not in compliant]


def _wants(inp: AttachInput, to_cover: Sequence[str]) -> tuple[Wants, set[Offer]]:
    """What the consumer asks for (for priorities) and what is still needed (for groups).

    Products: specified = installed plus those to cover (the server adds the products to
    cover to the installed list); unsatisfied = those not compliant. Role and addons are
    satisfied by the roles/addons of attached entitlements — the compliance status's, and
    the job's own entitlements active at the check time (an entitlement providing only a
    role appears in no compliance map). Service level, usage and service type are never
    "satisfied": they only steer priorities.
    """
    consumer = inp.consumer
    compliant = set(inp.compliance.compliant)
    products = list(dict.fromkeys([*consumer.installed, *to_cover]))
    # Roles and addons already provided by attached entitlements are satisfied.
    provided_roles: set[str] = set()
    provided_addons: set[str] = set()
    attached = [*inp.compliance.attached, *(e for e in inp.entitlements if e.active(inp.at))]
    for ent in attached:
        provided_roles |= ent.view.roles
        provided_addons |= ent.view.addons
    roles = _lower(consumer.role)
    addons = frozenset(a.lower() for a in consumer.addons)
    unsatisfied = {
        "products": frozenset(p for p in products if p not in compliant),
        "roles": roles - provided_roles,
        "addons": addons - provided_addons,
        "support_level": _lower(consumer.service_level),
        "usage": _lower(consumer.usage),
        "support_type": _lower(consumer.service_type),
    }
    specified = {
        "products": frozenset(products),
        "roles": roles,
        "addons": addons,
        "support_level": unsatisfied["support_level"],
        "usage": unsatisfied["usage"],
        "support_type": unsatisfied["support_type"],
    }
    needed: set[Offer] = {("product", p) for p in to_cover}
    needed |= {("role", r) for r in unsatisfied["roles"]}
    needed |= {("addon", a) for a in unsatisfied["addons"]}
    return Wants(unsatisfied, specified), needed


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


def _offers(
    pools: Sequence[Pool | PoolView], needed: set[Offer], consider_derived: bool
) -> tuple[list[tuple[str, str]], list[frozenset[Offer]], dict[tuple[str, str], bool]]:
    """Each pool's group key and the still-needed things it offers; which groups offer any.

    Read straight from the pools (every pool of the job passes here, most are never
    viewed); the same readings as :class:`PoolView` (stacked iff the product has a
    ``stacking_id``, roles and addons product attribute first, "0" meaning unset).
    """
    wanted_products = frozenset(v for kind, v in needed if kind == "product")
    wanted_roles = frozenset(v for kind, v in needed if kind == "role")
    wanted_addons = frozenset(v for kind, v in needed if kind == "addon")
    syspurpose = bool(wanted_roles or wanted_addons)
    empty: frozenset[Offer] = frozenset()
    # Pools offering the same things share one offers set (and build it once); the
    # wanted roles (addons) in a syspurpose value are found once per distinct string.
    shared: dict[tuple[frozenset[str], ...], frozenset[Offer]] = {}
    role_values: dict[str, frozenset[str]] = {}
    addon_values: dict[str, frozenset[str]] = {}
    keys: list[tuple[str, str]] = []
    offers_of: list[frozenset[Offer]] = []
    useful: dict[tuple[str, str], bool] = {}
    found_roles = found_addons = frozenset[str]()
    for item in pools:
        if isinstance(item, PoolView):
            key = ("stack", item.stack_id or "") if item.stacked else ("pool", item.id)
            found = wanted_products.intersection(item.provided(consider_derived))
            if syspurpose:
                found_roles = wanted_roles.intersection(item.roles)
                found_addons = wanted_addons.intersection(item.addons)
        else:
            product_attributes = item.product_attributes
            stacking = product_attributes.get("stacking_id")
            key = ("stack", stacking) if stacking is not None else ("pool", item.id)
            if consider_derived and item.derived_product_id is not None:
                found = wanted_products.intersection(
                    (item.derived_product_id, *item.derived_provided_products)
                )
            else:
                found = wanted_products.intersection(item.provided_products)
                if item.product_id in wanted_products:
                    found = found.union((item.product_id,))
            if syspurpose:
                found_roles = _purpose(item, "roles", wanted_roles, role_values)
                found_addons = _purpose(item, "addons", wanted_addons, addon_values)
        if found or found_roles or found_addons:
            signature = (found, found_roles, found_addons)
            offers = shared.get(signature)
            if offers is None:
                offers = shared[signature] = frozenset(
                    [("product", p) for p in found]
                    + [("role", r) for r in found_roles]
                    + [("addon", a) for a in found_addons]
                )
            useful[key] = True
        else:
            offers = empty
            useful.setdefault(key, False)
        keys.append(key)
        offers_of.append(offers)
    return keys, offers_of, useful


_NOTHING: frozenset[str] = frozenset()


def _purpose(
    pool: Pool, name: str, wanted: frozenset[str], seen: dict[str, frozenset[str]]
) -> frozenset[str]:
    """The ``wanted`` values of a pool's syspurpose attribute ``name`` (roles, addons).

    Product attribute first; "0" (or null) is unset, as :class:`PoolView` reads them.
    ``seen`` caches the answer per distinct raw string: thousands of pools share a few.
    """
    raw = pool.product_attributes.get(name)
    if raw is None or raw == "0":
        raw = pool.attributes.get(name)
        if raw is None or raw == "0":
            return _NOTHING
    found = seen.get(raw)
    if found is None:
        found = seen[raw] = wanted.intersection(_split(raw))
    return found


def pool_priorities(inp: AttachInput) -> dict[str, Fraction]:
    """Every pool's priority for this consumer (what the explanation reports for kept pools)."""
    wants, _ = _wants(inp, _products_to_cover(inp))
    scorer = Scorer(inp.consumer, wants, inp.profile)
    views = [_view(p, i) for i, p in enumerate(inp.pools)]
    return {v.id: scorer.value(scorer.score(v)) for v in views}


def run_attach(inp: AttachInput) -> AttachOutcome:
    consumer = inp.consumer
    ctx = CoverageContext(consumer)
    to_cover = _products_to_cover(inp)
    wants, needed = _wants(inp, to_cover)
    attached_ids = frozenset(e.view.id for e in inp.entitlements if e.active(inp.at))

    # Groups whose pools offer nothing still needed are left out before any filtering:
    # validation only removes pools, so they could never offer anything (the reference
    # drops them after validating them; the answer is the same).
    keys, offers_of, useful = _offers(inp.pools, needed, inp.consider_derived)

    # Step 1: validation and pre-entitlement filters.
    dropped: list[dict[str, str]] = []
    valid: list[tuple[PoolView, int, frozenset[Offer], tuple[str, str]]] = []
    still_useful: dict[tuple[str, str], bool] = {}
    at, host_uuid = inp.at, inp.host_uuid
    for position, item in enumerate(inp.pools):
        key = keys[position]
        if not useful[key]:
            continue
        view = item if isinstance(item, PoolView) else view_pool(item, position)
        available = currently_available(view, consumer)
        drop = drop_reason(
            view,
            consumer,
            at=at,
            host_uuid=host_uuid,
            attached_pool_ids=attached_ids,
            available=available,
        )
        if drop is not None:
            dropped.append({"pool": view.id, "filter": drop.filter, "detail": drop.detail})
            continue
        offers = offers_of[position]
        valid.append((view, available, offers, key))
        if offers:
            still_useful[key] = True
        elif key not in still_useful:
            still_useful[key] = False

    scorer = Scorer(consumer, wants, inp.profile)
    guest = consumer.is_guest
    score, unit = scorer.score, ctx.unit
    step = 1
    members: list[Member] = []
    for view, available, offers, key in valid:
        if still_useful[key]:
            sizes = view.sizes_for(guest)
            if not guest:
                step = increment(view, consumer)
            members.append(
                Member(view, unit(view, sizes), available, step, score(view, sizes), offers)
            )
    not_needed = [
        f"{kind}:{name}"
        for (kind, name), ok in useful.items()
        if not ok or not still_useful.get((kind, name))
    ]

    groups = build_groups(members, ctx, _attached(ctx, inp.compliance), scorer.scale)
    visited: list[GroupWork] = []
    usable: list[GroupWork] = []
    for group in reversed(groups):
        visited.append(group)
        if not group.validate():
            group.status = "invalid"
            continue
        if not group.offers():
            group.status = "provides nothing still needed"
            continue
        group.remove_extra_attributes()
        group.prune()
        group.status = "valid, not chosen"
        usable.append(group)

    provides = OfferTexts(needed)  # what each group provides of what was needed at start
    picks = select(usable, needed, inp.compliance.partial_stacks)

    quantities: dict[str, int] = {}
    covered: set[str] = set()
    for pick in picks:
        chosen = pick.group.quantities()
        quantities.update(chosen)
        if _covers(pick.group, chosen):
            covered |= {v for kind, v in pick.group.offers() if kind == "product"}
    covered_list = tuple(p for p in to_cover if p in covered)
    uncovered = tuple(p for p in to_cover if p not in covered)

    chosen_keys = {p.group.key for p in picks}
    explanation: dict[str, Any] = {
        "summary": summary_text(quantities, covered_list, uncovered),
        "rules": inp.profile.name,
        "at": inp.at.isoformat(),
        "consider_derived": inp.consider_derived,
        "consumer": consumer.summary(),
        "compliance": inp.compliance.summary(),
        "products_to_cover": list(to_cover),
        "roles_needed": sorted(wants.unsatisfied["roles"]),
        "addons_needed": sorted(wants.unsatisfied["addons"]),
        "dropped_pools": dropped,
        "groups_not_needed": not_needed,
        "groups": [group_entry(g, provides, g.key in chosen_keys) for g in visited],
        "picks": [pick_entry(i + 1, p) for i, p in enumerate(picks)],
        "still_needed": offer_text(needed),
    }
    return AttachOutcome(quantities, covered_list, uncovered, tuple(picks), explanation)


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
    """Which pools, and how many of each, to attach to the job's consumer
    (docs/contract.md#auto_attach)."""
    limits = ctx.limits
    check_limits(
        limits,
        consumers=[("consumer", job.consumer)],
        pools=("pools", job.pools),
        entitlements=[("entitlements", job.entitlements)],
        products=("products", job.products),
    )
    log = ProblemLog.new()
    consumer = read_consumer(job.consumer, "consumer", log)
    pools = check_pool_list(job.pools, "pools", log, limits)
    check_compliance_limit(limits, "compliance", job.compliance)
    entitlements = read_entitlements(job.entitlements, "entitlements", log)
    reject_if(log)
    at = check_time(job.at, ctx.now)
    compliance = read_compliance(job.compliance, consumer, entitlements, at, "compliance", log)
    outcome = run_attach(
        AttachInput(
            consumer=consumer,
            pools=pools,
            products=job.products,
            compliance=compliance,
            entitlements=entitlements,
            at=at,
            profile=PROFILES[job.rules],
            host_uuid=job.host_uuid,
        )
    )
    return AutoAttachResult(
        pool_quantities=outcome.pool_quantities,
        covered_products=list(outcome.covered),
        uncovered_products=list(outcome.uncovered),
        explanation=outcome.explanation,
    )
