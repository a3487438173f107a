"""Which pools the rules are given, and what each offers of what the consumer needs.

Every pool of a job passes here once, before any is read in full, so this reads the
few fields it needs straight from the pool (the same readings as
:class:`~apportion.attach.pools.PoolView`: stacked iff the product has a
``stacking_id``, syspurpose values product attribute first, "0" meaning unset).

* candlepin-* profiles reproduce the server (``CandlepinPoolManager.getBestPools``): it
  gives the rules only the pools that provide a product to cover, whose product's
  roles contain the consumer's role or whose product's addons one of the consumer's
  addons, and every pool of a partial stack. A pool that matches none of these is left
  out even when the rest of its stack is given (it never reaches the stack's validation,
  extra-attribute removal or pruning).
* ``seed``: a group is given whole when one of its pools offers something still needed
  (or it is a partial stack).

A group that offers nothing still needed is not considered at all (validation only
removes pools, so it never could), unless it is a partial stack, which the rules
complete whatever it provides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from apportion.attach.needs import Needs, Offer
from apportion.attach.pools import PoolView, split_values_cached
from apportion.contracts.attach import Pool

if TYPE_CHECKING:
    from apportion.attach.columns import PoolColumns

GroupKey = tuple[str, str]  # ("stack", stacking_id) or ("pool", pool id)
# The most products wanted that read_columns finds as bits of one 64-bit integer.
_MASK_BITS = 62
_Reading = tuple[frozenset[str], str | None, str | None, str | None, str | None]
_NOTHING: frozenset[str] = frozenset()
_NO_OFFERS: frozenset[Offer] = frozenset()


@dataclass(slots=True)
class PoolOffers:
    """Per pool (by position): its group, what it offers of what is still needed, what
    pruning must keep, and whether the rules are given it; and which groups count."""

    keys: list[GroupKey] = field(default_factory=list)
    offers: list[frozenset[Offer]] = field(default_factory=list)
    protects: list[frozenset[Offer]] = field(default_factory=list)
    given: list[bool] = field(default_factory=list)
    considered: set[GroupKey] = field(default_factory=set)
    # Pools of considered stacks that the server does not give the rules.
    left_out: dict[GroupKey, list[str]] = field(default_factory=dict)
    # Every group once, in the order of its first pool.
    groups: dict[GroupKey, None] = field(default_factory=dict)


class _Reader:
    """Each pool's offers. A job's pools share a few syspurpose strings and a few offer
    sets: the answers for those are remembered, so most pools cost a few lookups."""

    def __init__(self, needs: Needs, consider_derived: bool, server: bool) -> None:
        self.products = needs.products()
        self.roles = needs.roles
        self.addons = needs.addons
        self.needed_roles = needs.still_needed("role")
        self.needed_addons = needs.still_needed("addon")
        self.consider_derived = consider_derived
        self.server = server
        self.syspurpose = bool(self.roles or self.addons)
        self.single = {p: frozenset((p,)) for p in self.products}
        # (roles, addons as read; the product's roles, addons as the server reads them) →
        # (consumer roles found, consumer addons found, whether the server matches them).
        self._purpose: dict[
            tuple[str | None, ...], tuple[frozenset[str], frozenset[str], bool]
        ] = {}
        # (products found, roles found, addons found) → (offers, protects).
        self._sets: dict[tuple[frozenset[str], ...], tuple[frozenset[Offer], frozenset[Offer]]] = {}
        # (products found, roles and addons as read, the product's roles and addons) →
        # (offers, protects, given for what it offers): the answer for a pool not yet read.
        self._readings: dict[_Reading, tuple[frozenset[Offer], frozenset[Offer], bool]] = {}

    def purpose(self, raw: tuple[str | None, ...]) -> tuple[frozenset[str], frozenset[str], bool]:
        found = self._purpose.get(raw)
        if found is None:
            roles = self._found(raw[0], self.roles)
            addons = self._found(raw[1], self.addons)
            server = bool(self._found(raw[2], self.roles) or self._found(raw[3], self.addons))
            found = self._purpose[raw] = (roles, addons, server)
        return found

    @staticmethod
    def _found(raw: str | None, wanted: frozenset[str]) -> frozenset[str]:
        if raw is None or raw == "0" or not wanted:
            return _NOTHING
        return wanted.intersection(split_values_cached(raw))

    def view(self, item: PoolView) -> tuple[GroupKey, frozenset[Offer], frozenset[Offer], bool]:
        """(group key, offers, protects, given for what it offers) of a pool already read."""
        key = ("stack", item.stack_id or "") if item.stacked else ("pool", item.id)
        products = self.products.intersection(item.provided(self.consider_derived))
        if not self.syspurpose:
            return (key, *self.offer_sets(products, _NOTHING, _NOTHING), bool(products))
        attrs = item.model.product_attributes
        raw = (item.purpose[0], item.purpose[1], attrs.get("roles"), attrs.get("addons"))
        roles, addons, server = self.purpose(raw)
        return (key, *self.offer_sets(products, roles, addons), bool(products) or server)

    def read(
        self, pools: Sequence[Pool | PoolView], out: PoolOffers, partial: set[GroupKey]
    ) -> set[GroupKey]:
        """Every pool's offers into ``out``; the groups with a pool offering something
        needed. Every pool of a job passes here once, so a pool not yet read is read
        from the model's fields directly, reusing earlier pools' answers."""
        keys, offers_of, protects_of, given_of = out.keys, out.offers, out.protects, out.given
        needing: set[GroupKey] = set()
        wanted, single, server = self.products, self.single, self.server
        known, derived, purpose = self._readings.get, self.consider_derived, self.syspurpose
        for item in pools:
            if isinstance(item, PoolView):
                key, offers, protects, given = self.view(item)
            else:
                attrs = item.product_attributes
                stacking = attrs.get("stacking_id")
                key = ("stack", stacking) if stacking is not None else ("pool", item.id)
                if derived and item.derived_product_id is not None:
                    products = wanted.intersection(
                        (item.derived_product_id, *item.derived_provided_products)
                    )
                elif wanted.isdisjoint(item.provided_products):
                    products = single.get(item.product_id, _NOTHING)
                else:
                    products = wanted.intersection(item.provided_products)
                    if item.product_id in wanted:
                        products = products.union((item.product_id,))
                if purpose:
                    roles, addons, own = attrs.get("roles"), attrs.get("addons"), item.attributes
                    reading = (
                        products,
                        roles if roles is not None and roles != "0" else own.get("roles"),
                        addons if addons is not None and addons != "0" else own.get("addons"),
                        roles,
                        addons,
                    )
                else:
                    reading = (products, None, None, None, None)
                offers, protects, given = known(reading) or self.answer(reading)
            keys.append(key)
            offers_of.append(offers)
            protects_of.append(protects)
            given_of.append(given or key in partial)
            if offers and (given or not server):
                needing.add(key)
        return needing

    def read_columns(
        self,
        pools: Sequence[PoolView],
        out: PoolOffers,
        partial: set[GroupKey],
        columns: PoolColumns,
    ) -> set[GroupKey]:
        """:meth:`read` of views whose pools the columns hold (heal_org). A pool's offers
        follow from which of the products wanted it provides (bits, found for all pools
        at once) and its syspurpose readings: each distinct pair is read once."""
        positions = np.fromiter((v.position for v in pools), dtype=np.intp, count=len(pools))
        wanted = sorted(self.products)
        masks = columns.product_masks(wanted)[positions]
        if self.syspurpose:
            readings = columns.offer_purpose_ids[positions]
        else:
            readings = np.zeros(len(positions), dtype=np.intp)
        kinds = max(len(columns.offer_purposes), 1)
        if len(wanted) + kinds.bit_length() < 63:
            # Each (mask, reading) pair as one integer: a plain sort finds the distinct ones.
            codes, inverse = np.unique(masks * kinds + readings, return_inverse=True)
            pairs = [divmod(code, kinds) for code in codes.tolist()]
        else:
            rows, inverse = np.unique(
                np.stack((masks, readings), axis=1), axis=0, return_inverse=True
            )
            pairs = rows.tolist()
        answers = [self._pair(wanted, mask, reading, columns) for mask, reading in pairs]
        which: list[int] = inverse.reshape(-1).tolist()
        group_of = columns.keys
        keys = [group_of[p] for p in positions.tolist()]
        out.keys.extend(keys)
        out.offers.extend([answers[i][0] for i in which])
        out.protects.extend([answers[i][1] for i in which])
        given = [answers[i][2] for i in which]
        if partial:
            out.given.extend([g or k in partial for g, k in zip(given, keys, strict=True)])
        else:
            out.given.extend(given)
        counts = [bool(a[0]) and (a[2] or not self.server) for a in answers]
        return {keys[n] for n, i in enumerate(which) if counts[i]}

    def _pair(
        self, wanted: list[str], mask: int, reading: int, columns: PoolColumns
    ) -> tuple[frozenset[Offer], frozenset[Offer], bool]:
        """(offers, protects, given for what it offers) of a pool providing the products
        ``mask`` selects of ``wanted`` with the syspurpose readings ``reading``."""
        products = frozenset(p for bit, p in enumerate(wanted) if mask >> bit & 1)
        if not self.syspurpose:
            return (*self.offer_sets(products, _NOTHING, _NOTHING), bool(products))
        roles, addons, matched = self.purpose(columns.offer_purposes[reading])
        return (*self.offer_sets(products, roles, addons), bool(products) or matched)

    def answer(self, reading: _Reading) -> tuple[frozenset[Offer], frozenset[Offer], bool]:
        """(offers, protects, given for what it offers) of a pool read as ``reading``:
        (products found, roles and addons as read, the product's roles and addons)."""
        products = reading[0]
        if not self.syspurpose:
            offers, protects = self.offer_sets(products, _NOTHING, _NOTHING)
            found = self._readings[reading] = (offers, protects, bool(products))
            return found
        roles, addons, matched = self.purpose(reading[1:])
        offers, protects = self.offer_sets(products, roles, addons)
        found = self._readings[reading] = (offers, protects, bool(products) or matched)
        return found

    def offer_sets(
        self, products: frozenset[str], roles: frozenset[str], addons: frozenset[str]
    ) -> tuple[frozenset[Offer], frozenset[Offer]]:
        signature = (products, roles, addons)
        found = self._sets.get(signature)
        if found is None and not (products or roles or addons):
            found = self._sets[signature] = (_NO_OFFERS, _NO_OFFERS)
        elif found is None:
            common = [("product", p) for p in products]
            protects = frozenset(
                common + [("role", r) for r in roles] + [("addon", a) for a in addons]
            )
            offers = frozenset(
                common
                + [("role", r) for r in roles & self.needed_roles]
                + [("addon", a) for a in addons & self.needed_addons]
            )
            found = self._sets[signature] = (offers, protects if self.server else offers)
        return found


def read_offers(
    pools: Sequence[Pool | PoolView],
    needs: Needs,
    partial_stacks: Sequence[str],
    consider_derived: bool,
    server: bool,
    columns: PoolColumns | None = None,
) -> PoolOffers:
    """Read every pool's offers and decide which pools and groups the rules see.
    ``columns``: the pools' values read once (heal_org; ``pools`` are then their views)."""
    reader = _Reader(needs, consider_derived, server)
    out = PoolOffers()
    partial = {("stack", sid) for sid in partial_stacks}
    if columns is not None and not consider_derived and len(reader.products) <= _MASK_BITS:
        # heal_org: every pool is a view of the columns' pools.
        views = cast(Sequence[PoolView], pools)
        needing = reader.read_columns(views, out, partial, columns)
    else:
        needing = reader.read(pools, out, partial)
    return _decide(out, pools, needing, partial, server)


def _decide(
    out: PoolOffers,
    pools: Sequence[Pool | PoolView],
    needing: set[GroupKey],
    partial: set[GroupKey],
    server: bool,
) -> PoolOffers:
    keys = out.keys
    seen = out.groups = dict.fromkeys(keys)
    considered = out.considered = needing | (partial & seen.keys())
    if not server:
        out.given = [key in considered for key in keys]
        return out
    left_out = out.left_out
    for key, given, pool in zip(keys, out.given, pools, strict=True):
        if not given and key[0] == "stack" and key in considered:
            left_out.setdefault(key, []).append(pool.id)
    return out
