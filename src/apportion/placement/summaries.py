"""provider_summaries: every provider of every tree a returned candidate touches.

As in Placement, a tree is included whole (providers without inventory get
``resources {}``), sharing providers' trees included; each summary lists every
resource class of the provider (not only requested ones) with capacity and used,
its traits (sorted), parent and root.

Equal summaries are common (a rack of equal hosts). The result is written once and
never changed, so equal resource maps and trait lists are one object each; which
providers have equal resource maps is found with numpy over whole columns (the
classes in the provider's own order, then each class's capacity and used), so only
one map per distinct value is built in Python.
"""

from __future__ import annotations

from itertools import count
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from apportion.contracts.launch import ProviderSummary, ResourceSummary
from apportion.placement.model import Forest

IntArray = npt.NDArray[np.int64]
ObjectArray = npt.NDArray[np.object_]


def provider_summaries(forest: Forest, providers: IntArray) -> dict[str, ProviderSummary]:
    """Summaries of the trees of ``providers`` (indices), in job order."""
    if not len(providers):
        return {}
    # Trees marked in a mask over the provider indices (a root is its tree's index).
    trees = forest.mask(forest.roots_array[providers])
    members: list[int] = np.flatnonzero(trees[forest.roots_array]).tolist()
    at = np.array(members, dtype=np.int64)
    traits = list(map(forest.traits.__getitem__, members))
    trait_lists = {t: sorted(t) for t in set(traits)}
    # A parent of -1 (a root's) takes the last item: None.
    names: ObjectArray = np.array([*forest.uuids, None], dtype=object)
    parents = names[np.array(forest.parents, dtype=np.int64)[at]].tolist()
    return {
        name: {
            "resources": resources,
            "traits": trait_lists[t],
            "parent_provider_uuid": parent,
            "root_provider_uuid": root,
        }
        for name, resources, t, parent, root in zip(
            names[at].tolist(),
            _resources(forest, members, at),
            traits,
            parents,
            names[forest.roots_array[at]].tolist(),
            strict=True,
        )
    }


def _resources(
    forest: Forest, members: list[int], at: IntArray
) -> list[dict[str, ResourceSummary]]:
    """Each member's resources map; equal maps are one object."""
    inventories = map(itemgetter("inventories"), map(forest.providers.__getitem__, members))
    # Which classes, in which order (the keys of the provider's inventories): numbered
    # by the first member that has that order.
    orders: dict[tuple[str, ...], int] = {}
    order = list(map(orders.setdefault, map(tuple, inventories), count()))
    code = np.array(order, dtype=np.int64)
    for inv in forest.inventories.values():
        dense = np.full(forest.size, -1, dtype=np.int64)
        dense[inv.providers] = np.arange(len(inv.providers))
        rows = dense[at]
        has = rows >= 0
        rows = np.where(has, rows, 0)
        code = _joined(code, np.where(has, inv.capacity[rows], -1))
        code = _joined(code, np.where(has, inv.used[rows], -1))
    _, first, group = np.unique(code, return_index=True, return_inverse=True)
    shared = [_resource_map(forest, members[i]) for i in first.tolist()]
    return [shared[g] for g in group.reshape(-1).tolist()]


def _joined(code: IntArray, values: IntArray) -> IntArray:
    """One small number per distinct (code, value) pair (small: products stay in int64)."""
    _, value = np.unique(values, return_inverse=True)
    pair = code * (int(value.max()) + 1) + value.reshape(-1)
    _, joined = np.unique(pair, return_inverse=True)
    out: IntArray = joined.reshape(-1)
    return out


def _resource_map(forest: Forest, p: int) -> dict[str, ResourceSummary]:
    out: dict[str, Any] = {}
    for rc in forest.providers[p]["inventories"]:
        inv = forest.inventories[rc]
        r = inv.row[p]
        out[rc] = {"capacity": int(inv.capacity[r]), "used": int(inv.used[r])}
    return out
