"""The provider forest of a launch_select job, checked and indexed for fast queries.

Providers are numbered in job order (their *index*); every other structure refers
to them by index. A provider's tree is identified by its root's index.

What is rejected here (each problem is reported with its JSON path):

* duplicate uuids, unknown parents and parent cycles;
* resource-class and trait names (Placement's ``[A-Z0-9_]+``);
* ``reserved > total``; usages that are negative or of a class the provider has no
  inventory of;
* integers above 2**53 - 1 (the largest JSON-safe integer), so capacity
  arithmetic never overflows the int64 arrays.

An inventory that can hold no allocation at all — ``min_unit`` above ``max_unit``,
or above a non-zero capacity — is accepted, as Placement accepts it: it simply fits
no request. One odd provider must not turn a whole cloud's job into a rejection;
the forest lists such inventories (:attr:`Forest.unusable`) so the result can name
them.

Capacity is Placement's ``int((total - reserved) * allocation_ratio)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np
import numpy.typing as npt

from apportion.contracts.launch import Inventory, Provider
from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name, over_limit

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
NAME_PATTERN = re.compile(r"[A-Z0-9_]+")
MAX_INTEGER = 2**53 - 1
_INTEGER_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size")
# What the forest reads of each provider (see _scan).
_PROVIDER_FIELDS = itemgetter(
    "uuid",
    "parent_provider_uuid",
    "traits",
    "aggregates",
    "prices",
    "inventories",
    "usages",
    "account",
)

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def valid_name(name: str) -> bool:
    """True for a well-formed resource class or trait name."""
    return NAME_PATTERN.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class ClassInventory:
    """One resource class across every provider that has inventory of it.

    Parallel arrays, one row per provider (ascending provider index), so a
    request amount is matched against thousands of providers in a few numpy ops.
    """

    providers: IntArray
    capacity: IntArray
    used: IntArray
    min_unit: IntArray
    max_unit: IntArray
    step_size: IntArray
    row: Mapping[int, int]

    def fitting(self, amount: int) -> IntArray:
        """Indices of the providers on which ``amount`` alone can be allocated."""
        ok: BoolArray = (
            (self.used + amount <= self.capacity)
            & (self.min_unit <= amount)
            & (self.max_unit >= amount)
            & (amount % self.step_size == 0)
        )
        fitting: IntArray = self.providers[ok]
        return fitting

    def headroom(self, provider: int) -> int:
        """The largest total a candidate may put on ``provider`` (free capacity, max_unit)."""
        r = self.row[provider]
        return int(min(self.capacity[r] - self.used[r], self.max_unit[r]))


@dataclass(frozen=True, slots=True)
class Unusable:
    """An inventory that can hold no allocation (accepted, named in the result)."""

    provider: int
    resource_class: str
    reason: str


@dataclass(frozen=True, slots=True)
class Forest:
    """Providers of one job: tree structure, traits, aggregates, inventories."""

    uuids: tuple[str, ...]
    index: Mapping[str, int]
    parents: tuple[int, ...]  # -1 for a root
    roots: tuple[int, ...]
    depths: tuple[int, ...]
    roots_array: IntArray
    traits: tuple[frozenset[str], ...]
    accounts: tuple[str, ...]
    # the job's providers (validated dicts), for what is read rarely
    providers: Sequence[Provider]
    # each provider's inventories (its validated dict of them), by index
    held: tuple[Mapping[str, Inventory], ...]
    # providers with MISC_SHARES_VIA_AGGREGATE
    sharing: frozenset[int]
    # provider index -> its unit prices per hour, for providers that state any
    prices: Mapping[int, Mapping[str, float]]
    # sharing provider -> roots of the *other* trees it serves (a provider of the
    # tree shares one of its aggregates), ascending
    serves: Mapping[int, tuple[int, ...]]
    # resource class -> inventory arrays; trait / aggregate -> provider indices
    inventories: Mapping[str, ClassInventory]
    trait_members: Mapping[str, IntArray]
    aggregate_members: Mapping[str, IntArray]
    # inventories that fit nothing, in provider order
    unusable: tuple[Unusable, ...] = ()

    @property
    def size(self) -> int:
        return len(self.uuids)

    def mask(self, members: IntArray | None) -> BoolArray:
        """A boolean mask over all providers, true at ``members``."""
        out = np.zeros(self.size, dtype=np.bool_)
        if members is not None and members.size:
            out[members] = True
        return out

    def with_trait(self, trait: str) -> BoolArray:
        return self.mask(self.trait_members.get(trait))

    def in_aggregate(self, aggregate: str) -> BoolArray:
        return self.mask(self.aggregate_members.get(aggregate))

    def ancestors_or_self(self, provider: int) -> list[int]:
        out = [provider]
        while self.parents[out[-1]] >= 0:
            out.append(self.parents[out[-1]])
        return out

    def lowest_common_ancestor(self, a: int, b: int) -> int:
        """The deepest provider above (or equal to) both, or -1 for different trees."""
        if self.roots[a] != self.roots[b]:
            return -1
        depths, parents = self.depths, self.parents
        while depths[a] > depths[b]:
            a = parents[a]
        while depths[b] > depths[a]:
            b = parents[b]
        while a != b:
            a, b = parents[a], parents[b]
        return a


# ---- building ------------------------------------------------------------------------

# resource class -> (provider, its inventory of the class, its usage of the class)
Rows = list[tuple[int, Inventory, int]]


@dataclass(slots=True)
class _Scan:
    """What one pass over the providers collects."""

    index: dict[str, int] = field(default_factory=dict)
    parents: list[int] = field(default_factory=list)
    roots: list[int] = field(default_factory=list)  # -1 until linked
    depths: list[int] = field(default_factory=list)
    # every parent came before its child: no second linking pass needed
    in_order: bool = True
    traits: list[frozenset[str]] = field(default_factory=list)
    trait_lists: dict[str, list[int]] = field(default_factory=dict)
    agg_lists: dict[str, list[int]] = field(default_factory=dict)
    prices: dict[int, Mapping[str, float]] = field(default_factory=dict)
    accounts: Sequence[str | None] = ()  # as given (None: the root's)
    held: tuple[Mapping[str, Inventory], ...] = ()  # each provider's inventories
    classes: dict[str, Rows] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    problems: list[Problem] = field(default_factory=list)


def build_forest(providers: Sequence[Provider], limits: Limits) -> Forest:
    """Check ``providers`` and index them. Raises :class:`Rejected` listing every problem."""
    if len(providers) > limits.max_providers:
        raise over_limit(
            "max_providers",
            Problem(
                "providers",
                f"{len(providers)} providers exceed the limit of {limits.max_providers} "
                f"(raise {env_name('max_providers')})",
            ),
        )
    scan = _scan(providers)
    problems = scan.problems
    bad = {n for n in scan.names if not valid_name(n)}
    if bad:
        problems += _name_problems(providers, bad)
    columns: dict[str, ClassInventory] = {}
    unusable: list[Unusable] = []
    for rc, rows in scan.classes.items():
        built = _columns(rc, rows)
        if isinstance(built, list):
            problems += built
        else:
            columns[rc], odd = built
            unusable += odd
    if problems:
        raise _reject(problems)
    if not scan.in_order:
        linked = _link(providers, scan.index)
        if isinstance(linked, Problem):
            raise _reject([linked])
        scan.parents, scan.roots, scan.depths = linked
    unusable.sort(key=lambda u: u.provider)
    return _index(providers, scan, columns, tuple(unusable))


def _scan(providers: Sequence[Provider]) -> _Scan:
    """Uuids, links in job order, traits, aggregates, prices, accounts and inventory rows.

    Every field is taken in one C-level pass over the providers (each provider's dict is
    read once, while it is in the cache, rather than once per field), then worked on
    column by column: a comprehension per field costs a fraction of one loop that
    branches on every field of every provider.
    """
    scan = _Scan()
    n = len(providers)
    columns = list(zip(*map(_PROVIDER_FIELDS, providers), strict=True)) or [()] * 8
    uuids, refs, labels, aggregates, prices, scan.held, usages, scan.accounts = columns
    scan.index = dict(zip(uuids, range(n), strict=True))
    if len(scan.index) != n:
        scan.index, scan.problems = _first_uuids(uuids)
    _link_in_order(scan, refs)
    scan.traits = _trait_sets(labels)
    scan.trait_lists = _members(labels)
    scan.agg_lists = _members(aggregates)
    scan.prices = {i: p for i, p in enumerate(prices) if p}
    classes, names = scan.classes, scan.names
    for i, held, used in zip(range(n), scan.held, usages, strict=True):
        for rc, inv in held.items():
            rows = classes.get(rc)
            if rows is None:
                rows = classes[rc] = []
            rows.append((i, inv, used.get(rc, 0) if used else 0))
        if used and not used.keys() <= held.keys():
            names.update(used)
            scan.problems += _orphan_usages(i, providers[i])
    names.update(classes, scan.trait_lists)
    return scan


def _first_uuids(uuids: Sequence[str]) -> tuple[dict[str, int], list[Problem]]:
    """uuid -> its first index, and a problem for every repeat."""
    index: dict[str, int] = {}
    problems = []
    for i, uuid in enumerate(uuids):
        if uuid in index:
            problems.append(_duplicate(i, uuid, index[uuid]))
        else:
            index[uuid] = i
    return index, problems


def _link_in_order(scan: _Scan, refs: Sequence[str | None]) -> None:
    """Parents, and roots and depths of the providers listed after their parent.

    Parents usually come first; when one does not (or is unknown), ``in_order`` is
    cleared and :func:`_link` does it properly once the problems are known.
    """
    get = scan.index.get
    n = len(refs)
    scan.parents = parents = [-1 if ref is None else get(ref, -2) for ref in refs]
    scan.roots = roots = list(range(n))
    scan.depths = depths = [0] * n
    for i, j in enumerate(parents):
        if j == -1:
            continue
        if 0 <= j < i:
            roots[i] = roots[j]
            depths[i] = depths[j] + 1
        else:
            scan.in_order = False
            roots[i] = -1


def _trait_sets(labels: Sequence[list[str]]) -> list[frozenset[str]]:
    """Each provider's traits as a set; equal trait lists share one set (a rack of
    equal hosts has a handful of distinct lists, and sets are never changed)."""
    none: frozenset[str] = frozenset()
    sets: dict[tuple[str, ...], frozenset[str]] = {}
    out = []
    for names in labels:
        if not names:
            out.append(none)
            continue
        key = tuple(names)
        traits = sets.get(key)
        if traits is None:
            traits = sets[key] = frozenset(key)
        out.append(traits)
    return out


def _members(labels: Sequence[list[str]]) -> dict[str, list[int]]:
    """label -> the indices of the providers carrying it."""
    out: dict[str, list[int]] = {}
    for i, names in enumerate(labels):
        for name in names:
            members = out.get(name)
            if members is None:
                out[name] = [i]
            else:
                members.append(i)
    return out


def _duplicate(i: int, uuid: str, first: int) -> Problem:
    return Problem(
        f"providers[{i}].uuid", f"duplicate provider uuid {uuid!r} (also providers[{first}])"
    )


def _orphan_usages(i: int, p: Provider) -> list[Problem]:
    return [
        Problem(
            f"providers[{i}].usages.{rc}", f"usage of {rc} but the provider has no {rc} inventory"
        )
        for rc in p["usages"]
        if rc not in p["inventories"]
    ]


def _index(
    providers: Sequence[Provider],
    scan: _Scan,
    columns: dict[str, ClassInventory],
    unusable: tuple[Unusable, ...],
) -> Forest:
    """The forest of checked and linked providers."""
    roots = scan.roots
    uuids = tuple(scan.index)
    sharing = frozenset(scan.trait_lists.get(SHARING_TRAIT, ()))
    return Forest(
        uuids=uuids,
        index=scan.index,
        parents=tuple(scan.parents),
        roots=tuple(roots),
        depths=tuple(scan.depths),
        roots_array=np.array(roots, dtype=np.int64),
        traits=tuple(scan.traits),
        accounts=_accounts(scan.accounts, uuids, roots),
        providers=providers,
        held=scan.held,
        sharing=sharing,
        prices=scan.prices,
        serves=_serves(providers, sharing, roots, scan.agg_lists),
        inventories=columns,
        trait_members={t: np.array(m, dtype=np.int64) for t, m in scan.trait_lists.items()},
        aggregate_members={a: np.array(m, dtype=np.int64) for a, m in scan.agg_lists.items()},
        unusable=unusable,
    )


def _accounts(
    given: Sequence[str | None], uuids: tuple[str, ...], roots: list[int]
) -> tuple[str, ...]:
    """Each provider's account: its own, else its root's, else the root's uuid."""
    if given.count(None) == len(given):  # no account anywhere: each root's uuid
        return tuple(map(uuids.__getitem__, roots))
    return tuple(
        a if a is not None else uuids[r] if (root := given[r]) is None else root
        for a, r in zip(given, roots, strict=True)
    )


def _serves(
    providers: Sequence[Provider],
    sharing: frozenset[int],
    roots: list[int],
    agg_lists: Mapping[str, list[int]],
) -> dict[int, tuple[int, ...]]:
    """Sharing provider -> the other trees it serves (they share one of its aggregates)."""
    serves: dict[int, tuple[int, ...]] = {}
    # Sharing providers usually share their aggregates: each one's trees are found once.
    agg_roots: dict[str, set[int]] = {}
    for s in sorted(sharing):
        served: set[int] = set()
        for a in providers[s]["aggregates"]:
            in_agg = agg_roots.get(a)
            if in_agg is None:
                in_agg = agg_roots[a] = {roots[m] for m in agg_lists[a]}
            served |= in_agg
        served.discard(roots[s])
        serves[s] = tuple(sorted(served))
    return serves


def _name_problems(providers: Sequence[Provider], bad: set[str]) -> list[Problem]:
    """Locate the malformed names (validated once per distinct name) for the report."""
    out = []
    for i, p in enumerate(providers):
        for key in ("inventories", "usages"):
            out += [
                Problem(f"providers[{i}].{key}.{rc}", "invalid resource class name")
                for rc in p[key]
                if rc in bad
            ]
        out += [
            Problem(f"providers[{i}].traits[{k}]", f"invalid trait name {t!r}")
            for k, t in enumerate(p["traits"])
            if t in bad
        ]
    return out


def _link(
    providers: Sequence[Provider], index: Mapping[str, int]
) -> tuple[list[int], list[int], list[int]] | Problem:
    """Parents, roots and depths, or the first structural problem."""
    parents = [-1] * len(providers)
    for i, p in enumerate(providers):
        ref = p["parent_provider_uuid"]
        if ref is not None:
            j = index.get(ref)
            if j is None:
                return Problem(
                    f"providers[{i}].parent_provider_uuid", f"unknown parent provider {ref!r}"
                )
            parents[i] = j
    return _roots(providers, parents)


def _roots(
    providers: Sequence[Provider], parents: list[int]
) -> tuple[list[int], list[int], list[int]] | Problem:
    """Roots and depths by walking up from each provider once, or the first cycle."""
    n = len(parents)
    roots = [-1] * n  # -1: not resolved yet
    depths = [0] * n
    walk = [-1] * n  # the start of the walk that last visited a provider
    for start in range(n):
        chain = []
        node = start
        while roots[node] < 0:
            if walk[node] == start:
                return Problem(
                    f"providers[{start}].parent_provider_uuid",
                    f"the parents of provider {providers[start]['uuid']!r} form a cycle",
                )
            walk[node] = start
            if parents[node] < 0:
                roots[node] = node
                break
            chain.append(node)
            node = parents[node]
        root, depth = roots[node], depths[node]
        for member in reversed(chain):
            depth += 1
            roots[member] = root
            depths[member] = depth
    return parents, roots, depths


_PATH = re.compile(r"providers\[(\d+)\]\.(\w+)")
_FIELD_ORDER = {"uuid": 0, "parent_provider_uuid": 1, "inventories": 2, "usages": 3, "traits": 4}


def _report_order(problem: Problem) -> tuple[int, int]:
    """Problems are reported provider by provider, fields in schema order."""
    m = _PATH.match(problem.path)
    return (int(m.group(1)), _FIELD_ORDER.get(m.group(2), 9)) if m else (-1, 0)


def _reject(problems: list[Problem]) -> Rejected:
    return Rejected.of(sorted(problems, key=_report_order))


# ---- one resource class ----------------------------------------------------------------


_FIELDS = itemgetter("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


def _columns(rc: str, rows: Rows) -> tuple[ClassInventory, list[Unusable]] | list[Problem]:
    """One class's inventory arrays and its unusable inventories, or its problems.

    Checked in bulk (columns taken apart by C-level map and zip); rows are located
    one by one only when something is wrong.
    """
    ids, invs, used = zip(*rows, strict=True)
    total, reserved, min_unit, explicit, step, ratio = zip(*map(_FIELDS, invs), strict=True)
    defaults = explicit.count(None)  # max_unit left out: it defaults to total
    if defaults == len(explicit):
        max_unit = total
    elif defaults:
        max_unit = tuple(t if m is None else m for t, m in zip(total, explicit, strict=True))
    else:
        max_unit = explicit
    if (
        max(max(total), max(reserved), max(min_unit), max(max_unit), max(step)) > MAX_INTEGER
        or not 0 <= min(used) <= max(used) <= MAX_INTEGER
    ):
        return _class_problems(rc, rows)
    totals, reserves = np.array(total, dtype=np.int64), np.array(reserved, dtype=np.int64)
    if (reserves > totals).any():
        return _class_problems(rc, rows)
    # Every integer is below 2**53, so float64 holds it exactly: this is Placement's
    # int((total - reserved) * ratio), capped where a huge ratio would overflow int64.
    # A product past float64's range is inf, which the cap turns into MAX_INTEGER.
    with np.errstate(over="ignore"):
        free = (totals - reserves) * np.array(ratio, dtype=np.float64)
    capacity = np.minimum(np.floor(free), MAX_INTEGER).astype(np.int64)
    inventory = ClassInventory(
        providers=np.array(ids, dtype=np.int64),
        capacity=capacity,
        used=np.array(used, dtype=np.int64),
        min_unit=np.array(min_unit, dtype=np.int64),
        max_unit=np.array(max_unit, dtype=np.int64),
        step_size=np.array(step, dtype=np.int64),
        row=dict(zip(ids, range(len(ids)), strict=True)),
    )
    return inventory, _unusable(rc, ids, explicit, inventory)


def _unusable(
    rc: str, ids: Sequence[int], explicit: Sequence[int | None], inv: ClassInventory
) -> list[Unusable]:
    """Inventories that no amount fits: min_unit above max_unit or above the capacity.

    A zero capacity (an empty or fully reserved inventory) fits nothing either, but
    that is ordinary: it is named only when it also declares a max_unit below its
    min_unit.
    """
    if explicit.count(None) == len(explicit):
        declared = np.zeros(len(explicit), dtype=np.bool_)
    else:
        declared = np.array([m is not None for m in explicit], dtype=np.bool_)
    above_max = inv.min_unit > inv.max_unit
    odd = (declared & above_max) | (
        (inv.capacity > 0) & (above_max | (inv.min_unit > inv.capacity))
    )
    out = []
    for r in np.flatnonzero(odd).tolist():
        low, high, capacity = int(inv.min_unit[r]), int(inv.max_unit[r]), int(inv.capacity[r])
        if low <= high:
            reason = f"min_unit ({low}) exceeds its capacity ({capacity})"
        elif explicit[r] is None:
            reason = f"min_unit ({low}) exceeds max_unit (defaults to total, {high})"
        else:
            reason = f"min_unit ({low}) exceeds max_unit ({high})"
        out.append(Unusable(ids[r], rc, reason + ": this inventory fits no request"))
    return out


def _class_problems(rc: str, rows: Rows) -> list[Problem]:
    """Every problem of one class's rows, located."""
    found: list[Problem] = []
    for i, inv, used in rows:
        path = f"providers[{i}].inventories.{rc}"
        values = (inv["total"], inv["reserved"], inv["min_unit"], inv["max_unit"], inv["step_size"])
        big = [
            name for name, v in zip(_INTEGER_FIELDS, values, strict=True) if (v or 0) > MAX_INTEGER
        ]
        if big:
            found.append(Problem(f"{path}.{big[0]}", f"must be at most {MAX_INTEGER}"))
        elif inv["reserved"] > inv["total"]:
            found.append(
                Problem(
                    f"{path}.reserved",
                    f"reserved ({inv['reserved']}) exceeds total ({inv['total']})",
                )
            )
        if not 0 <= used <= MAX_INTEGER:
            found.append(
                Problem(f"providers[{i}].usages.{rc}", f"must be between 0 and {MAX_INTEGER}")
            )
    return found
