"""Pools as the rules see them: attribute lookup, the read view, and the filters.

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
from types import MappingProxyType
from typing import Any, NamedTuple, cast

from apportion.attach.facts import ConsumerProfile
from apportion.attach.values import split_values
from apportion.contracts.attach import Pool

SIZE_ATTRIBUTES = ("sockets", "cores", "ram", "vcpu", "storage_band")
# Candlepin spells it unmapped_guests_only; the seed writes unmapped_guest_only.
_UNMAPPED = ("unmapped_guests_only", "unmapped_guest_only")
_SYSTEM_LIKE = frozenset({"system", "hypervisor", "uebercert"})


def as_utc(moment: datetime | None) -> datetime | None:
    """Dates without a zone are read as UTC, so every comparison is well defined."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def at_or_now(at: datetime | None, now: datetime) -> datetime:
    """The check time of a job: its ``at``, else now, as UTC."""
    moment = at if at is not None else now
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


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
    # A guest reads a pool's vcpu as its cores when it sets no vcpu, and rules.js takes
    # those cores pool attribute first (createPool's getAttribute), unlike the sizes.
    cores_pool_first: int | None
    # The syspurpose attributes as written (comma lists; None when unset). They are split
    # on demand (see the properties below): scoring reads the raw strings, which recur.
    purpose: tuple[str | None, str | None, str | None, str | None, str | None]
    virt_limit: str | None
    # Whether the pool sets any of the attributes most pools leave unset (_RARE): when it
    # does not, the filters reading them have nothing to check.
    rare: bool

    @property
    def roles(self) -> frozenset[str]:
        raw = self.purpose[0]
        return _EMPTY if raw is None else _split(raw)

    @property
    def addons(self) -> frozenset[str]:
        raw = self.purpose[1]
        return _EMPTY if raw is None else _split(raw)

    @property
    def support_level(self) -> frozenset[str]:
        raw = self.purpose[2]
        return _EMPTY if raw is None else _split(raw)

    @property
    def usage(self) -> frozenset[str]:
        raw = self.purpose[3]
        return _EMPTY if raw is None else _split(raw)

    @property
    def support_type(self) -> frozenset[str]:
        raw = self.purpose[4]
        return _EMPTY if raw is None else _split(raw)

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
            return self.cores_pool_first
        return value

    def sizes_for(self, guest: bool) -> Mapping[str, int]:
        """The sizing attributes as a consumer reads them (vcpu from cores for guests)."""
        sizes = self.sizes
        if guest and "vcpu" not in sizes and self.cores_pool_first is not None:
            return {**sizes, "vcpu": self.cores_pool_first}
        return sizes


def _clean(attrs: Mapping[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in attrs.items() if v is not None and v != "0"}


_SIZE_NAMES = frozenset((*SIZE_ATTRIBUTES, "guest_limit"))
# Attributes most pools leave unset; see PoolView.rare.
_RARE = frozenset(
    (
        "virt_limit",
        "virt_only",
        "physical_only",
        *_UNMAPPED,
        "requires_host",
        "requires_consumer",
        "requires_consumer_type",
    )
)
# NamedTuple's own constructor costs a keyword-argument call; thousands of pools are read
# per job, so views are built with tuple.__new__ directly (same object, same fields).
_new_view = tuple.__new__
_EMPTY: frozenset[str] = frozenset()
# The values an attribute reads as unset. A set: attribute values are strings or None,
# so a membership test is one hash lookup (a tuple compares None with each string the
# slow way, through both types' comparisons).
_UNSET: frozenset[str | None] = frozenset((None, "0"))
_NO_ATTRIBUTES: Mapping[str, str] = MappingProxyType({})

# Pure functions of a few distinct strings, called for thousands of pools: their results
# are kept in plain dicts (a dict lookup costs a fraction of an lru_cache call), cleared
# when they grow past a bound so a job with many distinct values cannot grow them.
_CACHE_BOUND = 4096
_SPLITS: dict[str, frozenset[str]] = {}
_ARCHES: dict[tuple[str | None, str | None, str], bool] = {}


def split_values_cached(raw: str) -> frozenset[str]:
    """:func:`split_values`, remembered (the same syspurpose strings recur across pools)."""
    found = _SPLITS.get(raw)
    if found is None:
        if len(_SPLITS) >= _CACHE_BOUND:
            _SPLITS.clear()
        found = _SPLITS[raw] = split_values(raw)
    return found


_split = split_values_cached


def _flag(attrs: Mapping[str, str], name: str) -> bool:
    value = attrs.get(name)
    return value is not None and value.lower() == "true"


def _cleaned(attrs: Mapping[str, str | None]) -> Mapping[str, str]:
    # Most attribute sets hold neither "0" nor null: use them as they are.
    if not _UNSET.isdisjoint(attrs.values()):
        return _clean(attrs)
    return cast(Mapping[str, str], attrs)


def _readings(pool: Pool) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """The merged readings of a pool's attributes: pool attribute first (rules.js
    ``getAttribute``) and product attribute first (``getProductAttribute``), "0" unset."""
    product_attributes = pool.product_attributes
    product: Mapping[str, str]
    if not product_attributes:
        product = _NO_ATTRIBUTES
    elif not _UNSET.isdisjoint(product_attributes.values()):
        product = _clean(product_attributes)
    else:
        product = cast(Mapping[str, str], product_attributes)  # no None values (checked)
    own_attributes = pool.attributes
    if own_attributes and (own := _cleaned(own_attributes)):
        return {**product, **own}, {**own, **product}
    return product, product


# The fields of a pool setting none of the rarely set attributes (_RARE), in PoolView's
# order from virt_only to product_consumer_type.
_NO_RARE_FIELDS = (False, False, False, False, None, None, None, None)


def _rare_fields(
    pool_first: Mapping[str, str], product_first: Mapping[str, str]
) -> tuple[Any, ...]:
    """PoolView's fields virt_only … product_consumer_type, read."""
    get_prod, get_pool = product_first.get, pool_first.get
    flag_prod, flag_pool = get_prod("virt_only"), get_pool("virt_only")
    virt_only = flag_prod is not None and flag_prod.lower() == "true"
    physical = get_pool("physical_only")
    unmapped = get_pool(_UNMAPPED[0]) or get_pool(_UNMAPPED[1])
    return (
        virt_only,
        virt_only or (flag_pool is not None and flag_pool.lower() == "true"),
        physical is not None and physical.lower() == "true",
        unmapped is not None
        and (_flag(pool_first, _UNMAPPED[0]) or _flag(pool_first, _UNMAPPED[1])),
        get_pool("requires_host"),
        get_pool("requires_consumer"),
        get_pool("requires_consumer_type"),
        get_prod("requires_consumer_type"),
    )


def view_pool(pool: Pool, index: int) -> PoolView:
    """Read ``pool``, whose numeric attributes are whole numbers (checked at the edge)."""
    pool_first, product_first = _readings(pool)
    get_prod = product_first.get
    derived: tuple[str, ...] | None = None
    if pool.derived_product_id is not None:
        derived = (pool.derived_product_id, *pool.derived_provided_products)
    # A loop rather than a comprehension: most pools carry one size or none, and a
    # comprehension costs a call of its own.
    sizes: dict[str, int] = {}
    for name in _SIZE_NAMES.intersection(product_first):
        sizes[name] = int(product_first[name])
    stacking = pool.product_attributes.get("stacking_id")
    multi = get_prod("multi-entitlement")
    # Both merged readings have the same keys, so one check covers either.
    rare = not _RARE.isdisjoint(pool_first)
    limit = get_prod("virt_limit") if rare else None
    im_prod, im_pool = get_prod("instance_multiplier"), pool_first.get("instance_multiplier")
    cores = pool_first.get("cores")
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
            *(_rare_fields(pool_first, product_first) if rare else _NO_RARE_FIELDS),
            pool.quantity,
            pool.consumed,
            start if start is None or start.tzinfo is not None else as_utc(start),
            end if end is None or end.tzinfo is not None else as_utc(end),
            get_prod("arch"),
            sizes,
            None if im_prod is None else int(im_prod),
            None if im_pool is None else int(im_pool),
            None if cores is None else int(cores),
            (
                get_prod("roles"),
                get_prod("addons"),
                get_prod("support_level"),
                get_prod("usage"),
                get_prod("support_type"),
            ),
            None if limit is None else limit.strip().lower(),
            rare,
        ),
    )


def arch_matches(product_arch: str | None, consumer_arch: str | None, consumer_type: str) -> bool:
    """Candlepin's architectureMatches: ``ALL`` matches anything, ``X86`` the i386 family.

    The product's list is split on commas without trimming, as the reference does.
    A consumer without an arch fact passes unless its type is ``system``.
    """
    key = (product_arch, consumer_arch, consumer_type)
    found = _ARCHES.get(key)
    if found is None:
        if len(_ARCHES) >= _CACHE_BOUND:
            _ARCHES.clear()
        found = _ARCHES[key] = _arch_matches(product_arch, consumer_arch, consumer_type)
    return found


def _arch_matches(product_arch: str | None, consumer_arch: str | None, consumer_type: str) -> bool:
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


def _date_drop(start: datetime | None, end: datetime | None, at: datetime) -> Drop | None:
    """The date validation: a pool not yet started or already ended at ``at``."""
    if start is not None and start > at:
        return Drop("date", f"starts {start.isoformat()}, after {at.isoformat()}")
    if end is not None and end < at:
        return Drop("date", f"ended {end.isoformat()}, before {at.isoformat()}")
    return None


def _arch_drop(arch: str | None, consumer: ConsumerProfile) -> Drop:
    return Drop("arch", f"arch {arch!r} does not include {consumer.arch!r}")


def drop_reason(
    view: PoolView,
    consumer: ConsumerProfile,
    *,
    at: datetime,
    host_uuid: str | None,
    attached_pool_ids: frozenset[str],
    available: int,
    check_quantity: bool = True,
    below_multiplier: bool = True,
) -> Drop | None:
    """The first validation step or pre-entitlement filter ``view`` fails, if any."""
    drop = _date_drop(view.start, view.end, at)
    if drop is not None:
        return drop
    if view.id in attached_pool_ids and not view.multi_ent:
        return Drop("already_attached", "already attached and not multi-entitlement")
    if view.product_consumer_type is None and consumer.type_label not in _SYSTEM_LIKE:
        return Drop(
            "consumer_type", f"consumer type {consumer.type_label!r} needs requires_consumer_type"
        )
    if view.rare:
        drop = _rare_filters(view, consumer, host_uuid)
        if drop is not None:
            return drop
    # The rules' own arch check lets a consumer without an arch fact through, but the
    # server's pre-entitlement check (by consumer type) is the stricter one and runs too.
    if not arch_matches(view.arch, consumer.arch, consumer.type_label):
        return _arch_drop(view.arch, consumer)
    drop = _size_filters(view, consumer)
    if drop is not None:
        return drop
    if not check_quantity:
        return None
    if available <= 0:
        return Drop("quantity", "no quantity available")
    multiplier = view.instance_multiplier
    if (
        below_multiplier
        and not consumer.is_guest
        and multiplier is not None
        and available < multiplier
    ):
        return Drop(
            "instance_multiplier",
            f"only {available} available, less than instance_multiplier {multiplier}",
        )
    return None


def _rare_filters(view: PoolView, consumer: ConsumerProfile, host_uuid: str | None) -> Drop | None:
    """The filters on attributes most pools leave unset (see PoolView.rare), in order."""
    guest = consumer.is_guest
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
    return None


def _size_filters(view: PoolView, consumer: ConsumerProfile) -> Drop | None:
    """The size filters of footnote [2]: a non-stacked pool too small for the consumer."""
    if view.stacked:
        return None
    return _size_drop(view.sizes, view.size("vcpu", consumer.is_guest), consumer)


def _size_drop(
    sizes: Mapping[str, int], vcpu: int | None, consumer: ConsumerProfile
) -> Drop | None:
    """:func:`_size_filters` on a non-stacked pool's sizes and its vcpu as the consumer reads it."""
    guest = consumer.is_guest
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
    if guest and consumer.vcpu and vcpu is not None and 0 < vcpu < consumer.vcpu:
        return Drop("vcpu", f"covers {vcpu} vCPUs, the guest has {consumer.vcpu}")
    band = sizes.get("storage_band")
    if band is not None and consumer.storage_band > band:
        return Drop(
            "storage_band",
            f"covers {band} TB of storage, the consumer uses {consumer.storage_band}",
        )
    return None


def size_drop_of(
    sizes: Mapping[str, int], vcpu: int | None, consumer: ConsumerProfile
) -> Drop | None:
    """The size filters of a non-stacked pool with these sizes (vcpu as the consumer
    reads it): what heal_org decides once per class of facts."""
    return _size_drop(sizes, vcpu, consumer)


def _model_size_drop(written: tuple[str | None, ...], consumer: ConsumerProfile) -> Drop | None:
    """:func:`_size_filters` of a non-stacked pool setting only product attributes, from
    its :data:`SIZE_ATTRIBUTES` as written, read as :func:`view_pool` reads them ("0" or
    null unset; a guest's vcpu falls back to the cores, which are then both the pool's
    and the product's reading). ``written`` is all it reads, so it may key a cache."""
    sizes: dict[str, int] = {}
    for name, raw in zip(SIZE_ATTRIBUTES, written, strict=True):
        if raw not in _UNSET:
            sizes[name] = int(cast(str, raw))
    vcpu = sizes.get("vcpu")
    if vcpu is None and consumer.is_guest:
        vcpu = sizes.get("cores")
    return _size_drop(sizes, vcpu, consumer)


_UNREAD = Drop("", "")  # a sentinel: not in PoolFilters._size_drops yet


class PoolFilters:
    """:func:`currently_available` and :func:`drop_reason` with one consumer and one run's
    arguments bound: the candlepin-* jobs put a thousand pools or more through them, so the
    common path (dates in range, no rare attribute, a limited quantity) is read inline
    and anything else is handed to the plain functions (same answers, tested)."""

    __slots__ = (
        "_arches",
        "_at",
        "_attached",
        "_below",
        "_consumer",
        "_host_uuid",
        "_physical",
        "_plain_at",
        "_size_drops",
        "_type_ok",
    )

    def __init__(
        self,
        consumer: ConsumerProfile,
        *,
        at: datetime,
        host_uuid: str | None,
        attached_pool_ids: frozenset[str],
        below_multiplier: bool,
        plain: Sequence[bool] | None = None,
    ) -> None:
        self._consumer = consumer
        # heal_org's PoolColumns.plain, by position (see check_live).
        self._plain_at: Sequence[bool] = () if plain is None else plain
        self._at = at
        self._host_uuid = host_uuid
        self._attached = attached_pool_ids
        self._below = below_multiplier
        self._physical = not consumer.is_guest
        # A pool whose product sets no requires_consumer_type suits only system-like types.
        self._type_ok = consumer.type_label in _SYSTEM_LIKE
        # arch_matches per product arch, for this consumer (a few distinct values a job).
        self._arches: dict[str | None, bool] = {}
        # _model_size_drop per the pool's size attributes as written (SIZE_ATTRIBUTES).
        self._size_drops: dict[tuple[str | None, ...], Drop | None] = {}

    def check(self, view: PoolView) -> tuple[int, Drop | None]:
        """(currently_available, drop_reason) of ``view`` for this consumer and run."""
        quantity = view.quantity
        if quantity < 0 or view.rare or not self._type_ok:
            return self._plain(view)
        at = self._at
        start, end = view.start, view.end
        if (start is not None and start > at) or (end is not None and end < at):
            return self._plain(view)
        amount = quantity - view.consumed
        multi = view.multi_ent
        if amount > 0 and not multi:
            amount = 1
        if not multi and view.id in self._attached:
            return self._plain(view)
        consumer = self._consumer
        if not arch_matches(view.arch, consumer.arch, consumer.type_label):
            return amount, _arch_drop(view.arch, consumer)
        if not view.stacked:
            drop = _size_filters(view, consumer)
            if drop is not None:
                return amount, drop
        if amount <= 0:
            return amount, Drop("quantity", "no quantity available")
        multiplier = view.instance_multiplier
        if self._below and self._physical and multiplier is not None and amount < multiplier:
            return self._plain(view)
        return amount, None

    def check_live(self, view: PoolView) -> tuple[int, Drop | None]:
        """:meth:`check` of a pool known to be on date, with quantity left, and past the
        filters that read only the consumer's facts (arch, sizes, virt_only,
        physical_only, consumer type: heal_org's estate decides those once per class).
        A pool ``plain`` (by its position: a limited quantity, no rarely set attribute
        and no instance_multiplier) has only its quantity and whether the consumer holds
        it left to read."""
        if self._plain_at[view.position] and self._type_ok:
            if view.multi_ent:
                return view.quantity - view.consumed, None
            if view.id not in self._attached:
                return 1, None
        return self.check(view)

    def check_model(self, pool: Pool) -> tuple[int, Drop | None] | None:
        """:meth:`check` of the pool's view, read straight from the model; None when the
        pool is not of the common kind (own attributes, a rarely set one, an unlimited
        quantity, a date without a zone, an instance_multiplier to compare), which is
        then read in full. A pool dropped here is never read in full: about half of the
        pools the candlepin-* jobs give the rules are dropped by these filters."""
        quantity = pool.quantity
        attrs = pool.product_attributes
        if quantity < 0 or pool.attributes or not self._type_ok or not _RARE.isdisjoint(attrs):
            return None
        start, end = pool.start_date, pool.end_date
        if (start is not None and start.tzinfo is None) or (end is not None and end.tzinfo is None):
            return None
        multi = attrs.get("multi-entitlement")
        multi_ent = multi is not None and multi.lower() == "yes"
        amount = quantity - pool.consumed
        if amount > 0 and not multi_ent:
            amount = 1
        drop = self._model_drop(pool, attrs, multi_ent)
        if drop is not None:
            return amount, drop
        if amount <= 0:
            return amount, Drop("quantity", "no quantity available")
        if self._below and self._physical and attrs.get("instance_multiplier") not in _UNSET:
            return None
        return amount, None

    def _model_drop(
        self, pool: Pool, attrs: Mapping[str, str | None], multi_ent: bool
    ) -> Drop | None:
        """The first of the date, attached, arch and size filters that drops ``pool``."""
        drop = _date_drop(pool.start_date, pool.end_date, self._at)
        if drop is not None:
            return drop
        if not multi_ent and pool.id in self._attached:
            return Drop("already_attached", "already attached and not multi-entitlement")
        arch = attrs.get("arch")
        consumer = self._consumer
        arch_ok = self._arches.get(arch)
        if arch_ok is None:
            arch_ok = self._arches[arch] = arch_matches(
                None if arch == "0" else arch, consumer.arch, consumer.type_label
            )
        if not arch_ok:
            return _arch_drop(arch, consumer)
        if attrs.get("stacking_id") is not None:
            return None
        # The size filters read five attributes, whose values recur across pools.
        sizes = tuple(map(attrs.get, SIZE_ATTRIBUTES))
        drop = self._size_drops.get(sizes, _UNREAD)
        if drop is _UNREAD:
            drop = self._size_drops[sizes] = _model_size_drop(sizes, consumer)
        return drop

    def _plain(self, view: PoolView) -> tuple[int, Drop | None]:
        consumer = self._consumer
        available = currently_available(view, consumer)
        drop = drop_reason(
            view,
            consumer,
            at=self._at,
            host_uuid=self._host_uuid,
            attached_pool_ids=self._attached,
            available=available,
            below_multiplier=self._below,
        )
        return available, drop
