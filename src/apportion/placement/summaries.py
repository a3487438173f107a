"""provider_summaries: every provider of every tree a returned candidate touches.

As in Placement, a tree is included whole (providers without inventory get
``resources {}``), sharing providers' trees included; each summary lists every
resource class of the provider (not only requested ones) with capacity and used,
its traits (sorted), parent and root.
"""

from __future__ import annotations

from collections.abc import Iterable

from apportion.contracts.launch import ProviderSummary, ResourceSummary, trusted
from apportion.placement.model import Forest

# The fields set of every summary built here, shared (see trusted()).
_FIELDS = set(ProviderSummary.model_fields)
_PAIR = {"capacity", "used"}


def provider_summaries(forest: Forest, providers: Iterable[int]) -> dict[str, ProviderSummary]:
    """Summaries of the trees of ``providers``, in job order."""
    roots = {forest.roots[p] for p in providers}
    members = sorted(m for r in roots for m in forest.tree_members[r])
    # Python lists once per class: indexing numpy scalars one by one is slow.
    columns = {
        rc: (inv.row, inv.capacity.tolist(), inv.used.tolist())
        for rc, inv in forest.inventories.items()
    }
    # Identical (capacity, used) pairs are common (a rack of equal hosts); the
    # summary objects are immutable, so one instance serves them all.
    cache: dict[tuple[int, int], ResourceSummary] = {}
    uuids, parents, roots_of = forest.uuids, forest.parents, forest.roots
    providers_ = forest.providers
    out: dict[str, ProviderSummary] = {}
    for p in members:
        resources: dict[str, ResourceSummary] = {}
        for rc in providers_[p].inventories:
            row, capacity, used = columns[rc]
            r = row[p]
            pair = (capacity[r], used[r])
            rs = cache.get(pair)
            if rs is None:
                rs = cache[pair] = trusted(
                    ResourceSummary, {"capacity": pair[0], "used": pair[1]}, _PAIR
                )
            resources[rc] = rs
        parent = parents[p]
        # Built from the forest's own checked values: not re-validated (see trusted()).
        values = {
            "resources": resources,
            "traits": sorted(forest.traits[p]),
            "parent_provider_uuid": uuids[parent] if parent >= 0 else None,
            "root_provider_uuid": uuids[roots_of[p]],
        }
        out[uuids[p]] = trusted(ProviderSummary, values, _FIELDS)
    return out
