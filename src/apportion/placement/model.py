"""The provider forest of a launch_select job, checked and indexed for fast queries.

Providers are numbered in job order (their *index*); every other structure refers
to them by index. A provider's tree is identified by its root's index.

What is checked here (each problem is reported with its JSON path):

* duplicate uuids, unknown parents and parent cycles;
* resource-class and trait names (Placement's ``[A-Z0-9_]+``);
* inventories that cannot exist in Placement: ``reserved > total``,
  ``min_unit > max_unit``; usages that are negative or of a class the provider
  has no inventory of;
* integers above 2**53 - 1 (the largest JSON-safe integer), so capacity
  arithmetic never overflows the int64 arrays.

Capacity is Placement's ``int((total - reserved) * allocation_ratio)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from apportion.contracts.launch import Inventory, Provider
from apportion.errors import Problem, Rejected
from apportion.limits import Limits

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
NAME_PATTERN = re.compile(r"[A-Z0-9_]+")
MAX_INTEGER = 2**53 - 1

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

    def summary(self, provider: int) -> tuple[int, int]:
        """``(capacity, used)`` of ``provider``."""
        r = self.row[provider]
        return int(self.capacity[r]), int(self.used[r])


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
    # the job's providers (immutable models), for what is read rarely
    providers: Sequence[Provider]
    # root index -> every provider of that tree, in job order
    tree_members: Mapping[int, tuple[int, ...]]
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


def _inventory_problems(path: str, inv: Inventory) -> list[Problem]:
    for name in ("total", "reserved", "min_unit", "max_unit", "step_size"):
        value = getattr(inv, name)
        if value is not None and value > MAX_INTEGER:
            return [Problem(f"{path}.{name}", f"must be at most {MAX_INTEGER}")]
    out = []
    if inv.reserved > inv.total:
        out.append(
            Problem(f"{path}.reserved", f"reserved ({inv.reserved}) exceeds total ({inv.total})")
        )
    # Only an explicit max_unit can contradict min_unit: the default (total) may be
    # below min_unit on a small or empty inventory, which then simply fits nothing.
    if inv.max_unit is not None and inv.min_unit > inv.max_unit:
        out.append(
            Problem(
                f"{path}.min_unit", f"min_unit ({inv.min_unit}) exceeds max_unit ({inv.max_unit})"
            )
        )
    return out


def _name_problems(providers: Sequence[Provider], bad: set[str]) -> list[Problem]:
    """Locate the malformed names (validated once per distinct name) for the report."""
    out = []
    for i, p in enumerate(providers):
        out += [
            Problem(f"providers[{i}].inventories.{rc}", "invalid resource class name")
            for rc in p.inventories
            if rc in bad
        ]
        out += [
            Problem(f"providers[{i}].usages.{rc}", "invalid resource class name")
            for rc in p.usages
            if rc in bad
        ]
        out += [
            Problem(f"providers[{i}].traits[{k}]", f"invalid trait name {t!r}")
            for k, t in enumerate(p.traits)
            if t in bad
        ]
    return out


def _link(
    providers: Sequence[Provider], index: Mapping[str, int]
) -> tuple[list[int], list[int], list[int]] | Problem:
    """Parents, roots and depths, or the first structural problem."""
    n = len(providers)
    parents = [-1] * n
    for i, p in enumerate(providers):
        ref = p.parent_provider_uuid
        if ref is not None:
            j = index.get(ref)
            if j is None:
                return Problem(
                    f"providers[{i}].parent_provider_uuid", f"unknown parent provider {ref!r}"
                )
            parents[i] = j
    roots = [-1] * n  # -1: not resolved yet
    depths = [0] * n
    walk = [-1] * n  # the start of the walk that last visited a provider
    for start in range(n):
        if roots[start] >= 0:
            continue
        chain = []
        node = start
        while roots[node] < 0:
            if walk[node] == start:
                return Problem(
                    f"providers[{start}].parent_provider_uuid",
                    f"the parents of provider {providers[start].uuid!r} form a cycle",
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


def build_forest(providers: Sequence[Provider], limits: Limits) -> Forest:
    """Check ``providers`` and index them. Raises :class:`Rejected` listing every problem."""
    if len(providers) > limits.max_providers:
        raise Rejected.at(
            "providers",
            f"{len(providers)} providers exceed the limit of {limits.max_providers}",
        )
    problems: list[Problem] = []
    index: dict[str, int] = {}
    names: set[str] = set()
    trait_lists: dict[str, list[int]] = {}
    agg_lists: dict[str, list[int]] = {}
    traits: list[frozenset[str]] = []
    prices: dict[int, Mapping[str, float]] = {}
    no_traits: frozenset[str] = frozenset()
    # resource class -> rows (provider, total, reserved, ratio, min, max, step, used, explicit max)
    tables: dict[str, list[tuple[int, int, int, float, int, int, int, int, bool]]] = {}
    parents: list[int] = []
    roots: list[int] = []
    depths: list[int] = []
    linked_in_order = True
    for i, p in enumerate(providers):
        uuid = p.uuid
        if uuid in index:
            problems.append(
                Problem(
                    f"providers[{i}].uuid",
                    f"duplicate provider uuid {uuid!r} (also providers[{index[uuid]}])",
                )
            )
        else:
            index[uuid] = i
        # Parents usually come before their children: link those on the way.
        ref = p.parent_provider_uuid
        if ref is None:
            parents.append(-1)
            roots.append(i)
            depths.append(0)
        else:
            j = index.get(ref, -1)
            parents.append(j)
            if 0 <= j < i:
                roots.append(roots[j])
                depths.append(depths[j] + 1)
            else:
                linked_in_order = False
                roots.append(-1)
                depths.append(0)
        if p.traits:
            names.update(p.traits)
            traits.append(frozenset(p.traits))
            for t in p.traits:
                trait_lists.setdefault(t, []).append(i)
        else:
            traits.append(no_traits)
        for a in p.aggregates:
            agg_lists.setdefault(a, []).append(i)
        if p.prices:
            prices[i] = p.prices
        inventories, usages = p.inventories, p.usages
        if inventories:
            names.update(inventories)
            for rc, inv in inventories.items():
                rows = tables.get(rc)
                if rows is None:
                    rows = tables[rc] = []
                max_unit = inv.max_unit
                rows.append(
                    (
                        i,
                        inv.total,
                        inv.reserved,
                        inv.allocation_ratio,
                        inv.min_unit,
                        inv.total if max_unit is None else max_unit,
                        inv.step_size,
                        usages.get(rc, 0),
                        max_unit is not None,
                    )
                )
        if usages and (usages.keys() - inventories.keys()):
            names.update(usages)
            problems += [
                Problem(
                    f"providers[{i}].usages.{rc}",
                    f"usage of {rc} but the provider has no {rc} inventory",
                )
                for rc in usages
                if rc not in inventories
            ]
    bad = {n for n in names if not valid_name(n)}
    if bad:
        problems += _name_problems(providers, bad)
    columns = {}
    for rc, rows in tables.items():
        columns[rc], found = _columns(providers, rc, rows)
        problems += found
    if problems:
        raise _reject(problems)
    if not linked_in_order:
        linked = _link(providers, index)
        if isinstance(linked, Problem):
            raise _reject([linked])
        parents, roots, depths = linked

    tree_members: dict[int, list[int]] = {}
    for i, r in enumerate(roots):
        tree_members.setdefault(r, []).append(i)
    sharing = frozenset(trait_lists.get(SHARING_TRAIT, ()))
    serves: dict[int, tuple[int, ...]] = {}
    # Sharing providers usually share their aggregates: their trees are found once.
    agg_roots: dict[str, set[int]] = {}
    for s in sorted(sharing):
        served: set[int] = set()
        for a in providers[s].aggregates:
            in_agg = agg_roots.get(a)
            if in_agg is None:
                in_agg = agg_roots[a] = {roots[m] for m in agg_lists[a]}
            served |= in_agg
        served.discard(roots[s])
        serves[s] = tuple(sorted(served))
    root_accounts: dict[int, str] = {}
    for r in tree_members:
        own = providers[r].account
        root_accounts[r] = providers[r].uuid if own is None else own
    return Forest(
        uuids=tuple(index),
        index=index,
        parents=tuple(parents),
        roots=tuple(roots),
        depths=tuple(depths),
        roots_array=np.array(roots, dtype=np.int64),
        traits=tuple(traits),
        accounts=tuple(
            p.account if p.account is not None else root_accounts[roots[i]]
            for i, p in enumerate(providers)
        ),
        providers=providers,
        tree_members={r: tuple(m) for r, m in tree_members.items()},
        sharing=sharing,
        prices=prices,
        serves=serves,
        inventories=columns,
        trait_members={t: np.array(m, dtype=np.int64) for t, m in trait_lists.items()},
        aggregate_members={a: np.array(m, dtype=np.int64) for a, m in agg_lists.items()},
    )


def _empty_inventory() -> ClassInventory:
    nothing = np.zeros(0, dtype=np.int64)
    return ClassInventory(nothing, nothing, nothing, nothing, nothing, nothing, {})


def _columns(
    providers: Sequence[Provider],
    rc: str,
    rows: list[tuple[int, int, int, float, int, int, int, int, bool]],
) -> tuple[ClassInventory, list[Problem]]:
    """One class's inventory arrays, checked in bulk (problems located only if any).

    Every integer is below 2**53 once checked, so float64 holds it exactly and the
    capacity is computed exactly as Placement's ``int((total - reserved) * ratio)``.
    """
    try:
        table = np.array(rows, dtype=np.float64)
    except OverflowError:  # an integer beyond any float: report, build nothing
        table = np.zeros((0, 9))
        rows = [r for r in rows if max(r[1], r[2], r[4], r[5], r[6], r[7]) > MAX_INTEGER]
        found: list[Problem] = []
        for row in rows:
            i = row[0]
            inv = providers[i].inventories[rc]
            found += _inventory_problems(f"providers[{i}].inventories.{rc}", inv)
            if row[7] > MAX_INTEGER:
                found.append(
                    Problem(f"providers[{i}].usages.{rc}", f"must be between 0 and {MAX_INTEGER}")
                )
        return _empty_inventory(), found
    total, reserved, ratio = table[:, 1], table[:, 2], table[:, 3]
    min_unit, max_unit, step, used, explicit = (table[:, k] for k in range(4, 9))
    wrong = (
        (table[:, [1, 2, 4, 5, 6]] > MAX_INTEGER).any(axis=1)
        | (reserved > total)
        | ((explicit > 0) & (min_unit > max_unit))
        | (used < 0)
        | (used > MAX_INTEGER)
    )
    problems: list[Problem] = []
    for r in np.flatnonzero(wrong).tolist():
        i = rows[r][0]
        problems += _inventory_problems(
            f"providers[{i}].inventories.{rc}", providers[i].inventories[rc]
        )
        if not 0 <= rows[r][7] <= MAX_INTEGER:
            problems.append(
                Problem(f"providers[{i}].usages.{rc}", f"must be between 0 and {MAX_INTEGER}")
            )
    if problems:  # the job is rejected: build nothing (out-of-range floats do not cast)
        return _empty_inventory(), problems
    ids = [row[0] for row in rows]
    capacity = np.minimum(np.floor((total - reserved) * ratio), MAX_INTEGER)
    inventory = ClassInventory(
        providers=np.array(ids, dtype=np.int64),
        capacity=capacity.astype(np.int64),
        used=used.astype(np.int64),
        min_unit=min_unit.astype(np.int64),
        max_unit=max_unit.astype(np.int64),
        step_size=step.astype(np.int64),
        row=dict(zip(ids, range(len(ids)), strict=True)),
    )
    return inventory, problems
