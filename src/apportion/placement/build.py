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
from apportion.placement.shapes import Assignment, Found, rows_of_shapes, shape_codes
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
            return _allocations(names, shape), self._mappings(names, shape)
        allocations: list[Any] = []
        mappings: list[Any] = []
        groups = rows_of_shapes(shape_of, len(first))
        for u, rows in enumerate(groups):
            shape = self.shape(found[first[u]][1])
            allocations += _allocations(names[rows], shape)
            mappings += self._mappings(names[rows], shape)
        # The shapes' candidates one after another: back into answer order.
        order = np.argsort(np.concatenate(groups), kind="stable").tolist()
        return [allocations[i] for i in order], [mappings[i] for i in order]

    def _mappings(self, names: ObjectArray, shape: Shape) -> list[Any]:
        """The mappings dict of each row of ``names``: the unsuffixed group's
        providers (sorted by uuid when several), then each suffixed group's one."""
        keys: list[str] = []
        columns: list[list[Any]] = []
        if shape.mapped is not None:
            mapped = names[:, np.array(shape.mapped, dtype=np.intp)]
            # numpy sorts an object array with the objects' own ``<``, as sorted() does.
            columns.append((np.sort(mapped, axis=1) if shape.several else mapped).tolist())
            keys.append("")
        for k, suffix in self.suffixed:
            columns.append(names[:, [k]].tolist())
            keys.append(suffix)
        if len(columns) == 1:
            key = keys[0]
            return [{key: names_} for names_ in columns[0]]
        return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]


def _allocations(names: ObjectArray, shape: Shape) -> list[Any]:
    """The allocations dict of each row of ``names`` (its providers' uuids by slot)."""
    givers = names[:, np.array(shape.givers, dtype=np.intp)].tolist()
    return list(map(dict, map(zip, givers, repeat(shape.allocations))))
