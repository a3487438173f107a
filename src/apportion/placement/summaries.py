"""provider_summaries: every provider of every tree a returned candidate touches.

As in Placement, a tree is included whole (providers without inventory get
``resources {}``), sharing providers' trees included; each summary lists every
resource class of the provider (not only requested ones) with capacity and used,
its traits (sorted), parent and root.

Equal summaries are common (a rack of equal hosts). The result is written once and
never changed, so equal resource maps and trait lists are one object each; which
providers have equal resource maps is found from whole columns taken with numpy (the
classes in the provider's own order, then each class's capacity and used), so only
one map per distinct value is built.
"""

from __future__ import annotations

from itertools import count
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
    """Each member's resources map; equal maps are one object.

    A member's key is the classes of its inventories in their own order (numbered by
    the first member having that order), then each class's capacity and used (-1 where
    it has none): members with equal keys have equal maps. One stable sort over the
    key columns groups equal keys, each group led by its first member, whose map is
    the only one built.
    """
    inventories = map(forest.held.__getitem__, members)
    orders: dict[tuple[str, ...], int] = {}
    columns = [np.array(list(map(orders.setdefault, map(tuple, inventories), count())))]
    for inv in forest.inventories.values():
        dense = np.full(forest.size, -1, dtype=np.int64)
        dense[inv.providers] = np.arange(len(inv.providers))
        rows = dense[at]
        has = rows >= 0
        rows = np.where(has, rows, 0)
        columns.append(np.where(has, inv.capacity[rows], -1))
        columns.append(np.where(has, inv.used[rows], -1))
    keys = np.stack(columns)
    by_key = np.lexsort(keys[::-1])  # stable: equal keys stay in member order
    ordered = keys[:, by_key]
    starts = np.empty(len(members), dtype=np.bool_)
    starts[0] = True
    starts[1:] = (ordered[:, 1:] != ordered[:, :-1]).any(axis=0)
    leader = by_key[starts]  # each group's first member (its position in ``members``)
    first = np.empty(len(members), dtype=np.intp)
    first[by_key] = leader[np.cumsum(starts) - 1]
    shared = {i: _resource_map(forest, members[i]) for i in leader.tolist()}
    return list(map(shared.__getitem__, first.tolist()))


def _resource_map(forest: Forest, p: int) -> dict[str, ResourceSummary]:
    out: dict[str, Any] = {}
    for rc in forest.held[p]:
        inv = forest.inventories[rc]
        r = inv.row[p]
        out[rc] = {"capacity": int(inv.capacity[r]), "used": int(inv.used[r])}
    return out
