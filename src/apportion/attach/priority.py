"""Pool priority (the seed's "Pool Priority Algorithm"), in three rule profiles.

A pool's score starts from a constant and adds, per syspurpose category
(products, roles, addons, support_level, usage and, in 5.44, support_type):

* match: weight × |unsatisfied ∩ pool values| / |unsatisfied|;
* null rule: when the consumer has nothing unsatisfied in the category and the pool
  does not set it either, null factor × weight;
* mismatch: when the consumer specifies the category and the pool sets it too,
  mismatch factor × weight × |specified − pool values| / |specified|;

then +100 for a virt_only pool, +150 for a host-specific one, and for each sizing
attribute (sockets, cores, ram, vcpu) up to 20 for closeness to the consumer's need
(20 when either side does not set it; 0 when the pool has too little available).

Profiles: ``seed`` scores all four sizing attributes for every consumer (the seed's
worked example: 9028.5); ``candlepin-5.42`` scores only those that apply to the
consumer type (physical: sockets, cores, ram; guest: vcpu, ram — 9008.5 on the same
example); ``candlepin-5.44`` uses the reference's current weights.

Scores are exact fractions; they are only turned into floats for the explanation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from apportion.attach.facts import ConsumerProfile
from apportion.attach.pools import PoolView
from apportion.attach.values import split_values

CATEGORIES = ("products", "roles", "addons", "support_level", "usage", "support_type")
if TYPE_CHECKING:
    from apportion.attach.columns import ScoreColumns

# The int64 columns' headroom: a score whose terms could reach it is computed pool by pool.
_INT64_ROOM = 2**61
_SIZING = ("sockets", "cores", "ram", "vcpu")
_PHYSICAL_SIZING = ("sockets", "cores", "ram")
_GUEST_SIZING = ("vcpu", "ram")


@dataclass(frozen=True, slots=True)
class RuleProfile:
    name: str
    start: Fraction
    weights: tuple[tuple[str, Fraction], ...]
    null_factor: Fraction
    mismatch_factor: Fraction
    score_all_sizes: bool
    # candlepin-* profiles give rules.js's answers; the seed profile reads the seed's
    # prose where it and rules.js differ (the reference's steps 1 and 7) and, where the
    # seed is silent about the server's part, a simpler reading of its own (needs.py,
    # offers.py), so that seed answers stay stable for its users. Each difference is a
    # property below.
    follows_rules_js: bool = True

    @property
    def drops_pools_below_instance_multiplier(self) -> bool:
        """Seed step 1 drops a physical consumer's pool with less available than its
        instance_multiplier; rules.js keeps it (and gives it no quantity)."""
        return not self.follows_rules_js

    @property
    def most_products_first(self) -> bool:
        """Seed step 7 picks the group covering the most still-needed products first;
        rules.js never compares the number of products covered."""
        return not self.follows_rules_js

    @property
    def partials_cover_products_only(self) -> bool:
        """rules.js completes partial stacks taking only their products off what is still
        needed (a role or addon they carry stays needed for the greedy rounds); the seed
        ("complete partial stacks", then cover what is left) counts all they provide."""
        return self.follows_rules_js

    @property
    def reads_like_the_server(self) -> bool:
        """rules.js and its server: only the compliance maps' entitlements satisfy a role
        or addon (needs.py), the server offers the rules only the pools that match
        (offers.py), pruning keeps the consumer's role and addons (offers.py's
        ``protects``)."""
        return self.follows_rules_js

    def sizing_attributes(self, consumer: ConsumerProfile) -> tuple[str, ...]:
        if self.score_all_sizes:
            return _SIZING
        return _GUEST_SIZING if consumer.is_guest else _PHYSICAL_SIZING


_F = Fraction
_SEED_WEIGHTS = (
    ("products", _F(5600)),
    ("roles", _F(2800)),
    ("addons", _F(1400)),
    ("support_level", _F(700)),
    ("usage", _F(350)),
)

PROFILES: Mapping[str, RuleProfile] = {
    "seed": RuleProfile(
        "seed",
        _F(545),
        _SEED_WEIGHTS,
        _F(1, 100),
        _F(-5, 100),
        score_all_sizes=True,
        follows_rules_js=False,
    ),
    "candlepin-5.42": RuleProfile(
        "candlepin-5.42", _F(545), _SEED_WEIGHTS, _F(1, 100), _F(-5, 100), score_all_sizes=False
    ),
    "candlepin-5.44": RuleProfile(
        "candlepin-5.44",
        _F(1105),
        (
            ("products", _F(11200)),
            ("roles", _F(5600)),
            ("addons", _F(2800)),
            ("support_level", _F(1400)),
            ("usage", _F(700)),
            ("support_type", _F(350)),
        ),
        _F(5, 1000),
        _F(-25, 1000),
        score_all_sizes=False,
    ),
}


@dataclass(frozen=True, slots=True)
class Wants:
    """What the consumer asks for, per category: unsatisfied and specified values.

    Products are compared as given; syspurpose values lower-cased and trimmed.
    """

    unsatisfied: Mapping[str, frozenset[str]]
    specified: Mapping[str, frozenset[str]]


class Scorer:
    """Pool priorities for one consumer, as exact integers in units of ``1 / scale``.

    Every term of the score is a rational number whose denominator divides the
    product of the factors' denominators (100 or 1000), 2 (the half point per extra
    entitlement), the sizes of the consumer's unsatisfied and specified value sets,
    and the denominators of its facts. Scaling by their least common multiple makes
    every score an exact integer: as exact as fractions, and sums and comparisons
    cost what integer arithmetic costs.
    """

    __slots__ = (
        "_categories",
        "_guest",
        "_hundred",
        "_hundred_fifty",
        "_needs",
        "_plan_twenties",
        "_purpose",
        "_purposes",
        "_scored_sizes",
        "_sizing",
        "_sizing_plan",
        "_table",
        "_twenty",
        "consumer",
        "profile",
        "scale",
        "start",
    )

    def __init__(self, consumer: ConsumerProfile, wants: Wants, profile: RuleProfile) -> None:
        self.consumer = consumer
        self.profile = profile
        self._guest = consumer.is_guest
        denominators = [
            2,
            profile.null_factor.denominator,
            profile.mismatch_factor.denominator,
            profile.start.denominator,
        ]
        for category, _ in profile.weights:
            denominators += [
                len(wants.unsatisfied[category]) or 1,
                len(wants.specified[category]) or 1,
            ]
        self._sizing = profile.sizing_attributes(consumer)
        self._needs = {a: Fraction(consumer.fact(a)) for a in self._sizing}
        denominators += [need.denominator for need in self._needs.values()]
        scale = math.lcm(*denominators)
        self.scale = scale
        self.start = int(profile.start * scale)
        # Per category: (name, unsatisfied, specified, match unit, null score, mismatch unit).
        self._categories: list[tuple[str, frozenset[str], frozenset[str], int, int, int]] = []
        # score() reads the categories in this order: products first, then the pool's
        # syspurpose values in the order of CATEGORIES.
        assert tuple(c for c, _ in profile.weights) == CATEGORIES[: len(profile.weights)]
        for category, weight in profile.weights:
            unsatisfied = wants.unsatisfied[category]
            specified = wants.specified[category]
            self._categories.append(
                (
                    category,
                    unsatisfied,
                    specified,
                    int(weight * scale / len(unsatisfied)) if unsatisfied else 0,
                    int(profile.null_factor * weight * scale),
                    int(profile.mismatch_factor * weight * scale / len(specified))
                    if specified
                    else 0,
                )
            )
        # (attribute, pool size) → (entitlements required, scaled points when available).
        self._table: dict[tuple[str, int], tuple[int, int]] = {}
        # Per syspurpose category scored (roles, addons, support_level, usage and in 5.44
        # support_type): the attribute as written → scaled points.
        self._purpose: tuple[dict[str | None, int], ...] = tuple({} for _ in profile.weights[1:])
        # The same points summed, per combination of the five attributes as written.
        self._purposes: dict[tuple[str | None, ...], int] = {}
        self._sizing_plan = tuple((a, self._needs[a] > 0) for a in self._sizing)
        self._hundred = 100 * scale
        self._hundred_fifty = 150 * scale
        self._twenty = 20 * scale
        self._plan_twenties = self._twenty * len(self._sizing_plan)
        # The sizing attributes the consumer needs (the plan's attributes are distinct).
        self._scored_sizes = frozenset(a for a, applies in self._sizing_plan if applies)

    def _sizing_entry(self, attribute: str, size: int) -> tuple[int, int]:
        entry = self._table.get((attribute, size))
        if entry is None:
            need = self._needs[attribute]
            required = math.ceil(need / size)
            closeness = 10 - (size * required - need) - Fraction(required - 1, 2)
            entry = (required, int(max(Fraction(0), closeness) * 2 * self.scale))
            self._table[(attribute, size)] = entry
        return entry

    def _category_points(self, index: int, raw: str | None) -> int:
        """The scaled points of syspurpose category ``index`` (1 = roles …) for a pool whose
        attribute is written ``raw`` (None when unset)."""
        _, unsatisfied, specified, match, null, mismatch = self._categories[index]
        values = split_values(raw)
        total = 0
        if unsatisfied:
            total += match * len(unsatisfied.intersection(values))
        elif not values:
            total += null
        if specified and values:
            total += mismatch * len(specified.difference(values))
        self._purpose[index - 1][raw] = total
        return total

    def _purpose_points(self, purpose: tuple[str | None, ...]) -> int:
        """The scaled points of the syspurpose categories scored, for a pool whose
        attributes are written ``purpose`` (see :attr:`PoolView.purpose`)."""
        total = 0
        index = 1
        for known, raw in zip(self._purpose, purpose, strict=False):
            points = known.get(raw)
            total += points if points is not None else self._category_points(index, raw)
            index += 1
        self._purposes[purpose] = total
        return total

    def score(self, view: PoolView, sizes: Mapping[str, int] | None = None) -> int:
        if sizes is None:
            sizes = view.sizes_for(self._guest)
        total = self.start
        _, unsatisfied, specified, match, null, mismatch = self._categories[0]
        derived = view.derived_products
        products = derived if derived is not None else view.products
        if unsatisfied:
            total += match * len(unsatisfied.intersection(products))
        elif not products:
            total += null
        if specified and products:
            # |specified − products|, counted without copying the (possibly thousands of)
            # specified products: the intersection walks the pool's few products.
            total += mismatch * (len(specified) - len(specified.intersection(products)))
        # The syspurpose values of pools are drawn from a few distinct strings (and their
        # combinations recur): the points are computed once per combination as written.
        points = self._purposes.get(view.purpose)
        total += points if points is not None else self._purpose_points(view.purpose)
        if view.virt_only:
            total += self._hundred
        if view.requires_host is not None:
            total += self._hundred_fifty
        # Each sizing attribute of the plan scores 20 unless both the consumer (a need
        # above 0) and the pool (a size above 0) set it: the 20s of the whole plan are
        # counted at once and taken back for the pool's few sizes that score instead.
        total += self._plan_twenties
        if sizes:
            twenty = self._twenty
            table = self._table
            scored = self._scored_sizes
            for attribute, size in sizes.items():
                if size <= 0 or attribute not in scored:
                    continue
                total -= twenty
                entry = table.get((attribute, size))
                required, points = (
                    entry if entry is not None else self._sizing_entry(attribute, size)
                )
                # Instance-based pools: the available count is in instances, not entitlements.
                multi = (view.instance_multiplier_pool_first or 1) if attribute == "sockets" else 1
                if view.quantity - view.consumed >= required * multi:
                    total += points
        return total

    def score_columns(self, columns: ScoreColumns) -> list[int] | None:
        """:meth:`score` of every pool of ``columns`` at once (by position), or None when
        the scaled terms could overflow 64-bit integers (then score pool by pool)."""
        _, unsatisfied, specified, match, null, mismatch = self._categories[0]
        purposes = self._purposes
        points = [
            found if (found := purposes.get(p)) is not None else self._purpose_points(p)
            for p in columns.purposes
        ]
        sizing = [self._size_terms(columns, a) for a in self._scored_sizes]
        widest = max(columns.max_products, 1)
        bounds = [
            self.start,
            match * widest,
            null,
            mismatch * len(specified),
            max(map(abs, points), default=0),
            self._hundred + self._hundred_fifty + self._plan_twenties,
            *(t for s in sizing for t in s[2:]),
        ]
        if sum(map(abs, bounds)) >= _INT64_ROOM:
            return None
        has = columns.has_products
        total = np.full(len(has), self.start, dtype=np.int64)
        if unsatisfied:
            total += match * columns.count(unsatisfied)
        else:
            total[~has] += null
        if specified:
            total[has] += (mismatch * (len(specified) - columns.count(specified)))[has]
        total += np.array(points, dtype=np.int64)[columns.purpose_ids]
        total[columns.virt_only] += self._hundred
        total[columns.host_specific] += self._hundred_fifty
        total += self._plan_twenties
        for attribute, (required, gained, _, _) in zip(self._scored_sizes, sizing, strict=True):
            _, index = columns.sizes[(self._guest, attribute)]
            sized = index >= 0
            total[sized] -= self._twenty
            at = index[sized]
            needed = required[at]
            if attribute == "sockets":
                needed = needed * columns.socket_multiplier[sized]
            won = np.where(columns.available[sized] >= needed, gained[at], 0)
            total[sized] += won
        return total.tolist()

    def _size_terms(
        self, columns: ScoreColumns, attribute: str
    ) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Per distinct size of ``attribute``: entitlements required and points when
        available; and the largest of each (times the socket multiplier), for the bound."""
        distinct, _ = columns.sizes[(self._guest, attribute)]
        entries = [self._sizing_entry(attribute, size) for size in distinct]
        required = [r for r, _ in entries]
        gained = [g for _, g in entries]
        widest = max(required, default=0) * (2**40 if attribute == "sockets" else 1)
        top = max(gained, default=0) + self._twenty
        if widest >= _INT64_ROOM or top >= _INT64_ROOM:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), _INT64_ROOM, 0
        return np.array(required, dtype=np.int64), np.array(gained, dtype=np.int64), widest, top

    def value(self, scaled: int | Fraction) -> Fraction:
        """A scaled score (or average of scores) back as an exact number."""
        return Fraction(scaled) / self.scale
