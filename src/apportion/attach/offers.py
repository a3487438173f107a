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

from apportion.attach.needs import Needs, Offer
from apportion.attach.pools import PoolView, split_values_cached
from apportion.contracts.attach import Pool

GroupKey = tuple[str, str]  # ("stack", stacking_id) or ("pool", pool id)
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
    not_needed: list[GroupKey] = field(default_factory=list)


class _Reader:
    """Each pool's offers, remembering the answers for repeated values (a job's pools
    share a few role and addon strings and a few product sets)."""

    def __init__(self, needs: Needs, consider_derived: bool, server: bool) -> None:
        self.products = needs.products()
        self.roles = needs.roles
        self.addons = needs.addons
        self.needed_roles = needs.still_needed("role")
        self.needed_addons = needs.still_needed("addon")
        self.consider_derived = consider_derived
        self.server = server
        self.syspurpose = bool(self.roles or self.addons)
        self._values: dict[tuple[str, str], frozenset[str]] = {}
        self._sets: dict[tuple[frozenset[str], ...], tuple[frozenset[Offer], frozenset[Offer]]] = {}

    def _found(self, raw: str | None, wanted: frozenset[str], kind: str) -> frozenset[str]:
        if raw is None or raw == "0" or not wanted:
            return _NOTHING
        found = self._values.get((kind, raw))
        if found is None:
            found = self._values[(kind, raw)] = wanted.intersection(split_values_cached(raw))
        return found

    def read(
        self, item: Pool | PoolView
    ) -> tuple[GroupKey, frozenset[Offer], frozenset[Offer], bool]:
        """(group key, offers, protects, given by content alone) of one pool."""
        if isinstance(item, PoolView):
            key = ("stack", item.stack_id or "") if item.stacked else ("pool", item.id)
            products = self.products.intersection(item.provided(self.consider_derived))
            roles_raw, addons_raw = item.purpose[0], item.purpose[1]
            server_roles = server_addons = None
            if self.server and self.syspurpose:
                attrs = item.model.product_attributes
                server_roles, server_addons = attrs.get("roles"), attrs.get("addons")
        else:
            attrs = item.product_attributes
            stacking = attrs.get("stacking_id")
            key = ("stack", stacking) if stacking is not None else ("pool", item.id)
            products = self._products(item)
            roles_raw = addons_raw = server_roles = server_addons = None
            if self.syspurpose:
                roles_raw, addons_raw = _purpose(item, "roles"), _purpose(item, "addons")
                server_roles, server_addons = attrs.get("roles"), attrs.get("addons")
        roles = self._found(roles_raw, self.roles, "roles")
        addons = self._found(addons_raw, self.addons, "addons")
        offers, protects = self._offer_sets(products, roles, addons)
        given = bool(products) or bool(
            self._found(server_roles, self.roles, "roles")
            or self._found(server_addons, self.addons, "addons")
        )
        return key, offers, protects, given

    def _products(self, pool: Pool) -> frozenset[str]:
        wanted = self.products
        if self.consider_derived and pool.derived_product_id is not None:
            return wanted.intersection((pool.derived_product_id, *pool.derived_provided_products))
        found = wanted.intersection(pool.provided_products)
        if pool.product_id in wanted:
            found = found.union((pool.product_id,))
        return found

    def _offer_sets(
        self, products: frozenset[str], roles: frozenset[str], addons: frozenset[str]
    ) -> tuple[frozenset[Offer], frozenset[Offer]]:
        if not (products or roles or addons):
            return _NO_OFFERS, _NO_OFFERS
        signature = (products, roles, addons)
        found = self._sets.get(signature)
        if found is None:
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


def _purpose(pool: Pool, name: str) -> str | None:
    """A syspurpose attribute as written: product attribute first, "0" meaning unset."""
    raw = pool.product_attributes.get(name)
    if raw is None or raw == "0":
        raw = pool.attributes.get(name)
    return raw


def read_offers(
    pools: Sequence[Pool | PoolView],
    needs: Needs,
    partial_stacks: Sequence[str],
    consider_derived: bool,
    server: bool,
) -> PoolOffers:
    """Read every pool's offers and decide which pools and groups the rules see."""
    reader = _Reader(needs, consider_derived, server)
    out = PoolOffers()
    partial = {("stack", sid) for sid in partial_stacks}
    needing: set[GroupKey] = set()
    seen: dict[GroupKey, None] = {}
    for item in pools:
        key, offers, protects, given = reader.read(item)
        out.keys.append(key)
        out.offers.append(offers)
        out.protects.append(protects)
        out.given.append(given or key in partial)
        seen[key] = None
        if offers and (given or not server):
            needing.add(key)
    out.considered = needing | (partial & seen.keys())
    out.not_needed = [key for key in seen if key not in out.considered]
    if not server:
        out.given = [key in out.considered for key in out.keys]
        return out
    for position, key in enumerate(out.keys):
        if key in out.considered and not out.given[position] and key[0] == "stack":
            out.left_out.setdefault(key, []).append(_pool_id(pools[position]))
    return out


def _pool_id(item: Pool | PoolView) -> str:
    return item.id
