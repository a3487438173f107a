"""How much of each account's capacity is still free (``least_used``, ``expression``).

An account's providers are those whose account resolves to it (the contract: a
provider's account defaults to its root's account, a root's to its own uuid). Every
provider of the account counts, not only those in a candidate: a full host is the
very sign that the account is busy.

Free share of an account = the mean, over the requested resource classes that the
account has capacity for, of (Σ free) / (Σ capacity) across its providers, where
capacity = (total - reserved) * allocation_ratio and free = max(0, capacity - used).
Classes are averaged rather than summed because their units differ (MEMORY_MB would
drown VCPU). An account with capacity in none of the requested classes (everything
it offers comes from another account's sharing providers) gets the mean free share
of the measurable accounts — neutral, neither favoured nor punished.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from apportion.contracts.launch import Provider


def provider_accounts(providers: Mapping[str, Provider]) -> dict[str, str]:
    """provider uuid → account, following the contract's defaulting rule.

    Parent links that are unknown or cyclic are the candidates engine's to reject;
    here the walk simply stops at the last provider it can reach, so this never loops.
    """
    roots: dict[str, str] = {}
    for uuid in providers:
        path = [uuid]
        seen = {uuid}
        node = uuid
        while True:
            if node in roots:
                root = roots[node]
                break
            parent = providers[node]["parent_provider_uuid"]
            if parent is None or parent not in providers or parent in seen:
                root = node
                break
            seen.add(parent)
            path.append(parent)
            node = parent
        for member in path:
            roots[member] = root
    out: dict[str, str] = {}
    for uuid, provider in providers.items():
        root = roots[uuid]
        out[uuid] = provider["account"] or providers[root]["account"] or root
    return out


def free_shares(
    providers: Mapping[str, Provider],
    accounts: Collection[str],
    resource_classes: Collection[str],
) -> dict[str, float]:
    """account → free share in [0, 1] over ``resource_classes`` (see module doc)."""
    wanted = set(accounts)
    classes = list(resource_classes)
    capacity: dict[str, list[float]] = {a: [0.0] * len(classes) for a in wanted}
    free: dict[str, list[float]] = {a: [0.0] * len(classes) for a in wanted}
    owner = provider_accounts(providers)
    for uuid, provider in providers.items():
        account = owner[uuid]
        if account not in wanted:
            continue
        inventories = provider["inventories"]
        usages = provider["usages"]
        caps = capacity[account]
        frees = free[account]
        for k, rc in enumerate(classes):
            inv = inventories.get(rc)
            if inv is None:
                continue
            cap = (inv["total"] - inv["reserved"]) * inv["allocation_ratio"]
            if cap > 0:
                caps[k] += cap
                left = cap - usages.get(rc, 0)
                if left > 0:
                    frees[k] += left
    shares: dict[str, float] = {}
    for account in accounts:
        per_class = [f / c for f, c in zip(free[account], capacity[account], strict=True) if c > 0]
        if per_class:
            shares[account] = sum(per_class) / len(per_class)
    neutral = sum(shares.values()) / len(shares) if shares else 1.0
    return {a: shares.get(a, neutral) for a in accounts}
