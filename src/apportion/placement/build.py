"""Compact candidates (:class:`~apportion.placement.shapes.Found`) → AllocationRequest dicts.

The wire objects are plain dicts and lists (the TypedDicts of ``contracts.launch``),
built once per candidate. Everything but the provider names follows from a
candidate's *shape* (which slots share a provider), so each shape's candidates are
built column by column: the names of all of them are one numpy take, their
allocation and mapping dicts are made by C-level ``map``/``zip`` rather than a
Python loop per candidate. Parts that cannot differ between candidates (a
provider's allocation for one list of amounts) are one shared object: the result
is written and never changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from apportion.contracts.launch import AllocationRequest, ProviderAllocation
from apportion.placement.model import Forest
from apportion.placement.pricing import Gives
from apportion.placement.shapes import (
    Assignment,
    Found,
    IndexArray,
    rows_of_shapes,
    shape_codes,
)
from apportion.placement.slots import SlotPlan

Demands = tuple[tuple[str, int], ...]
ObjectArray = npt.NDArray[np.object_]


@dataclass(frozen=True, slots=True)
class Shape:
    """How the candidates of one shape are built.

    The shape of an assignment is, per slot, the first slot holding the same
    provider (``tuple(map(assignment.index, assignment))``): a candidate with
    three unsuffixed slots on one NUMA node and a sharing disk has the shape
    (0, 0, 2).
    """

    # per allocated provider (by its first slot), in allocation order: the slot
    # holding it and its shared allocation
    givers: tuple[int, ...]
    allocations: tuple[ProviderAllocation, ...]
    # slots of the unsuffixed group's mapping, without repeats (None: no such group)
    mapped: tuple[int, ...] | None
    # whether that mapping has several providers (then it is sorted)
    several: bool
    gives: Gives


class Builder:
    """Turns compact candidates into AllocationRequest dicts, sharing immutable parts."""

    def __init__(self, forest: Forest, plan: SlotPlan) -> None:
        self.forest = forest
        self.allocations: dict[Demands, ProviderAllocation] = {}
        self.demands = [s.demands for s in plan.slots]
        self.unsuffixed = [k for k, s in enumerate(plan.slots) if not s.suffix]
        self.suffixed = [(k, s.suffix) for k, s in enumerate(plan.slots) if s.suffix]
        self.shapes: dict[tuple[int, ...], Shape] = {}
        # provider -> the one-item list naming it in a mapping (see _singles)
        self.single: dict[int, list[str]] = {}

    def _allocation(self, demands: Demands) -> ProviderAllocation:
        pa = self.allocations.get(demands)
        if pa is None:
            resources: dict[str, int] = {}
            for rc, amount in demands:
                resources[rc] = resources.get(rc, 0) + amount
            pa = self.allocations[demands] = {"resources": resources}
        return pa

    def shape(self, assignment: Assignment) -> Shape:
        key = tuple(map(assignment.index, assignment))
        shape = self.shapes.get(key)
        if shape is None:
            # Amounts of several slots on one provider add up in one allocation
            # (placed where the first of those slots is), in slot order.
            merged: dict[int, Demands] = {}
            for first, demands in zip(key, self.demands, strict=True):
                if demands:
                    merged[first] = merged.get(first, ()) + demands
            mapped = tuple(dict.fromkeys(key[k] for k in self.unsuffixed))
            allocations = tuple(self._allocation(d) for d in merged.values())
            shape = self.shapes[key] = Shape(
                givers=tuple(merged),
                allocations=allocations,
                mapped=mapped if self.unsuffixed else None,
                several=len(mapped) > 1,
                gives=tuple(
                    (k, tuple(pa["resources"].items()))
                    for k, pa in zip(merged, allocations, strict=True)
                ),
            )
        return shape

    def gives(self, assignment: Assignment) -> Gives:
        return self.shape(assignment).gives

    def build(
        self,
        found: Found,
        per_account: Mapping[str, tuple[int | None, float]] | None = None,
        costs: Sequence[float] = (),
    ) -> list[AllocationRequest]:
        """The candidates as wire objects, in answer order (selection fields with
        ``per_account`` and ``costs``, else null)."""
        if not len(found):
            return []
        allocations, mappings = self._parts(found)
        accounts = np.array(self.forest.accounts, dtype=object)[found.anchors].tolist()
        if not per_account:
            return [
                {
                    "allocations": a,
                    "mappings": m,
                    "account": account,
                    "priority_group": None,
                    "probability": None,
                    "cost_per_hour": None,
                }
                for a, m, account in zip(allocations, mappings, accounts, strict=True)
            ]
        chances = map(per_account.__getitem__, accounts)
        return [
            {
                "allocations": a,
                "mappings": m,
                "account": account,
                "priority_group": group,
                "probability": probability,
                "cost_per_hour": cost,
            }
            for a, m, account, (group, probability), cost in zip(
                allocations, mappings, accounts, chances, costs, strict=False
            )
        ]

    def _parts(self, found: Found) -> tuple[list[Any], list[Any]]:
        """Every candidate's allocations and mappings dicts, in answer order."""
        first, shape_of = shape_codes(found.assigned)
        names: ObjectArray = np.array(self.forest.uuids, dtype=object)[found.assigned]
        if len(first) == 1:
            shape = self.shape(found[first[0]][1])
            return _allocations(names, shape), self._mappings(names, found.assigned, shape)
        # Each shape's candidates are built together, then put back in answer order.
        allocations = np.empty(len(found), dtype=object)
        mappings = np.empty(len(found), dtype=object)
        for u, rows in enumerate(rows_of_shapes(shape_of, len(first))):
            shape = self.shape(found[first[u]][1])
            allocations[rows] = _allocations(names[rows], shape)
            mappings[rows] = self._mappings(names[rows], found.assigned[rows], shape)
        return allocations.tolist(), mappings.tolist()

    def _mappings(self, names: ObjectArray, assigned: IndexArray, shape: Shape) -> list[Any]:
        """The mappings dict of each row of ``names`` (``assigned``: the same rows as
        provider indices): the unsuffixed group's providers (sorted by uuid when
        several), then each suffixed group's one."""
        keys: list[str] = []
        columns: list[list[Any]] = []
        if shape.mapped is not None:
            if shape.several:
                mapped = names[:, np.array(shape.mapped, dtype=np.intp)]
                # numpy sorts an object array with the objects' own ``<``, as sorted() does.
                columns.append(np.sort(mapped, axis=1).tolist())
            else:
                columns.append(self._singles(assigned[:, shape.mapped[0]]))
            keys.append("")
        for k, suffix in self.suffixed:
            columns.append(self._singles(assigned[:, k]))
            keys.append(suffix)
        return _keyed(keys, columns)

    def _singles(self, providers: IndexArray) -> list[list[str]]:
        """The one-item list naming each of ``providers``.

        One list per provider, shared by every candidate whose group it alone
        satisfies (the answer is written and never changed): thousands of candidates
        on a few hundred hosts name each host's providers many times over.
        """
        single = self.single
        ids = providers.tolist()
        uuids = self.forest.uuids
        for p in set(ids).difference(single):
            single[p] = [uuids[p]]
        return list(map(single.__getitem__, ids))


def _allocations(names: ObjectArray, shape: Shape) -> list[Any]:
    """The allocations dict of each row of ``names`` (its providers' uuids by slot)."""
    if not shape.givers:  # only resourceless groups: nothing allocated
        return [{} for _ in range(len(names))]
    columns = [names[:, k].tolist() for k in shape.givers]
    return _valued(columns, shape.allocations)


# A dict display builds a small dict several times faster than ``dict(zip(...))``, so
# the usual sizes (a candidate allocates on up to four providers, names up to four
# groups) have one each; larger ones take the general way.


def _keyed(keys: Sequence[str], columns: Sequence[list[Any]]) -> list[dict[str, Any]]:
    """``dict(zip(keys, row))`` for each row of ``columns`` (one list per key)."""
    if len(keys) == 1:
        (a,) = keys
        return [{a: x} for x in columns[0]]
    if len(keys) == 2:
        a, b = keys
        return [{a: x, b: y} for x, y in zip(*columns, strict=True)]
    if len(keys) == 3:
        a, b, c = keys
        return [{a: x, b: y, c: z} for x, y, z in zip(*columns, strict=True)]
    if len(keys) == 4:
        a, b, c, d = keys
        return [{a: x, b: y, c: z, d: w} for x, y, z, w in zip(*columns, strict=True)]
    return list(map(dict, map(zip, repeat(keys), zip(*columns, strict=True))))


def _valued(columns: Sequence[list[Any]], values: Sequence[Any]) -> list[dict[Any, Any]]:
    """``dict(zip(row, values))`` for each row of ``columns`` (one list per value)."""
    if len(values) == 1:
        (a,) = values
        return [{x: a} for x in columns[0]]
    if len(values) == 2:
        a, b = values
        return [{x: a, y: b} for x, y in zip(*columns, strict=True)]
    if len(values) == 3:
        a, b, c = values
        return [{x: a, y: b, z: c} for x, y, z in zip(*columns, strict=True)]
    if len(values) == 4:
        a, b, c, d = values
        return [{x: a, y: b, z: c, w: d} for x, y, z, w in zip(*columns, strict=True)]
    return list(map(dict, map(zip, zip(*columns, strict=True), repeat(values))))
