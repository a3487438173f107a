"""An organisation's pools as columns: what every consumer of a heal reads, read once.

heal_org runs auto_attach for hundreds of consumers over the same pools. What a pool
offers, which group it is in, its sizes, its syspurpose strings and its flags do not
change from one consumer to the next; only its ``consumed`` does, as the binds raise it.
These are read once into arrays (by position in the job's pool list), so that for each
consumer

* the pools that can matter to it are found with a few array operations (by product,
  role, addon and stack), less those its class of facts can never attach (arch, sizes,
  virt_only, physical_only, consumer type: the filters that read only the pool and
  the consumer's facts), decided once per class per distinct reading of the pool;
* every pool's priority is computed for all pools at once
  (:meth:`~apportion.attach.priority.Scorer.score_columns`);
* a pool's coverage unit is built once per kind of consumer (guest or not, arch, type:
  all it reads of the consumer), until a bind changes the pool.

Arrays hold 64-bit integers: a job whose numbers could overflow them (sizes or
quantities beyond 2**40) is scored pool by pool, as a single job is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from apportion.attach.compliance import CoverageUnit
from apportion.attach.facts import ConsumerProfile
from apportion.attach.pools import PoolView, arch_matches, size_drop_of

GroupKey = tuple[str, str]  # ("stack", stacking_id) or ("pool", pool id), as in .offers
Positions = npt.NDArray[np.intp]
_SCORED_SIZES = ("sockets", "cores", "ram", "vcpu")
_SYSTEM_LIKE = frozenset({"system", "hypervisor", "uebercert"})
# Integers beyond this are not put in the int64 columns (see the module's docstring).
_BIG = 2**40
# A pool's reading by the filters that depend only on the consumer's facts:
# (arch, stacked, sizes, vcpu as a guest reads it, virt_only (either reading),
# physical_only, no product requires_consumer_type).
_Reading = tuple[Any, ...]


def _positions(values: Iterable[int]) -> Positions:
    return np.fromiter(sorted(set(values)), dtype=np.intp)


def _key(view: PoolView) -> GroupKey:
    return ("stack", view.stack_id or "") if view.stacked else ("pool", view.id)


class _Index:
    """Positions of the pools of every group touching a product, role or addon."""

    def __init__(self, views: Sequence[PoolView], readings: Sequence[Iterable[str]]) -> None:
        groups: dict[GroupKey, list[int]] = {}
        touching: dict[str, set[GroupKey]] = {}
        for view, values in zip(views, readings, strict=True):
            key = _key(view)
            groups.setdefault(key, []).append(view.position)
            for value in values:
                touching.setdefault(value, set()).add(key)
        self.positions = {
            value: _positions(p for key in keys for p in groups[key])
            for value, keys in touching.items()
        }


class PoolColumns:
    """The per-pool values every consumer reads, by position; ``available`` as it falls."""

    def __init__(self, views: Sequence[PoolView], roles_addons: Sequence[tuple[Any, Any]]) -> None:
        self.size = len(views)
        self.by_product = _Index(views, [(v.product_id, *v.products) for v in views]).positions
        # What auto_attach's offers read of each pool: its group, the pools providing
        # each product, its roles and addons as read and as the server reads them.
        self.keys = [_key(v) for v in views]
        providing: dict[str, set[int]] = {}
        for view in views:
            for product in view.products:
                providing.setdefault(product, set()).add(view.position)
        self.providing = {p: _positions(found) for p, found in providing.items()}
        self.offer_purpose_ids, self.offer_purposes = _distinct(
            [
                (
                    v.purpose[0],
                    v.purpose[1],
                    v.model.product_attributes.get("roles"),
                    v.model.product_attributes.get("addons"),
                )
                for v in views
            ]
        )
        self.by_role = _Index(views, [r for r, _ in roles_addons]).positions
        self.by_addon = _Index(views, [a for _, a in roles_addons]).positions
        stacks: dict[str, list[int]] = {}
        for view in views:
            if view.stacked:
                stacks.setdefault(view.stack_id or "", []).append(view.position)
        self.by_stack = {sid: _positions(p) for sid, p in stacks.items()}
        self._filter_ids, self._filter_readings = _distinct([_filter_reading(v) for v in views])
        # Per class of facts: which distinct filter readings its consumers can attach.
        self._classes: dict[tuple[Any, ...], npt.NDArray[np.bool_]] = {}
        self.scoring = ScoreColumns.of(views)
        # Pools whose checks, once live and past the filters of the consumer's class, come
        # down to the quantity and whether the consumer holds them (PoolFilters.check_live).
        self.plain = [
            not v.rare and v.quantity >= 0 and v.instance_multiplier is None for v in views
        ]
        self._guest_steps = [1] * self.size
        self._physical_steps = [
            1 if v.instance_multiplier is None else max(v.instance_multiplier, 1) for v in views
        ]
        # (guest, arch, type) → each pool's CoverageUnit for such consumers, once built.
        self._units: dict[tuple[bool, str | None, str], list[CoverageUnit | None]] = {}

    def product_masks(self, wanted: Sequence[str]) -> npt.NDArray[np.int64]:
        """Per pool, which of ``wanted`` (at most 62) it provides, as bits (bit i: wanted[i])."""
        masks = np.zeros(self.size, dtype=np.int64)
        for bit, product in enumerate(wanted):
            found = self.providing.get(product)
            if found is not None:
                masks[found] |= 1 << bit
        return masks

    def steps(self, guest: bool) -> list[int]:
        """Each pool's quantity step (pools.increment): a physical consumer steps by the
        pool's instance_multiplier, a guest by 1."""
        if guest:
            return self._guest_steps
        return self._physical_steps

    def units(self, consumer: ConsumerProfile) -> list[CoverageUnit | None]:
        """The coverage units built so far for consumers of this kind, by position."""
        key = (consumer.is_guest, consumer.arch, consumer.type_label)
        found = self._units.get(key)
        if found is None:
            found = self._units[key] = [None] * self.size
        return found

    def changed(self, position: int, available: int) -> None:
        """A bind changed the pool: its units hold its former view."""
        for units in self._units.values():
            units[position] = None
        if self.scoring is not None:
            self.scoring.available[position] = available

    def relevant(
        self,
        consumer: ConsumerProfile,
        to_cover: Iterable[str],
        partial_stacks: Iterable[str],
        live: npt.NDArray[np.bool_],
    ) -> list[int]:
        """Positions, in order, of the live pools of every group that can matter to the
        consumer, less those its facts can never attach."""
        mask = np.zeros(self.size, dtype=np.bool_)
        for product in to_cover:
            found = self.by_product.get(product)
            if found is not None:
                mask[found] = True
        if consumer.role is not None:
            found = self.by_role.get(consumer.role.strip().lower())
            if found is not None:
                mask[found] = True
        for addon in consumer.addons:
            found = self.by_addon.get(addon.lower())
            if found is not None:
                mask[found] = True
        for sid in partial_stacks:
            found = self.by_stack.get(sid)
            if found is not None:
                mask[found] = True
        mask &= live
        mask &= self._attachable(consumer)[self._filter_ids]
        positions: list[int] = np.flatnonzero(mask).tolist()
        return positions

    def _attachable(self, consumer: ConsumerProfile) -> npt.NDArray[np.bool_]:
        key = _facts_class(consumer)
        found = self._classes.get(key)
        if found is None:
            found = self._classes[key] = np.fromiter(
                (not _dropped(r, consumer) for r in self._filter_readings),
                dtype=np.bool_,
                count=len(self._filter_readings),
            )
        return found


def _distinct(readings: Sequence[_Reading]) -> tuple[Positions, list[_Reading]]:
    ids: dict[_Reading, int] = {}
    column = np.fromiter(
        (ids.setdefault(r, len(ids)) for r in readings), dtype=np.intp, count=len(readings)
    )
    return column, list(ids)


def _filter_reading(view: PoolView) -> _Reading:
    return (
        view.arch,
        view.stacked,
        tuple(sorted(view.sizes.items())),
        view.size("vcpu", True),
        view.virt_only_any,
        view.physical_only,
        view.product_consumer_type is None,
    )


def _facts_class(consumer: ConsumerProfile) -> tuple[Any, ...]:
    return (
        consumer.type_label,
        consumer.is_guest,
        consumer.arch,
        consumer.has_socket_fact,
        consumer.sockets,
        consumer.cores,
        consumer.ram,
        consumer.vcpu,
        consumer.storage_band,
    )


def _dropped(reading: _Reading, consumer: ConsumerProfile) -> bool:
    """Whether a pool read as ``reading`` fails one of the filters that read only the
    consumer's facts (pools.drop_reason drops it whatever else holds)."""
    arch, stacked, sizes, guest_vcpu, virt_only, physical_only, untyped = reading
    guest = consumer.is_guest
    if untyped and consumer.type_label not in _SYSTEM_LIKE:
        return True
    if (virt_only and not guest) or (physical_only and guest):
        return True
    if not arch_matches(arch, consumer.arch, consumer.type_label):
        return True
    if stacked:
        return False
    size_map = dict(sizes)
    vcpu = guest_vcpu if guest else size_map.get("vcpu")
    return size_drop_of(size_map, vcpu, consumer) is not None


class ScoreColumns:
    """What :meth:`Scorer.score_columns` reads of every pool."""

    __slots__ = (
        "available",
        "by_product",
        "has_products",
        "host_specific",
        "max_products",
        "purpose_ids",
        "purposes",
        "sizes",
        "socket_multiplier",
        "virt_only",
    )

    @classmethod
    def of(cls, views: Sequence[PoolView]) -> ScoreColumns | None:
        numbers = [v.quantity for v in views] + [v.consumed for v in views]
        numbers += [n for v in views for n in v.sizes.values()]
        numbers += [v.cores_pool_first or 0 for v in views]
        numbers += [v.instance_multiplier_pool_first or 0 for v in views]
        if any(abs(n) >= _BIG for n in numbers):
            return None
        return cls(views)

    def __init__(self, views: Sequence[PoolView]) -> None:
        # The products a priority counts: the derived ones when the pool has them.
        products = [
            frozenset(v.derived_products if v.derived_products is not None else v.products)
            for v in views
        ]
        touching: dict[str, list[int]] = {}
        for position, found in enumerate(products):
            for product in found:
                touching.setdefault(product, []).append(position)
        self.by_product = {p: np.array(found, dtype=np.intp) for p, found in touching.items()}
        self.has_products = np.array([bool(p) for p in products], dtype=np.bool_)
        self.max_products = max((len(p) for p in products), default=0)
        self.purpose_ids, self.purposes = _distinct([v.purpose for v in views])
        self.virt_only = np.array([v.virt_only for v in views], dtype=np.bool_)
        self.host_specific = np.array([v.requires_host is not None for v in views], dtype=np.bool_)
        self.socket_multiplier = np.array(
            [v.instance_multiplier_pool_first or 1 for v in views], dtype=np.int64
        )
        self.available = np.array([v.quantity - v.consumed for v in views], dtype=np.int64)
        # (guest, attribute) → (distinct sizes above 0, each pool's index into them or -1).
        self.sizes: dict[tuple[bool, str], tuple[list[int], Positions]] = {}
        for guest in (False, True):
            for attribute in _SCORED_SIZES:
                column = [v.size(attribute, guest) or 0 for v in views]
                self.sizes[(guest, attribute)] = _size_column(column)

    def count(self, products: Iterable[str]) -> npt.NDArray[np.int64]:
        """How many of ``products`` each pool counts."""
        counts = np.zeros(len(self.has_products), dtype=np.int64)
        for product in products:
            found = self.by_product.get(product)
            if found is not None:
                counts[found] += 1
        return counts


def _size_column(column: Sequence[int]) -> tuple[list[int], Positions]:
    distinct = sorted({s for s in column if s > 0})
    where = {s: i for i, s in enumerate(distinct)}
    index = np.fromiter((where.get(s, -1) for s in column), dtype=np.intp, count=len(column))
    return distinct, index
