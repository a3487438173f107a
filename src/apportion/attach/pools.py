"""Pools as the rules see them: attribute lookup, validation of sizes, and the filters.

Attribute lookup follows the reference exactly:

* a value of ``0``/``"0"`` (or null) counts as unset, and the lookup then falls back to
  the other attribute set;
* ``getAttribute`` prefers the pool's own attributes, ``getProductAttribute`` the
  product's; each reading below says which one the reference uses.

:func:`drop_reason` applies step 1 of the seed (validation) and the pre-entitlement
filters of seed footnote [2], returning the first filter a pool fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple, cast

from apportion.attach.facts import ConsumerProfile
from apportion.attach.values import (
    UNLIMITED,
    ProblemLog,
    key_path,
    split_values,
    whole_number,
)
from apportion.contracts.attach import Pool

SIZE_ATTRIBUTES = ("sockets", "cores", "ram", "vcpu", "storage_band")
# Whole-number attributes and whether "-1" is allowed (guest_limit: unlimited guests).
_NUMERIC = {
    "sockets": False,
    "cores": False,
    "ram": False,
    "vcpu": False,
    "storage_band": False,
    "instance_multiplier": False,
    "guest_limit": True,
}
# Candlepin spells it unmapped_guests_only; the seed writes unmapped_guest_only.
_UNMAPPED = ("unmapped_guests_only", "unmapped_guest_only")
_SYSTEM_LIKE = frozenset({"system", "hypervisor", "uebercert"})


def as_utc(moment: datetime | None) -> datetime | None:
    """Dates without a zone are read as UTC, so every comparison is well defined."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


class PoolView(NamedTuple):
    """One pool, read once. Immutable; built for every pool of a job."""

    position: int
    id: str
    model: Pool
    product_id: str
    products: tuple[str, ...]
    derived_products: tuple[str, ...] | None
    stacked: bool
    stack_id: str | None
    multi_ent: bool
    virt_only: bool
    virt_only_any: bool
    physical_only: bool
    unmapped_only: bool
    requires_host: str | None
    requires_consumer: str | None
    requires_consumer_type: str | None
    product_consumer_type: str | None
    quantity: int
    consumed: int
    start: datetime | None
    end: datetime | None
    arch: str | None
    sizes: Mapping[str, int]
    instance_multiplier: int | None
    instance_multiplier_pool_first: int | None
    roles: frozenset[str]
    addons: frozenset[str]
    support_level: frozenset[str]
    usage: frozenset[str]
    support_type: frozenset[str]
    virt_limit: str | None

    @property
    def unlimited(self) -> bool:
        return self.quantity < 0

    @property
    def available(self) -> int:
        """quantity − consumed, as the reference computes it (negative when unlimited)."""
        return self.quantity - self.consumed

    @property
    def host_specific(self) -> bool:
        return self.requires_host is not None

    def provided(self, consider_derived: bool) -> tuple[str, ...]:
        """Products this pool provides; a host attaching for its guests reads the derived ones."""
        if consider_derived and self.derived_products is not None:
            return self.derived_products
        return self.products

    def size(self, attribute: str, guest: bool) -> int | None:
        """A sizing attribute; for guests a pool with ``cores`` and no ``vcpu`` has vcpu = cores."""
        value = self.sizes.get(attribute)
        if value is None and guest and attribute == "vcpu":
            return self.sizes.get("cores")
        return value

    def sizes_for(self, guest: bool) -> Mapping[str, int]:
        """The sizing attributes as a consumer reads them (vcpu from cores for guests)."""
        sizes = self.sizes
        if guest and "vcpu" not in sizes and "cores" in sizes:
            return {**sizes, "vcpu": sizes["cores"]}
        return sizes


def _clean(attrs: Mapping[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in attrs.items() if v is not None and v != "0"}


def _check_numbers(attrs: Mapping[str, str | None], path: str, field: str, log: ProblemLog) -> None:
    for name, raw in attrs.items():
        if raw is None:
            continue
        minus_one = _NUMERIC.get(name)
        if minus_one is not None:
            if not ((raw.isascii() and raw.isdigit()) or (minus_one and raw == "-1")):
                whole_number(raw, key_path(f"{path}.{field}", name), log, allow_minus_one=minus_one)
        elif name == "virt_limit" and raw.strip().lower() != UNLIMITED:
            whole_number(raw, key_path(f"{path}.{field}", name), log)


def check_pool(pool: Pool, path: str, log: ProblemLog) -> None:
    """Field checks the wire model cannot express (sizes, quantity −1 or ≥ 0)."""
    if pool.quantity < -1:
        log.add(f"{path}.quantity", "must be -1 (unlimited) or a quantity of at least 0")
    if pool.attributes:
        _check_numbers(pool.attributes, path, "attributes", log)
    if pool.product_attributes:
        _check_numbers(pool.product_attributes, path, "product_attributes", log)
    if pool.derived_product_attributes:
        _check_numbers(pool.derived_product_attributes, path, "derived_product_attributes", log)


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:  # only reachable for pools that were already rejected
        return None


_SIZE_NAMES = frozenset((*SIZE_ATTRIBUTES, "guest_limit"))
# NamedTuple's own constructor costs a keyword-argument call; thousands of pools are read
# per job, so views are built with tuple.__new__ directly (same object, same fields).
_new_view = tuple.__new__
_split = lru_cache(maxsize=4096)(split_values)
_EMPTY: frozenset[str] = frozenset()


def _flag(attrs: Mapping[str, str], name: str) -> bool:
    value = attrs.get(name)
    return value is not None and value.lower() == "true"


def _cleaned(attrs: Mapping[str, str | None]) -> Mapping[str, str]:
    # Most attribute sets hold neither "0" nor null: use them as they are.
    values = attrs.values()
    if "0" in values or None in values:
        return _clean(attrs)
    return cast(Mapping[str, str], attrs)


def view_pool(pool: Pool, index: int) -> PoolView:
    """Read ``pool`` (already checked by :func:`check_pool`)."""
    own = _cleaned(pool.attributes) if pool.attributes else {}
    product = _cleaned(pool.product_attributes) if pool.product_attributes else {}
    pool_first: Mapping[str, str] = {**product, **own} if own else product
    product_first: Mapping[str, str] = {**own, **product} if own else product
    derived: tuple[str, ...] | None = None
    if pool.derived_product_id is not None:
        derived = (pool.derived_product_id, *pool.derived_provided_products)
    sizes = {k: int(v) for k, v in product_first.items() if k in _SIZE_NAMES}
    get_prod = product_first.get
    get_pool = pool_first.get
    stacking = pool.product_attributes.get("stacking_id")
    limit = get_prod("virt_limit")
    multi = get_prod("multi-entitlement")
    flag_prod, flag_pool = get_prod("virt_only"), get_pool("virt_only")
    virt_only = flag_prod is not None and flag_prod.lower() == "true"
    virt_only_any = virt_only or (flag_pool is not None and flag_pool.lower() == "true")
    physical = get_pool("physical_only")
    unmapped = get_pool(_UNMAPPED[0]) or get_pool(_UNMAPPED[1])
    im_prod, im_pool = get_prod("instance_multiplier"), get_pool("instance_multiplier")
    roles, addons = get_prod("roles"), get_prod("addons")
    level, usage, support = get_prod("support_level"), get_prod("usage"), get_prod("support_type")
    start, end = pool.start_date, pool.end_date
    return _new_view(
        PoolView,
        (
            index,
            pool.id,
            pool,
            pool.product_id,
            (pool.product_id, *pool.provided_products),
            derived,
            stacking is not None,
            stacking,
            multi is not None and multi.lower() == "yes",
            virt_only,
            virt_only_any,
            physical is not None and physical.lower() == "true",
            _flag(pool_first, _UNMAPPED[0]) or _flag(pool_first, _UNMAPPED[1])
            if unmapped is not None
            else False,
            get_pool("requires_host"),
            get_pool("requires_consumer"),
            get_pool("requires_consumer_type"),
            get_prod("requires_consumer_type"),
            pool.quantity,
            pool.consumed,
            start if start is None or start.tzinfo is not None else as_utc(start),
            end if end is None or end.tzinfo is not None else as_utc(end),
            get_prod("arch"),
            sizes,
            None if im_prod is None else int(im_prod),
            None if im_pool is None else int(im_pool),
            _split(roles) if roles is not None else _EMPTY,
            _split(addons) if addons is not None else _EMPTY,
            _split(level) if level is not None else _EMPTY,
            _split(usage) if usage is not None else _EMPTY,
            _split(support) if support is not None else _EMPTY,
            None if limit is None else limit.strip().lower(),
        ),
    )


def check_pools(pools: Sequence[Pool], path: str, log: ProblemLog) -> None:
    """Check a list of pools; duplicate ids are problems too."""
    seen: dict[str, int] = {}
    for i, pool in enumerate(pools):
        previous = seen.setdefault(pool.id, i)
        if previous != i:
            log.add(f"{path}[{i}].id", f"duplicate pool id {pool.id!r} (also {path}[{previous}])")
        # Inlined check_pool for the common case of clean values (thousands of pools).
        if pool.quantity < -1 or not all(
            _clean_numbers(attrs)
            for attrs in (pool.attributes, pool.product_attributes, pool.derived_product_attributes)
            if attrs
        ):
            check_pool(pool, f"{path}[{i}]", log)


_CHECKED = frozenset((*_NUMERIC, "virt_limit"))


def _clean_numbers(attrs: Mapping[str, str | None]) -> bool:
    for name in attrs.keys() & _CHECKED:
        raw = attrs[name]
        if raw is None or (raw.isascii() and raw.isdigit()):
            continue
        if name == "virt_limit":
            if raw.strip().lower() != UNLIMITED:
                return False
        elif not (_NUMERIC[name] and raw == "-1"):
            return False
    return True


def view_pools(pools: Sequence[Pool], path: str, log: ProblemLog) -> list[PoolView]:
    """Check and read a list of pools."""
    check_pools(pools, path, log)
    if log:
        return []
    return [view_pool(pool, i) for i, pool in enumerate(pools)]


def _product_first(pool: Pool, name: str) -> str | None:
    value = pool.product_attributes.get(name)
    if value is None or value == "0":
        value = pool.attributes.get(name)
        if value == "0":
            return None
    return value


def group_key(pool: Pool) -> tuple[str, str]:
    """The entitlement group a pool belongs to: its stack, or itself."""
    stacking = pool.product_attributes.get("stacking_id")
    return ("stack", stacking) if stacking is not None else ("pool", pool.id)


def raw_offers(
    pool: Pool, consider_derived: bool, syspurpose: bool = True
) -> tuple[tuple[str, ...], frozenset[str], frozenset[str]]:
    """Products, roles and addons a pool provides, read without building its view.

    Used to skip the groups that provide nothing still needed before any other work;
    roles and addons are only read when the consumer still needs some (``syspurpose``).
    """
    if consider_derived and pool.derived_product_id is not None:
        products = (pool.derived_product_id, *pool.derived_provided_products)
    else:
        products = (pool.product_id, *pool.provided_products)
    if not syspurpose:
        return products, _EMPTY, _EMPTY
    roles = _product_first(pool, "roles")
    addons = _product_first(pool, "addons")
    return (
        products,
        _split(roles) if roles is not None else _EMPTY,
        _split(addons) if addons is not None else _EMPTY,
    )


def arch_matches(product_arch: str | None, consumer_arch: str | None, consumer_type: str) -> bool:
    """Candlepin's architectureMatches: ``ALL`` matches anything, ``X86`` the i386 family.

    The product's list is split on commas without trimming, as the reference does.
    A consumer without an arch fact passes unless its type is ``system``.
    """
    if not consumer_arch and consumer_type != "system":
        return True
    if product_arch is None:
        return True
    supported = product_arch.upper().split(",")
    if "X86" in supported:
        supported.extend(("I386", "I586", "I686"))
    return "ALL" in supported or (
        bool(consumer_arch) and consumer_arch is not None and consumer_arch.upper() in supported
    )


def currently_available(view: PoolView, consumer: ConsumerProfile) -> int:
    """The quantity the rules may use from a pool.

    Available = quantity − consumed; an unlimited pool gets the quantity that covers its
    stack on its own (1 when not a multi-entitlement stack); a pool that does not allow
    multi-entitlement counts as 1.
    """
    if view.unlimited:
        amount = suggested_quantity(view, consumer) if view.multi_ent and view.stacked else 1
    else:
        amount = view.available
    if amount > 0 and not view.multi_ent:
        return 1
    return amount


def increment(view: PoolView, consumer: ConsumerProfile) -> int:
    """Quantities step by instance_multiplier for physical consumers, else by 1."""
    if not consumer.is_guest and view.instance_multiplier is not None:
        return max(view.instance_multiplier, 1)
    return 1


def suggested_quantity(view: PoolView, consumer: ConsumerProfile) -> int:
    """Quantity.get_suggested_pool_quantity for a stacked pool alone (used for unlimited pools).

    The reference loops adding one increment at a time until every size the pool
    carries is covered; this is the closed form of that loop (it starts at one
    increment even when nothing is enforced).
    """
    inc = increment(view, consumer)
    multiplier = view.instance_multiplier or 1
    host_restricted = bool(view.requires_host)
    steps = 1
    for attribute in consumer.compliance_attributes:
        if attribute in ("arch", "guest_limit"):
            continue
        if consumer.is_guest and host_restricted and attribute in ("ram", "vcpu"):
            continue  # not enforced for guests on host-restricted pools
        value = view.size(attribute, consumer.is_guest)
        if value is None:
            continue
        gain = (
            value * ((inc - inc % multiplier) // multiplier)
            if attribute == "sockets"
            else (value * inc)
        )
        if gain <= 0:
            continue
        need = consumer.fact(attribute)
        if need > 0:
            steps = max(steps, -(-need // gain))
    return int(steps) * inc


class Drop(NamedTuple):
    filter: str
    detail: str


def drop_reason(
    view: PoolView,
    consumer: ConsumerProfile,
    *,
    at: datetime,
    host_uuid: str | None,
    attached_pool_ids: frozenset[str],
    available: int,
    check_quantity: bool = True,
) -> Drop | None:
    """The first validation step or pre-entitlement filter ``view`` fails, if any."""
    guest = consumer.is_guest
    if view.start is not None and view.start > at:
        return Drop("date", f"starts {view.start.isoformat()}, after {at.isoformat()}")
    if view.end is not None and view.end < at:
        return Drop("date", f"ended {view.end.isoformat()}, before {at.isoformat()}")
    if view.id in attached_pool_ids and not view.multi_ent:
        return Drop("already_attached", "already attached and not multi-entitlement")
    if view.product_consumer_type is None and consumer.type_label not in _SYSTEM_LIKE:
        return Drop(
            "consumer_type", f"consumer type {consumer.type_label!r} needs requires_consumer_type"
        )
    if view.requires_consumer is not None and view.requires_consumer != consumer.uuid:
        return Drop("requires_consumer", f"reserved for consumer {view.requires_consumer!r}")
    wanted_type = view.requires_consumer_type
    if (
        wanted_type is not None
        and consumer.type_label != "uebercert"
        and wanted_type != consumer.type_label
        and not (wanted_type == "system" and consumer.type_label == "hypervisor")
    ):
        return Drop("requires_consumer_type", f"requires consumer type {wanted_type!r}")
    if view.virt_only_any and not guest:
        return Drop("virt_only", "virt_only pool and the consumer is not a guest")
    if view.physical_only and guest:
        return Drop("physical_only", "physical_only pool and the consumer is a guest")
    if view.unmapped_only and (not guest or host_uuid is not None):
        why = "the consumer is not a guest" if not guest else "the guest's host is known"
        return Drop("unmapped_guests_only", f"for unmapped guests only and {why}")
    if view.requires_host is not None and (not guest or host_uuid != view.requires_host):
        return Drop(
            "requires_host",
            f"requires host {view.requires_host!r}; the consumer's host is {host_uuid!r}"
            if guest
            else f"requires host {view.requires_host!r} and the consumer is not a guest",
        )
    # The rules' own arch check lets a consumer without an arch fact through, but the
    # server's pre-entitlement check (by consumer type) is the stricter one and runs too.
    if not arch_matches(view.arch, consumer.arch, consumer.type_label):
        return Drop("arch", f"arch {view.arch!r} does not include {consumer.arch!r}")
    drop = _size_filters(view, consumer)
    if drop is not None:
        return drop
    if not check_quantity:
        return None
    if available <= 0:
        return Drop("quantity", "no quantity available")
    multiplier = view.instance_multiplier
    if not guest and multiplier is not None and available < multiplier:
        return Drop(
            "instance_multiplier",
            f"only {available} available, less than instance_multiplier {multiplier}",
        )
    return None


def _size_filters(view: PoolView, consumer: ConsumerProfile) -> Drop | None:
    """The size filters of footnote [2]: a non-stacked pool too small for the consumer."""
    if view.stacked:
        return None
    guest = consumer.is_guest
    sizes = view.sizes
    sockets = sizes.get("sockets")
    if (
        not guest
        and consumer.has_socket_fact
        and sockets is not None
        and (0 < sockets < consumer.sockets)
    ):
        return Drop("sockets", f"covers {sockets} sockets, the consumer has {consumer.sockets}")
    cores = sizes.get("cores")
    if not guest and consumer.cores and cores is not None and 0 < cores < consumer.cores:
        return Drop("cores", f"covers {cores} cores, the consumer has {consumer.cores}")
    ram = sizes.get("ram")
    if ram is not None and consumer.ram > ram:
        return Drop("ram", f"covers {ram} GB of RAM, the consumer has {consumer.ram} GB")
    vcpu = view.size("vcpu", guest)
    if guest and consumer.vcpu and vcpu is not None and 0 < vcpu < consumer.vcpu:
        return Drop("vcpu", f"covers {vcpu} vCPUs, the guest has {consumer.vcpu}")
    band = sizes.get("storage_band")
    if band is not None and consumer.storage_band > band:
        return Drop(
            "storage_band",
            f"covers {band} TB of storage, the consumer uses {consumer.storage_band}",
        )
    return None
