"""Coverage of a consumer by a stack or an entitlement, and the compliance status.

The reference's compliance tracker, rebuilt for speed: each pool is read once into
a :class:`CoverageUnit` (its sizes for this consumer), and a :class:`Tally` keeps
running totals so that adding or removing one pool, or asking whether a set of
pools covers the consumer, costs a handful of operations instead of a pass over
the whole stack. The semantics are the reference's:

* only attributes that some pool of the stack carries are enforced;
* sizes add up as value × quantity, except sockets with an instance_multiplier m,
  which count value × (q − q mod m) / m;
* arch: every arch list in the stack must include the consumer's arch;
* guest_limit: the largest value over *all* entitlements considered (−1 = unlimited)
  must reach the number of active guests;
* a guest on a host-restricted (``requires_host``) stack is not checked on ram or vcpu;
* a non-stacked entitlement counts as quantity 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from apportion.attach.facts import ADDITIVE, ConsumerProfile, Number
from apportion.attach.pools import PoolView, arch_matches, as_utc, view_pool
from apportion.contracts.attach import Compliance, Entitlement


class CoverageUnit(NamedTuple):
    """What one pool contributes to coverage, for one consumer."""

    view: PoolView
    sizes: tuple[int | None, ...]
    socket_multiplier: int
    arch_has: bool
    arch_ok: bool
    host_restricted: bool
    guest_limit: int | None
    # (index into the consumer's additive attributes, value) of each size the pool carries.
    present: tuple[tuple[int, int], ...]


# Built for every pool kept; tuple.__new__ skips NamedTuple's keyword-argument call.
_new_unit = tuple.__new__


class CoverageContext:
    """The consumer's coverage attributes and needs, and the pools read for it."""

    __slots__ = (
        "_arch",
        "_no_sizes",
        "_present",
        "additive",
        "attributes",
        "consumer",
        "host_exempt",
        "index",
        "need",
        "plan",
        "socket_index",
    )

    def __init__(self, consumer: ConsumerProfile) -> None:
        self.consumer = consumer
        self.attributes = consumer.compliance_attributes
        self.additive = tuple(a for a in self.attributes if a in ADDITIVE)
        self.need: tuple[Number, ...] = tuple(consumer.fact(a) for a in self.additive)
        self.socket_index = self.additive.index("sockets") if "sockets" in self.additive else -1
        self.host_exempt = tuple(consumer.is_guest and a in ("ram", "vcpu") for a in self.additive)
        self._arch: dict[str | None, bool] = {}
        self.index = {a: k for k, a in enumerate(self.additive)}
        self._no_sizes: tuple[int | None, ...] = (None,) * len(self.additive)
        # The sizes of pools take a few distinct values: their CoverageUnit.present, per
        # sizes as read.
        self._present: dict[tuple[int | None, ...], tuple[tuple[int, int], ...]] = {}
        # The coverage checks in the reference's order: (attribute, kind, additive index),
        # kind 0 = additive size, 1 = arch, 2 = guest_limit.
        self.plan = tuple(
            (a, 1, -1)
            if a == "arch"
            else (a, 2, -1)
            if a == "guest_limit"
            else (a, 0, self.index[a])
            for a in self.attributes
        )

    def unit(self, view: PoolView, sizes: Mapping[str, int] | None = None) -> CoverageUnit:
        if sizes is None:
            sizes = view.sizes_for(self.consumer.is_guest)
        arch = view.arch
        ok = self._arch.get(arch)
        if ok is None:
            ok = arch_matches(arch, self.consumer.arch, self.consumer.type_label)
            self._arch[arch] = ok
        if sizes:
            values = tuple(map(sizes.get, self.additive))
            present = self._present.get(values)
            if present is None:
                present = tuple([(k, v) for k, v in enumerate(values) if v is not None])
                self._present[values] = present
            limit = sizes.get("guest_limit")
        else:
            values, present, limit = self._no_sizes, (), None
        multiplier = view.instance_multiplier
        return _new_unit(
            CoverageUnit,
            (
                view,
                values,
                1 if multiplier is None or multiplier < 1 else multiplier,
                arch is not None,
                ok,
                bool(view.requires_host),
                limit,
                present,
            ),
        )

    def covers_alone(self, unit: CoverageUnit, quantity: int, global_limit: int | None) -> bool:
        """:meth:`Tally.covers` of a tally holding only ``unit`` at ``quantity`` (a pool
        that is not stacked: most groups), without building the tally."""
        if unit.arch_has and not unit.arch_ok:
            return False
        if unit.guest_limit is not None and not _limit_covers(global_limit, self.consumer):
            return False
        need, exempt, socket_index = self.need, self.host_exempt, self.socket_index
        restricted = unit.host_restricted
        for k, value in unit.present:
            if k == socket_index:
                m = unit.socket_multiplier
                total = value * ((quantity - quantity % m) // m)
            else:
                total = value * quantity
            if total < need[k] and not (restricted and exempt[k]):
                return False
        return True

    def has(self, unit: CoverageUnit, attribute: str) -> bool:
        """Whether a pool carries (and so makes its stack enforce) a coverage attribute."""
        if attribute == "arch":
            return unit.arch_has
        if attribute == "guest_limit":
            return unit.guest_limit is not None
        return unit.sizes[self.index[attribute]] is not None

    def carried(self, units: Iterable[CoverageUnit]) -> list[str]:
        """The coverage attributes (other than arch) some of ``units`` carry, in order."""
        sizes: set[int] = set()
        limit = False
        for unit in units:
            for k, _ in unit.present:
                sizes.add(k)
            if unit.guest_limit is not None:
                limit = True
        return [
            attribute
            for attribute, kind, k in self.plan
            if (kind == 0 and k in sizes) or (kind == 2 and limit)
        ]


def combine_limits(values: Iterable[int | None]) -> int | None:
    """The global guest_limit over entitlements: −1 if any is unlimited, else the largest."""
    total: int | None = None
    for value in values:
        if value is None:
            continue
        if value == -1:
            return -1
        total = max(total or 0, value)
    return total


class Tally:
    """Running coverage totals of a set of (pool, quantity) entries of one stack."""

    __slots__ = ("arch_bad", "arch_has", "ctx", "has", "host_restricted", "limit_has", "totals")

    def __init__(self, ctx: CoverageContext) -> None:
        n = len(ctx.additive)
        self.ctx = ctx
        self.totals: list[int] = [0] * n
        self.has: list[int] = [0] * n
        self.arch_has = 0
        self.arch_bad = 0
        self.host_restricted = 0
        self.limit_has = 0

    def copy(self) -> Tally:
        other = Tally.__new__(Tally)
        other.ctx = self.ctx
        other.totals = self.totals[:]
        other.has = self.has[:]
        other.arch_has = self.arch_has
        other.arch_bad = self.arch_bad
        other.host_restricted = self.host_restricted
        other.limit_has = self.limit_has
        return other

    def add(self, unit: CoverageUnit, quantity: int, sign: int = 1) -> None:
        if unit.present:
            has, totals = self.has, self.totals
            socket_index = self.ctx.socket_index
            for k, value in unit.present:
                has[k] += sign
                if k == socket_index:
                    m = unit.socket_multiplier
                    totals[k] += sign * value * ((quantity - quantity % m) // m)
                else:
                    totals[k] += sign * value * quantity
        if unit.arch_has:
            self.arch_has += sign
            if not unit.arch_ok:
                self.arch_bad += sign
        if unit.host_restricted:
            self.host_restricted += sign
        if unit.guest_limit is not None:
            self.limit_has += sign

    def failures(self, global_limit: int | None) -> list[str]:
        """The attributes not covered (empty when the consumer is covered)."""
        ctx = self.ctx
        out: list[str] = []
        has, totals, need = self.has, self.totals, ctx.need
        for attribute, kind, k in ctx.plan:
            if kind == 0:
                if (
                    has[k] > 0
                    and totals[k] < need[k]
                    and not (self.host_restricted > 0 and ctx.host_exempt[k])
                ):
                    out.append(attribute)
            elif kind == 1:
                if self.arch_has > 0 and self.arch_bad > 0:
                    out.append(attribute)
            elif self.limit_has > 0 and not _limit_covers(global_limit, ctx.consumer):
                out.append(attribute)
        return out

    def covers(self, global_limit: int | None) -> bool:
        """Whether nothing fails (:meth:`failures` is empty), stopping at the first failure."""
        if self.arch_bad > 0 and self.arch_has > 0:
            return False
        if self.limit_has > 0 and not _limit_covers(global_limit, self.ctx.consumer):
            return False
        ctx = self.ctx
        has, totals, need = self.has, self.totals, ctx.need
        for k in range(len(totals)):
            if (
                has[k] > 0
                and totals[k] < need[k]
                and not (self.host_restricted > 0 and ctx.host_exempt[k])
            ):
                return False
        return True


def _limit_covers(limit: int | None, consumer: ConsumerProfile) -> bool:
    return limit is not None and (limit == -1 or limit >= consumer.active_guests)


def effective_quantity(view: PoolView, quantity: int) -> int:
    """A non-stacked entitlement counts as 1 for coverage, whatever its quantity."""
    return 1 if not view.stacked and quantity > 1 else quantity


def entitlement_failures(
    ctx: CoverageContext, unit: CoverageUnit, quantity: int, global_limit: int | None
) -> list[str]:
    tally = Tally(ctx)
    tally.add(unit, effective_quantity(unit.view, quantity))
    return tally.failures(global_limit)


# ---- compliance status --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttachedEntitlement:
    id: str
    view: PoolView
    quantity: int
    start: datetime | None
    end: datetime | None

    def active(self, at: datetime) -> bool:
        start = self.start if self.start is not None else self.view.start
        end = self.end if self.end is not None else self.view.end
        return (start is None or start <= at) and (end is None or end >= at)


@dataclass(frozen=True, slots=True)
class ComplianceView:
    """The compliance status the rules receive (given by the job or computed)."""

    source: str
    attached: tuple[AttachedEntitlement, ...]
    compliant: tuple[str, ...]
    partially_compliant: tuple[str, ...]
    non_compliant: tuple[str, ...]
    partial_stacks: tuple[str, ...]

    def summary(self) -> dict[str, object]:
        return {
            "source": self.source,
            "compliant_products": list(self.compliant),
            "partially_compliant_products": list(self.partially_compliant),
            "non_compliant_products": list(self.non_compliant),
            "partial_stacks": list(self.partial_stacks),
            "attached_entitlements": [e.id for e in self.attached],
        }


def attached_entitlements(ents: Iterable[Entitlement]) -> list[AttachedEntitlement]:
    """The job's entitlements, each with its pool read."""
    return [
        AttachedEntitlement(
            id=ent.id,
            view=view_pool(ent.pool, -1),
            quantity=ent.quantity,
            start=as_utc(ent.start_date),
            end=as_utc(ent.end_date),
        )
        for ent in ents
    ]


def _dedupe(groups: Iterable[Iterable[AttachedEntitlement]]) -> tuple[AttachedEntitlement, ...]:
    seen: set[str] = set()
    out: list[AttachedEntitlement] = []
    for group in groups:
        for ent in group:
            if ent.id not in seen:
                seen.add(ent.id)
                out.append(ent)
    return tuple(out)


def read_compliance(
    compliance: Compliance | None,
    consumer: ConsumerProfile,
    entitlements: Sequence[AttachedEntitlement],
    at: datetime,
) -> ComplianceView:
    """The job's own compliance maps, or the status computed from its entitlements."""
    if compliance is None:
        return compute_compliance(CoverageContext(consumer), consumer.installed, entitlements, at)
    return given_compliance(compliance, consumer.installed)


def given_compliance(compliance: Compliance, installed: Sequence[str]) -> ComplianceView:
    """The job's own compliance maps, their entitlements read."""
    partial_stacks = tuple(compliance.partial_stacks)
    partial = tuple(compliance.partially_compliant_products)
    compliant = tuple(compliance.compliant_products)
    # The reference gathers attached entitlements in this map order, without duplicates.
    attached = _dedupe(
        attached_entitlements(ents)
        for table in (
            compliance.partial_stacks,
            compliance.partially_compliant_products,
            compliance.compliant_products,
        )
        for ents in table.values()
    )
    done = set(compliant) | set(partial)
    return ComplianceView(
        source="given",
        attached=attached,
        compliant=compliant,
        partially_compliant=partial,
        non_compliant=tuple(p for p in installed if p not in done),
        partial_stacks=partial_stacks,
    )


def compute_compliance(
    ctx: CoverageContext,
    installed: Sequence[str],
    entitlements: Sequence[AttachedEntitlement],
    at: datetime,
) -> ComplianceView:
    """Compliance.getComplianceStatusOnDate: which installed products the entitlements cover."""
    on_date = [e for e in entitlements if e.active(at)]
    units = [ctx.unit(e.view) for e in on_date]
    global_limit = combine_limits(u.guest_limit for u in units)
    members = _stack_members(ctx, on_date, units)

    compliant: dict[str, list[AttachedEntitlement]] = {}
    partial: dict[str, list[AttachedEntitlement]] = {}
    partial_stacks: dict[str, list[AttachedEntitlement]] = {}
    stack_ok: dict[str, bool] = {}
    for ent, unit in zip(on_date, units, strict=True):
        relevant = [pid for pid in installed if pid in ent.view.products]
        partially = False
        if ent.view.stacked:
            sid = ent.view.stack_id or ""
            partially = _stack_fails(sid, members, stack_ok, global_limit)
            if partially:
                partial_stacks.setdefault(sid, []).append(ent)
        for pid in relevant:
            covers = not partially and _entitlement_covers(ctx, ent, unit, global_limit)
            (compliant if covers else partial).setdefault(pid, []).append(ent)
    for pid in list(partial):
        if pid in compliant:
            del partial[pid]
    return ComplianceView(
        source="computed",
        attached=_dedupe([*partial_stacks.values(), *partial.values(), *compliant.values()]),
        compliant=tuple(compliant),
        partially_compliant=tuple(partial),
        non_compliant=tuple(p for p in installed if p not in compliant and p not in partial),
        partial_stacks=tuple(partial_stacks),
    )


def _stack_members(
    ctx: CoverageContext, on_date: Sequence[AttachedEntitlement], units: Sequence[CoverageUnit]
) -> dict[str, Tally]:
    """Each stack's running tally over its entitlements active on the date."""
    members: dict[str, Tally] = {}
    for ent, unit in zip(on_date, units, strict=True):
        if ent.view.stacked:
            tally = members.setdefault(ent.view.stack_id or "", Tally(ctx))
            tally.add(unit, ent.quantity)
    return members


def _stack_fails(
    sid: str, members: Mapping[str, Tally], stack_ok: dict[str, bool], global_limit: int | None
) -> bool:
    """Whether stack ``sid`` leaves the consumer uncovered; ``stack_ok`` remembers each
    stack's answer so that its tally is judged once however many entitlements it has."""
    if sid not in stack_ok:
        stack_ok[sid] = not members[sid].failures(global_limit)
    return not stack_ok[sid]


def _entitlement_covers(
    ctx: CoverageContext, ent: AttachedEntitlement, unit: CoverageUnit, global_limit: int | None
) -> bool:
    """An entitlement of a stack that covers counts as compliant whatever it holds alone;
    a non-stacked one must cover the consumer by itself."""
    failed = entitlement_failures(ctx, unit, ent.quantity, global_limit)
    return not (failed and not ent.view.stacked)
