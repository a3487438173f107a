"""guest_host_attach: footnote [1] steps 1–8, the derived pools and the guest's attach."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.unit.attach.support import consumer, ent, guest_attach, pool, stacking

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
HOST = "host-1"


def _job(
    pools: list[dict[str, Any]],
    *,
    guest_installed: tuple[str, ...] = ("rhel",),
    host: dict[str, Any] | None = None,
    guest: dict[str, Any] | None = None,
    **more: Any,
) -> dict[str, Any]:
    return {
        "host": host or consumer(uuid=HOST, ctype="hypervisor", sockets="2", arch="x86_64"),
        "guest": guest
        or consumer(uuid="guest-1", guest=True, arch="x86_64", installed=guest_installed),
        "pools": pools,
        "rules": "candlepin-5.42",
        **more,
    }


def _dc_pool(pool_id: str = "dc-pool", virt_limit: str = "unlimited", **kw: Any) -> dict[str, Any]:
    return pool(
        pool_id,
        "datacenter-sku",
        quantity=4,
        pattrs=stacking("dc", sockets="2", virt_limit=virt_limit),
        derived="datacenter-guest-sku",
        derived_provided=("rhel",),
        **kw,
    )


def test_the_example_host_attaches_dc_pool_and_the_guest_its_derived_pool() -> None:
    payload = json.loads((EXAMPLES / "guest_host_attach.json").read_text())
    result = guest_attach(payload)
    assert result["host_pool_quantities"] == {"dc-pool": 1}
    (derived,) = result["derived_pools"]
    assert derived["product_id"] == "datacenter-guest-sku"
    assert derived["provided_products"] == ["rhel"]
    assert derived["quantity"] == -1
    assert derived["attributes"]["virt_only"] == "true"
    assert derived["attributes"]["requires_host"] == "host-1"
    assert result["guest_pool_quantities"] == {derived["id"]: 1}
    assert result["explanation"]["targets"] == ["rhel"]


def test_a_numeric_virt_limit_gives_virt_limit_times_the_host_quantity() -> None:
    # 4 sockets on 2-socket entitlements: the host takes 2, the guest pool gets 2 × 4.
    host = consumer(uuid=HOST, ctype="hypervisor", sockets="4")
    result = guest_attach(_job([_dc_pool(virt_limit="4")], host=host))
    assert result["host_pool_quantities"] == {"dc-pool": 2}
    assert [p["quantity"] for p in result["derived_pools"]] == [8]


def test_a_pool_without_derived_product_lends_its_own_product() -> None:
    p = pool(
        "vdc",
        "rhel-sku",
        provided=("rhel",),
        quantity=2,
        pattrs={"virt_limit": "2", "multi-entitlement": "yes"},
    )
    result = guest_attach(_job([p]))
    assert result["host_pool_quantities"] == {"vdc": 1}
    (derived,) = result["derived_pools"]
    assert (derived["product_id"], derived["provided_products"], derived["quantity"]) == (
        "rhel-sku",
        ["rhel"],
        2,
    )
    assert result["guest_pool_quantities"] == {derived["id"]: 1}


def test_one_derived_pool_per_stack() -> None:
    pools = [
        pool(
            "dc-a",
            "datacenter-sku",
            quantity=1,
            pattrs=stacking("dc", sockets="2", virt_limit="3"),
            derived="datacenter-guest-sku",
            derived_provided=("rhel",),
        ),
        pool(
            "dc-b",
            "datacenter-sku",
            quantity=1,
            pattrs=stacking("dc", sockets="2", virt_limit="5"),
            derived="datacenter-guest-sku",
            derived_provided=("rhel",),
        ),
    ]
    host = consumer(uuid=HOST, ctype="hypervisor", sockets="4")
    result = guest_attach(_job(pools, host=host))
    assert result["host_pool_quantities"] == {"dc-a": 1, "dc-b": 1}
    assert [(p["id"], p["quantity"]) for p in result["derived_pools"]] == [
        ("derived:host-1:stack:dc", 8)
    ]


def test_pools_without_virt_limit_create_nothing_for_guests_and_are_not_used() -> None:
    pools = [_dc_pool("zero", virt_limit="0"), pool("plain", "rhel-sku", provided=("rhel",))]
    result = guest_attach(_job(pools))
    dropped = {d["pool"]: d["filter"] for d in result["explanation"]["host_dropped_pools"]}
    assert dropped == {"zero": "virt_limit", "plain": "virt_limit"}
    assert result["host_pool_quantities"] == {}
    # The guest still attaches what it can itself: the plain pool provides rhel.
    assert result["guest_pool_quantities"] == {"plain": 1}


def test_products_already_available_from_a_virt_only_pool_are_not_asked_of_the_host() -> None:
    virt = pool("guest-pool", "rhel-guest-sku", provided=("rhel",), attrs={"virt_only": "true"})
    result = guest_attach(_job([_dc_pool(), virt]))
    assert result["explanation"]["provided_by_virt_only_pools"] == ["rhel"]
    assert result["explanation"]["targets"] == []
    assert result["host_pool_quantities"] == {}
    assert result["guest_pool_quantities"] == {"guest-pool": 1}


def test_a_virt_only_pool_for_another_host_does_not_count_as_available() -> None:
    other = pool(
        "other-host-pool",
        "rhel-guest-sku",
        provided=("rhel",),
        attrs={"virt_only": "true", "requires_host": "host-2"},
    )
    result = guest_attach(_job([_dc_pool(), other]))
    assert result["explanation"]["targets"] == ["rhel"]
    assert result["host_pool_quantities"] == {"dc-pool": 1}


def test_requested_pools_restrict_what_the_host_may_attach() -> None:
    result = guest_attach(_job([_dc_pool("dc-1"), _dc_pool("dc-2")], requested_pools=["dc-1"]))
    assert result["host_pool_quantities"] == {"dc-1": 1}


def test_pools_the_host_already_has_or_stacks_partially_are_not_candidates() -> None:
    def other_stack(pool_id: str) -> dict[str, Any]:
        return pool(
            pool_id,
            "datacenter-sku",
            quantity=4,
            pattrs=stacking("other", sockets="1", virt_limit="unlimited"),
            derived="datacenter-guest-sku",
            derived_provided=("rhel",),
        )

    have, attached_part, same_stack = _dc_pool("dc-have"), other_stack("o1"), other_stack("o2")
    host = consumer(uuid=HOST, ctype="hypervisor", sockets="4")
    payload = _job(
        [have, same_stack, _dc_pool("dc-new")],
        host=host,
        host_entitlements=[ent("h1", have, 2), ent("h2", attached_part, 1)],
    )
    result = guest_attach(payload)
    dropped = {d["pool"]: d["filter"] for d in result["explanation"]["host_dropped_pools"]}
    assert dropped == {"dc-have": "host_already_attached", "o2": "partial_stack"}
    assert result["host_pool_quantities"] == {"dc-new": 2}


def test_the_host_takes_the_guests_service_level_when_it_has_none() -> None:
    premium = pool(
        "premium",
        "datacenter-sku",
        quantity=4,
        pattrs={**stacking("p", sockets="2", virt_limit="unlimited"), "support_level": "Premium"},
        derived="g",
        derived_provided=("rhel",),
    )
    standard = pool(
        "standard",
        "datacenter-sku",
        quantity=4,
        pattrs={**stacking("s", sockets="2", virt_limit="unlimited"), "support_level": "Standard"},
        derived="g",
        derived_provided=("rhel",),
    )
    guest = consumer(uuid="guest-1", guest=True, installed=("rhel",), sla="Premium")
    result = guest_attach(_job([premium, standard], guest=guest))
    assert result["host_pool_quantities"] == {"premium": 1}
    assert result["explanation"]["host"]["consumer"]["service_level"] == "Premium"


def test_a_compliant_guest_asks_nothing_of_its_host() -> None:
    own = pool("own", "rhel-sku", provided=("rhel",))
    payload = _job([_dc_pool()], guest_entitlements=[ent("g1", own)])
    result = guest_attach(payload)
    assert result["explanation"]["targets"] == []
    assert (
        result["host_pool_quantities"],
        result["derived_pools"],
        result["guest_pool_quantities"],
    ) == (
        {},
        [],
        {},
    )
