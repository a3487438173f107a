"""Deployables for the studio's tests and benchmark: launch_select jobs of any size."""

from __future__ import annotations

from typing import Any

INVENTORY = {"total": 64, "max_unit": 64}


def many_accounts_job(accounts: int = 1_000, hosts: int = 4, job_id: str = "studio-big") -> Any:
    """A launch_select job over ``accounts`` accounts of ``hosts`` hosts each (one
    candidate per host), spread over three priorities with varied weights, costs and
    failures, as an administrator's production cloud might look."""
    providers = []
    settings: dict[str, Any] = {}
    failures: dict[str, int] = {}
    for a in range(accounts):
        name = f"acct{a:04d}"
        settings[name] = {
            "priority": a % 3,
            "weight": 1 + a % 4,
            "cost_per_hour": round(0.1 * (a % 5), 2),
        }
        if a % 7 == 0:
            failures[name] = a % 5
        for h in range(hosts):
            providers.append(
                {
                    "uuid": f"{name}-h{h}",
                    "account": name,
                    "inventories": {
                        "VCPU": INVENTORY,
                        "MEMORY_MB": {"total": 262_144, "max_unit": 262_144},
                    },
                    "usages": {"VCPU": (a + h) % 48},
                    "prices": {"VCPU": 0.01 * (1 + h)},
                }
            )
    return {
        "job_id": job_id,
        "providers": providers,
        "request": "resources=VCPU:2,MEMORY_MB:4096",
        "accounts": settings,
        "failures": failures,
        "seed": 7,
    }
