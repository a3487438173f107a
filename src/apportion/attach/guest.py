"""guest_host_attach: the host attaches so that its guest gets host-derived pools.

Seed "Accomodating Guests" and footnote [1], with the reference's server-side rules:

* targets: the guest's non-compliant products (red ones: a partial stack on the guest
  cannot be helped from the host), minus products already provided by a virt_only pool
  the guest can see;
* host candidates (footnote [1] steps 1–7): the pools (only the requested ones when
  given), minus pools the host already has, pools of a stack the host has partially,
  pools whose relevant products are all provided by such virt_only pools, pools failing
  the host's pre-entitlement checks, pools without ``virt_limit`` (or ``"0"``), and pools
  providing no target through their derived products (their normal products when they
  have no derived product) nor the host's role/addons;
* step 8: the host's auto-attach over those pools, reading derived products; the host
  takes the guest's service level when it has none;
* every attached pool with a virt_limit creates a derived pool for the guest —
  virt_only, requires_host = the host, quantity virt_limit × entitlement quantity
  (unlimited for "unlimited"), one per stack, product = the derived product when the
  pool has one;
* finally the guest's own auto-attach over the pools it can see plus the derived pools.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from apportion.attach.autoattach import AttachOutcome, run_attach
from apportion.attach.compliance import (
    AttachedEntitlement,
    CoverageContext,
    attached_entitlements,
    compute_compliance,
)
from apportion.attach.facts import ConsumerProfile, consumer_profile
from apportion.attach.inputs import AttachInput
from apportion.attach.pools import (
    PoolView,
    at_or_now,
    currently_available,
    drop_reason,
    view_pool,
)
from apportion.attach.priority import PROFILES, RuleProfile
from apportion.contracts.attach import GuestHostAttachJob, Pool
from apportion.contracts.attach_checks import UNLIMITED
from apportion.contracts.base import MAX_ID_LENGTH
from apportion.errors import Rejected

if TYPE_CHECKING:
    from apportion.context import Context


def _virt_only_coverage(
    pools: Sequence[PoolView],
    guest: ConsumerProfile,
    host_uuid: str,
    guest_attached: frozenset[str],
    at: datetime,
    targets: Sequence[str],
) -> list[str]:
    """Targets provided by a virt_only pool the guest can see (quantity aside, per the seed)."""
    wanted = set(targets)
    covered: list[str] = []
    for view in pools:
        if not view.virt_only_any:
            continue
        drop = drop_reason(
            view,
            guest,
            at=at,
            host_uuid=host_uuid,
            attached_pool_ids=guest_attached,
            available=1,
            check_quantity=False,
        )
        if drop is not None:
            continue
        for pid in view.products:
            if pid in wanted and pid not in covered:
                covered.append(pid)
    return covered


def _host_candidates(
    job: GuestHostAttachJob,
    pools: Sequence[PoolView],
    host: ConsumerProfile,
    host_attached: frozenset[str],
    host_partial: frozenset[str],
    guest_needs: Sequence[str],
    virt_covered: Sequence[str],
    targets: Sequence[str],
    at: datetime,
    profile: RuleProfile,
) -> tuple[list[PoolView], list[dict[str, str]]]:
    requested = set(job.requested_pools) if job.requested_pools else None
    needs, covered, wanted = set(guest_needs), set(virt_covered), set(targets)
    role = {host.role.lower()} if host.role else set()
    addons = {a.lower() for a in host.addons}
    kept: list[PoolView] = []
    dropped: list[dict[str, str]] = []

    def drop(view: PoolView, name: str, detail: str) -> None:
        dropped.append({"pool": view.id, "filter": name, "detail": detail})

    for view in pools:
        provided = set(view.provided(True))
        relevant = provided & needs
        if requested is not None and view.id not in requested:
            drop(view, "not_requested", "not among requested_pools")
        elif view.id in host_attached:
            drop(view, "host_already_attached", "the host already has an entitlement from it")
        elif view.stacked and (view.stack_id or "") in host_partial:
            drop(view, "partial_stack", f"the host has a partial stack {view.stack_id!r}")
        elif relevant and relevant <= covered:
            drop(view, "virt_only_available", "its products already come from virt_only pools")
        else:
            reason = drop_reason(
                view,
                host,
                at=at,
                host_uuid=None,
                attached_pool_ids=host_attached,
                available=currently_available(view, host),
                below_multiplier=profile.drops_pools_below_instance_multiplier,
            )
            if reason is not None:
                drop(view, reason.filter, reason.detail)
            elif view.virt_limit is None:
                drop(view, "virt_limit", 'no virt_limit (or "0"): creates no guest pool')
            elif not (provided & wanted) and not (view.roles & role or view.addons & addons):
                drop(view, "no_guest_product", "provides none of the guest's products")
            else:
                kept.append(view)
    return kept, dropped


def _derived_pool(
    sources: Sequence[tuple[PoolView, int]], host_uuid: str, source_id: str, taken: set[str]
) -> Pool:
    first = sources[0][0].model
    has_derived = first.derived_product_id is not None
    if any(view.virt_limit == UNLIMITED for view, _ in sources):
        quantity = -1
    else:
        quantity = sum(int(view.virt_limit or 0) * q for view, q in sources)
    starts = [view.start for view, _ in sources]
    ends = [view.end for view, _ in sources]
    pool_id = f"derived:{host_uuid}:{source_id}"
    candidate, n = pool_id, 1
    while candidate in taken:
        n += 1
        candidate = f"{pool_id}#{n}"
    if len(candidate) > MAX_ID_LENGTH:
        # The id is apportion's own making: say which inputs make it too long rather
        # than fail building the pool.
        raise Rejected.at(
            "host.uuid",
            f"the derived pool id 'derived:<host uuid>:{source_id[:40]}' would be "
            f"{len(candidate)} characters, over the {MAX_ID_LENGTH} a pool id may have; "
            "shorten the host uuid or the source pool's id (or stacking_id)",
            code="id_too_long",
        )
    taken.add(candidate)
    return Pool.model_validate(
        {
            "id": candidate,
            "product_id": first.derived_product_id if has_derived else first.product_id,
            "quantity": quantity,
            "consumed": 0,
            "start_date": None if None in starts else min(s for s in starts if s is not None),
            "end_date": None if None in ends else max(e for e in ends if e is not None),
            "attributes": {
                "virt_only": "true",
                "pool_derived": "true",
                "requires_host": host_uuid,
                "source": source_id,
            },
            "product_attributes": dict(
                first.derived_product_attributes if has_derived else first.product_attributes
            ),
            "provided_products": list(
                first.derived_provided_products if has_derived else first.provided_products
            ),
        }
    )


def _derived_pools(outcome: AttachOutcome, host_uuid: str, taken: set[str]) -> list[Pool]:
    out: list[Pool] = []
    for pick in outcome.picks:
        group = pick.group
        chosen = group.quantities()
        sources = [
            (m.view, chosen[m.view.id])
            for m in group.members
            if m.view.id in chosen and m.view.virt_limit is not None
        ]
        if not sources:
            continue
        if group.stackable:
            out.append(_derived_pool(sources, host_uuid, f"stack:{group.stack_id}", taken))
        else:
            for view, q in sources:
                out.append(_derived_pool([(view, q)], host_uuid, view.id, taken))
    return out


def _explanation(
    host: AttachOutcome,
    guest: AttachOutcome,
    derived: Sequence[Pool],
    **host_side: Any,
) -> dict[str, Any]:
    """The explanation: ``host_side`` holds the guest's needs and the host's candidates,
    in the order they are shown (guest_products_needed … host_dropped_pools)."""
    return {
        "summary": (
            f"host: {host.explanation['summary']}; {len(derived)} derived pool(s) for the "
            f"guest; guest: {guest.explanation['summary']}"
        ),
        **host_side,
        "host": host.explanation,
        "derived_pools": [
            {"id": p.id, "source": p.attributes.get("source"), "quantity": p.quantity}
            for p in derived
        ],
        "guest": guest.explanation,
    }


@dataclass(frozen=True, slots=True)
class _Read:
    """A guest_host_attach job (checked at the edge:
    :func:`apportion.contracts.attach_checks.check_guest_host_attach`), read."""

    guest: ConsumerProfile
    host: ConsumerProfile
    pools: list[PoolView]
    host_entitlements: list[AttachedEntitlement]
    guest_entitlements: list[AttachedEntitlement]
    at: datetime
    profile: RuleProfile


def _read(job: GuestHostAttachJob, ctx: Context) -> _Read:
    return _Read(
        consumer_profile(job.guest),
        consumer_profile(job.host),
        [view_pool(pool, i) for i, pool in enumerate(job.pools)],
        attached_entitlements(job.host_entitlements),
        attached_entitlements(job.guest_entitlements),
        at_or_now(job.at, ctx.now),
        PROFILES[job.rules],
    )


def _attached_ids(ents: Sequence[AttachedEntitlement], at: datetime) -> frozenset[str]:
    return frozenset(e.view.id for e in ents if e.active(at))


def solve_guest_host_attach(job: GuestHostAttachJob, ctx: Context) -> dict[str, Any]:
    """What the host attaches for its guest, the derived pools, the guest's attach."""
    r = _read(job, ctx)
    guest, host, pools, at = r.guest, r.host, r.pools, r.at
    guest_status = compute_compliance(
        CoverageContext(guest), guest.installed, r.guest_entitlements, at
    )
    host_status = compute_compliance(CoverageContext(host), host.installed, r.host_entitlements, at)
    guest_needs = list(guest_status.non_compliant)
    guest_attached = _attached_ids(r.guest_entitlements, at)
    virt_covered = _virt_only_coverage(pools, guest, host.uuid, guest_attached, at, guest_needs)
    targets = [p for p in guest_needs if p not in virt_covered]
    host_for_guest = host if host.service_level else host.with_service_level(guest.service_level)
    candidates, host_dropped = _host_candidates(
        job,
        pools,
        host_for_guest,
        _attached_ids(r.host_entitlements, at),
        frozenset(host_status.partial_stacks),
        guest_needs,
        virt_covered,
        targets,
        at,
        r.profile,
    )
    host_input = AttachInput(
        host_for_guest, candidates, targets, host_status, r.host_entitlements, at, r.profile
    )
    host_outcome = run_attach(replace(host_input, consider_derived=True))
    derived = _derived_pools(host_outcome, host.uuid, {p.id for p in pools})
    guest_pools = [*pools, *(view_pool(p, len(pools) + i) for i, p in enumerate(derived))]
    guest_outcome = run_attach(
        AttachInput(
            guest,
            guest_pools,
            None,
            guest_status,
            r.guest_entitlements,
            at,
            r.profile,
            host_uuid=host.uuid,
        )
    )
    explanation = _explanation(
        host_outcome,
        guest_outcome,
        derived,
        guest_products_needed=guest_needs,
        provided_by_virt_only_pools=virt_covered,
        targets=targets,
        host_candidates=[v.id for v in candidates],
        host_dropped_pools=host_dropped,
    )
    # GuestHostAttachResult as JSON data (the derived pools dumped).
    return {
        "host_pool_quantities": host_outcome.pool_quantities,
        "derived_pools": [p.model_dump(mode="json") for p in derived],
        "guest_pool_quantities": guest_outcome.pool_quantities,
        "explanation": explanation,
    }
