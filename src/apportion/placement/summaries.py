"""provider_summaries: every provider of every tree a returned candidate touches.

As in Placement, a tree is included whole (providers without inventory get
``resources {}``), sharing providers' trees included; each summary lists every
resource class of the provider (not only requested ones) with capacity and used,
its traits (sorted), parent and root.
"""

from __future__ import annotations

from collections.abc import Iterable

from apportion.contracts.launch import ProviderSummary, ResourceSummary
from apportion.placement.model import Forest


def provider_summaries(forest: Forest, providers: Iterable[int]) -> dict[str, ProviderSummary]:
    """Summaries of the trees of ``providers``, in job order."""
    roots = {forest.roots[p] for p in providers}
    members = sorted(m for r in roots for m in forest.tree_members[r])
    # Python lists once per class: indexing numpy scalars one by one is slow.
    columns = {
        rc: (inv.row, inv.capacity.tolist(), inv.used.tolist())
        for rc, inv in forest.inventories.items()
    }
    # Equal summaries are common (a rack of equal hosts). The result is written once
    # and never changed, so equal resource maps and trait lists are one object each.
    shared: dict[tuple[tuple[str, int, int], ...], dict[str, ResourceSummary]] = {}
    trait_lists: dict[frozenset[str], list[str]] = {}
    uuids, parents, roots_of, traits = forest.uuids, forest.parents, forest.roots, forest.traits
    providers_ = forest.providers
    out: dict[str, ProviderSummary] = {}
    for p in members:
        key = []
        for rc in providers_[p]["inventories"]:
            row, capacity, used = columns[rc]
            r = row[p]
            key.append((rc, capacity[r], used[r]))
        signature = tuple(key)
        resources = shared.get(signature)
        if resources is None:
            resources = shared[signature] = {
                rc: {"capacity": capacity, "used": used} for rc, capacity, used in signature
            }
        labels = trait_lists.get(traits[p])
        if labels is None:
            labels = trait_lists[traits[p]] = sorted(traits[p])
        parent = parents[p]
        out[uuids[p]] = {
            "resources": resources,
            "traits": labels,
            "parent_provider_uuid": uuids[parent] if parent >= 0 else None,
            "root_provider_uuid": uuids[roots_of[p]],
        }
    return out
