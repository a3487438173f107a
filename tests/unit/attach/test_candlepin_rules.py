"""Where rules.js (Candlepin 5.42/5.44) and the seed's prose part ways, one rule per test.

Each job is the smallest that shows its rule. The expected answers were worked out by
hand from the reference's rules, step by step, in each docstring (priorities with the
5.42 weights: start 545; products 5600, roles 2800, addons 1400, service level 700,
usage 350; match +1 × weight × share, null +0.01 × weight, mismatch −0.05 × weight ×
share; +100 virt_only; +20 for each sizing attribute a side leaves unset). The groups
are visited in reverse input order. The ``seed`` profile keeps the seed's reading
where it differs, checked alongside.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.attach.support import (
    PRODUCT,
    attach,
    consumer,
    ent,
    job,
    pool,
    stacking,
    syspurpose,
)


def _picks(payload: dict[str, Any]) -> list[dict[str, Any]]:
    picks: list[dict[str, Any]] = attach(payload)["explanation"]["picks"]
    return picks


def _group(payload: dict[str, Any], key: str) -> dict[str, Any]:
    groups = attach(payload)["explanation"]["groups"]
    return next(g for g in groups if g["group"] == key)


def remove_extra_attrs_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    sockets = pool("sockets", quantity=1, pattrs=stacking("s", sockets="2"))
    cores = pool(
        "cores", quantity=1, pattrs={**stacking("s", cores="2"), **syspurpose(roles="Server")}
    )
    cons = consumer(sockets="2", cores="1", role="server", installed=(PRODUCT,))
    return job(cons, [sockets, cores], rules=rules)


def test_remove_extra_attrs_checks_the_role_on_the_whole_group_so_the_role_pool_may_go() -> None:
    """Stack s: "sockets" (sockets 2) and "cores" (cores 2, role Server), one each; the
    consumer has 2 sockets × 1 core, role server, product a-product.

    Validate: 2 sockets ≥ 2, 2 cores ≥ 2: covered. remove_extra_attrs: the stack carries
    sockets and cores; get_sets gives [[cores], [sockets]]. Without the cores pools,
    [sockets] covers (cores no longer enforced) and provides the product; the role is
    compared on the whole group against itself, so it passes: candidate. Likewise
    [cores]. Scores are all 0 (no virt_only or host pools): the first candidate with
    fewer pools wins, [sockets]. It needs 1 (2 sockets). The role is then provided by no
    group: answer {sockets: 1}. (Checking the role on the candidate would have kept
    [cores] instead.)
    """
    payload = remove_extra_attrs_job()
    assert attach(payload)["pool_quantities"] == {"sockets": 1}
    entry = _group(payload, "stack:s")
    assert entry["removed_as_extra_attributes"] == ["cores"]
    assert entry["lost_as_extra_attributes"] == ["role:server"]
    assert "whole group" in entry["note"]


def products_not_compared_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    cons = consumer(installed=("p1", "p2", "p3", "p4"))
    pools = [
        pool("wide", "sku-w", provided=("p1", "p2", "p3")),
        pool("two", "sku-t", provided=("p3", "p4")),
    ]
    return job(cons, pools, ["p3", "p4"], rules=rules)


def test_best_group_selection_never_compares_how_many_products_a_group_covers() -> None:
    """Installed p1–p4, products to cover p3 and p4; pools "wide" (p1, p2, p3) and "two"
    (p3, p4). Priorities count all four unsatisfied products:

    wide = 545 + 5600·3/4 − 280·1/4 + 28 + 14 + 7 + 3.5 + 60 = 4787.5
    two  = 545 + 5600·2/4 − 280·2/4 + 28 + 14 + 7 + 3.5 + 60 = 3317.5

    Round 1 (needs p3, p4), scan two, wide: two leads; wide has the higher average and
    replaces it although it covers one product to two's two. Round 2 (needs p4): two.
    Answer {wide: 1, two: 1}. The seed profile takes "two" first (two products) and is
    done: {two: 1}.
    """
    payload = products_not_compared_job()
    assert attach(payload)["pool_quantities"] == {"wide": 1, "two": 1}
    picks = _picks(payload)
    assert [p["group"] for p in picks] == ["pool:wide", "pool:two"]
    assert picks[0]["decided_by"] == "average_priority"
    assert "products_covered" not in picks[0]["criteria"]
    seed = products_not_compared_job("seed")
    assert attach(seed)["pool_quantities"] == {"two": 1}
    assert _picks(seed)[0]["decided_by"] == "products_covered"


def virt_only_leading_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    pools = [
        pool("plain", pattrs=syspurpose(sla="Premium")),
        pool("virt", attrs={"virt_only": "true"}),
    ]
    return job(consumer(guest=True, sla="Premium"), pools, [PRODUCT], rules=rules)


def test_virt_only_found_is_set_only_when_a_group_wins_on_the_virt_only_rule() -> None:
    """A guest with service level Premium; "plain" (SLA Premium) and "virt" (virt_only).

    plain = 545 + 5600 + 28 + 14 + 700 + 3.5 + 20 (vcpu) + 20 (ram) = 6930.5
    virt  = 545 + 5600 + 28 + 14 + 0 + 3.5 + 100 + 40 = 6330.5

    Scan virt, plain: virt leads as the first group (on its average, not on the
    virt_only rule), so plain, with fewer virt_only pools, is not skipped and wins on
    its higher average: {plain: 1}, in every profile.
    """
    for rules in ("candlepin-5.42", "seed"):
        payload = virt_only_leading_job(rules)
        assert attach(payload)["pool_quantities"] == {"plain": 1}
        assert _picks(payload)[0]["decided_by"] == "average_priority"


def virt_only_win_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    pools = [
        pool("b", pattrs=syspurpose(sla="Premium")),
        pool("a", attrs={"virt_only": "true"}, pattrs=syspurpose(sla="Standard", addons="Y")),
        pool("c", quantity=2, pattrs=stacking("sc", vcpu="3")),
    ]
    cons = consumer(guest=True, sockets="1", cores="4", sla="Premium", addons=("X",))
    return job(cons, pools, [PRODUCT], rules=rules)


def test_once_a_group_wins_on_virt_only_groups_with_fewer_virt_only_pools_are_skipped() -> None:
    """A guest with 4 vCPUs, service level Premium, addon X. Pools b (SLA Premium), a
    (virt_only, SLA Standard, addon Y) and c (a stack of one pool, vcpu 3, quantity 2):

    b = 545 + 5600 + 28 + 0 + 700 + 3.5 + 20 + 20 = 6916.5
    a = 545 + 5600 + 28 − 70 (addon mismatch) − 35 (SLA mismatch) + 3.5 + 100 + 40 = 6211.5
    c = 545 + 5600 + 28 + 0 + 0 + 3.5 + 15 (vcpu 3: 2 needed, (10 − 2 − 0.5)·2) + 20 = 6211.5

    Scan c, a, b: c leads; a ties c's average and wins on virt_only (virt_only_found);
    b has fewer virt_only pools than a and is skipped despite its average: {a: 1}.
    """
    for rules in ("candlepin-5.42", "seed"):
        payload = virt_only_win_job(rules)
        assert attach(payload)["pool_quantities"] == {"a": 1}
        pick = _picks(payload)[0]
        assert pick["runner_up"] == "pool:b"
        assert pick["decided_by"].startswith("virt_only_pools (the runner-up, met later")


def below_multiplier_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    pools = [
        pool("good"),
        pool("instances", quantity=1, pattrs={"instance_multiplier": "2"}),
    ]
    return job(consumer(), pools, [PRODUCT], rules=rules)


def test_a_pool_below_its_instance_multiplier_is_kept_and_wins_with_nothing_attached() -> None:
    """A physical consumer; "good" (quantity 5) and "instances" (quantity 1, not
    multi-entitlement, instance_multiplier 2), both for a-product, no sizes.

    rules.js keeps "instances" (1 available > 0). Both score 6257.5. Scan instances,
    good: instances leads; good ties on host-specific pools, average and virt_only, and
    its total quantity is 1 (1 entitlement covers), while instances' is 0: its quantity
    loop starts at one increment, 2, above the 1 available, and finds nothing. good
    loses on the smaller total quantity; instances is picked, covers a-product for the
    selection, and nothing is attached: {}. The seed profile drops "instances": {good: 1}.
    """
    result = attach(below_multiplier_job())
    assert result["pool_quantities"] == {}
    assert result["uncovered_products"] == [PRODUCT]
    pick = result["explanation"]["picks"][0]
    assert pick["group"] == "pool:instances"
    assert pick["decided_by"] == "total_quantity"
    assert any("below its instance_multiplier 2" in n for n in pick["notes"])
    assert any("covered with nothing attached" in n for n in pick["notes"])
    assert "counted as covered with nothing attached" in result["explanation"]["summary"]
    seed = attach(below_multiplier_job("seed"))
    assert seed["pool_quantities"] == {"good": 1}
    assert {d["pool"]: d["filter"] for d in seed["explanation"]["dropped_pools"]} == {
        "instances": "instance_multiplier"
    }


def identical_pools_job() -> dict[str, Any]:
    twin = {"quantity": 1, "pattrs": stacking("s", sockets="2")}
    return job(consumer(sockets="2"), [pool("first", **twin), pool("second", **twin)], [PRODUCT])


def test_identical_pools_in_one_stack_tie_and_the_explanation_names_the_tie() -> None:
    """Stack s: "first" and "second", identical (sockets 2, quantity 1); 2 sockets.

    Both cover alone. Pruning sorts by priority (equal) and end date (equal): the
    comparison is 0, and Candlepin's sort (Rhino's heapsort) is not stable, so either
    pool may end up first and be the one kept; removing from the end drops the other.
    Either {first: 1} or {second: 1} is right; this engine keeps the input order, the
    same way every time, and the pick names the tie.
    """
    payload = identical_pools_job()
    result = attach(payload)
    assert result["pool_quantities"] in ({"first": 1}, {"second": 1})
    notes = result["explanation"]["picks"][0]["notes"]
    assert any(
        n.startswith("pools first, second: equal priority and end date")
        and n.endswith("identical but for their ids, so either is a right answer")
        for n in notes
    )
    again = attach(identical_pools_job())
    assert json.dumps(again, sort_keys=False) == json.dumps(result)


def partial_stack_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    attached = pool("attached", quantity=1, pattrs=stacking("s", sockets="1"))
    more = pool("more", "sku-more", pattrs=stacking("s", sockets="1"))
    other = pool("other", pattrs={"sockets": "2"})
    cons = consumer(sockets="2", installed=(PRODUCT,))
    return job(cons, [more, other], None, rules=rules, entitlements=[ent("e", attached)])


def test_a_partial_stack_is_completed_even_by_pools_that_provide_nothing_needed() -> None:
    """2 sockets; attached: 1 of "attached" (stack s, sockets 1, a-product), so stack s is
    partial and a-product partially compliant, still to cover. Pools: "more" (stack s,
    sockets 1, provides only its own sku) and "other" (sockets 2, a-product).

    The server gives the rules every pool of a partial stack. Group s = [more], with the
    attached entitlement: 1 + 1 socket covers. The partial stack is picked first; its
    pools provide nothing still needed, so a-product stays needed and "other" is picked
    for it: {more: 1, other: 1}.
    """
    result = attach(partial_stack_job())
    assert result["pool_quantities"] == {"more": 1, "other": 1}
    assert [p["reason"] for p in result["explanation"]["picks"]] == [
        "completes a partial stack",
        "best group",
    ]


def server_filter_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    small = pool("small", quantity=1, pattrs=stacking("s", sockets="1"))
    filler = pool(
        "filler", "sku-filler", provided=("q",), quantity=1, pattrs=stacking("s", sockets="1")
    )
    return job(consumer(sockets="2", installed=(PRODUCT,)), [small, filler], None, rules=rules)


def test_the_server_gives_the_rules_only_pools_that_match_what_is_needed() -> None:
    """2 sockets, product a-product. Stack s: "small" (sockets 1, a-product) and "filler"
    (sockets 1, provides only q, not installed), one each.

    CandlepinPoolManager.getBestPools gives the rules only pools providing a product to
    cover (or matching the role/addons, or of a partial stack): filler is left out.
    Stack s = [small]: 1 socket < 2, not covered; removing the pools carrying sockets
    leaves nothing: invalid. Answer {}; a-product uncovered. (Given filler too, 1 + 1
    sockets would cover and both would be attached.) The seed profile gives the whole
    stack: {small: 1, filler: 1}.
    """
    result = attach(server_filter_job())
    assert result["pool_quantities"] == {}
    entry = _group(server_filter_job(), "stack:s")
    assert entry["not_given_to_the_rules"] == ["filler"]
    assert entry["status"] == "invalid"
    assert attach(server_filter_job("seed"))["pool_quantities"] == {"small": 1, "filler": 1}


def unmapped_role_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    elsewhere = pool("elsewhere", "q", pattrs=syspurpose(roles="Server"))
    pools = [pool("plain"), pool("with-role", "sku-wr", pattrs=syspurpose(roles="Server"))]
    cons = consumer(role="server", installed=(PRODUCT,))
    return job(cons, pools, None, rules=rules, entitlements=[ent("e", elsewhere)])


def test_only_entitlements_in_the_compliance_maps_provide_a_role() -> None:
    """Role server, product a-product. Attached: "elsewhere" (role Server, product q, not
    installed), so it is in no compliance map. Pools "plain" (a-product) and "with-role"
    (role Server, its own sku).

    rules.js reads the attached entitlements from the compliance maps only: the role is
    still needed. plain = 545 + 5600 + 0 + 14 + 7 + 3.5 + 60 = 6229.5; with-role = 545 −
    280 + 2800 + 14 + 7 + 3.5 + 60 = 3149.5. Round 1, scan with-role, plain: plain wins
    on its average (covers a-product); round 2: with-role for the role. {plain: 1,
    with-role: 1}. The seed profile counts every active entitlement: role satisfied,
    {plain: 1}.
    """
    assert attach(unmapped_role_job())["pool_quantities"] == {"plain": 1, "with-role": 1}
    assert attach(unmapped_role_job("seed"))["pool_quantities"] == {"plain": 1}


def raw_satisfaction_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    compliant = pool("attached", "c", pattrs=syspurpose(addons="A,B"))
    pools = [pool("with-a", pattrs=syspurpose(addons="A")), pool("none")]
    cons = consumer(addons=("A",), installed=(PRODUCT, "c"))
    return job(cons, pools, None, rules=rules, entitlements=[ent("e", compliant)])


def test_priorities_count_an_attached_addon_list_as_one_value() -> None:
    """Addon A, products a-product and c; attached: "attached" (product c, addons "A,B"),
    so c is compliant and A is provided (no longer needed). Pools "with-a" (addon A) and
    "none", both a-product.

    For the priorities rules.js reads the attached pool's addons as one value, "a,b",
    which is not "a": addon a stays unsatisfied. with-a: addons match +1400; none: 0
    (no null rule, a is unsatisfied). with-a wins on its average: {with-a: 1}. The seed
    profile splits the list (a satisfied): with-a 0 (it sets addons), none +14 (null
    rule): {none: 1}.
    """
    assert attach(raw_satisfaction_job())["pool_quantities"] == {"with-a": 1}
    assert attach(raw_satisfaction_job("seed"))["pool_quantities"] == {"none": 1}


def prune_role_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    compliant = pool("attached", "c", pattrs=syspurpose(roles="Server"))
    pools = [
        pool(
            "role-pool",
            quantity=1,
            pattrs={**stacking("s", sockets="2"), **syspurpose(roles="Server")},
        ),
        pool("plain", quantity=1, pattrs=stacking("s", sockets="2")),
    ]
    cons = consumer(sockets="2", role="server", installed=(PRODUCT, "c"))
    return job(cons, pools, None, rules=rules, entitlements=[ent("e", compliant)])


def test_pruning_keeps_the_pools_carrying_the_consumers_role_even_once_provided() -> None:
    """Role server, 2 sockets, products a-product and c; attached: "attached" (c, role
    Server): c compliant, the role provided. Stack s: "role-pool" (sockets 2, role
    Server) and "plain" (sockets 2), one each.

    Priorities: the role counts as satisfied ("server"), so role-pool (sets roles) gets
    no null bonus and plain +28: plain sorts first. prune_pools compares the consumer's
    role (not what is left) before and after each removal: removing role-pool loses it,
    so it goes back; removing plain keeps coverage, product and role: pruned.
    {role-pool: 1}. The seed profile prunes on what is still needed: {plain: 1}.
    """
    result = attach(prune_role_job())
    assert result["pool_quantities"] == {"role-pool": 1}
    assert _group(prune_role_job(), "stack:s")["pruned"] == ["plain"]
    assert attach(prune_role_job("seed"))["pool_quantities"] == {"plain": 1}


def guest_vcpu_job(rules: str = "candlepin-5.42") -> dict[str, Any]:
    pools = [
        pool("b", pattrs={"cores": "2"}),
        pool("a", attrs={"cores": "8"}, pattrs={"cores": "2"}),
    ]
    return job(consumer(guest=True, sockets="2", cores="1"), pools, [PRODUCT], rules=rules)


def test_a_guest_reads_the_vcpu_of_a_pool_without_one_from_its_cores_pool_attribute_first() -> None:
    """A guest with 2 sockets × 1 core: 2 vCPUs. Pools "b" (product cores 2) and "a"
    (product cores 2, pool attribute cores 8), neither with vcpu.

    rules.js (createPool) gives a guest's pool without vcpu a vcpu of
    ``getAttribute("cores")``, the pool attribute first: b has vcpu 2, a vcpu 8. Both
    cover. b's vcpu scores (10 − 0 − 0)·2 = 20, a's (10 − (8 − 2) − 0)·2 = 8, so
    b = 6237.5 > a = 6225.5. Scan a, b: b wins on its average: {b: 1}, in every profile.
    """
    for rules in ("candlepin-5.42", "seed"):
        payload = guest_vcpu_job(rules)
        assert attach(payload)["pool_quantities"] == {"b": 1}
        assert _picks(payload)[0]["decided_by"] == "average_priority"


def partial_stack_purpose_job(
    rules: str = "candlepin-5.42", purpose: str = "role", unstacked_provides: bool = True
) -> dict[str, Any]:
    carried = syspurpose(roles="RHEL Server") if purpose == "role" else syspurpose(addons="ELS")
    held = pool("pool-11", quantity=1, consumed=1, pattrs=stacking("s1", sockets="2"))
    completing = pool("pool-12", quantity=10, pattrs={**stacking("s1", sockets="2"), **carried})
    unstacked = pool(
        "pool-20",
        "sku-20",
        provided=(PRODUCT,) if unstacked_provides else (),
        pattrs=carried,
    )
    wants: dict[str, Any] = {"role": "RHEL Server"} if purpose == "role" else {"addons": ("ELS",)}
    cons = consumer(sockets="8", installed=(PRODUCT,), **wants)
    pools = [held, completing, unstacked]
    return job(cons, pools, None, rules=rules, entitlements=[ent("ent-11", held)])


@pytest.mark.parametrize("purpose", ["role", "addon"])
@pytest.mark.parametrize("rules", ["candlepin-5.42", "candlepin-5.44"])
def test_a_partial_stack_takes_only_its_products_so_its_role_is_still_needed(
    rules: str, purpose: str
) -> None:
    """An 8-socket consumer with role "RHEL Server" (or addon "ELS") already holds 1 of
    pool-11; the pool carrying the role completes its stack:

        stack s1 (sockets 2 each)        held  available  provides   carries
          pool-11                          1       0      a-product  -
          pool-12                          -      10      a-product  the role/addon
        unstacked
          pool-20                          -       5      a-product  the role/addon

    Stack s1 is partial (2 of 8 sockets), a-product partially compliant, the role
    not provided by pool-11. rules.js ``get_best_entitlement_groups`` first takes the
    partial stack's group [pool-12] and removes only its products (a-product) from
    what is still needed; the role stays, and ``find_best_ent_group(…, role, addons)``
    scans every group again, the partial one included. Priorities (5.42 weights): both
    match a-product and the role; pool-12's sockets score (10 − 0 − 1.5)·2 = 17 (it
    needs 4 of 2), pool-20 leaves them unset (+20): pool-12 = 9026.5, pool-20 = 9029.5
    (role; 5.44: 17988.25 and 17991.25). pool-20 wins the role on its average, and
    pool-12 takes the 3 missing: {pool-12: 3, pool-20: 1}, as rules.js 5.42 and 5.44
    answer. The ``seed`` profile counts the role as provided by the completed stack:
    {pool-12: 3}.
    """
    payload = partial_stack_purpose_job(rules, purpose)
    result = attach(payload)
    assert result["pool_quantities"] == {"pool-12": 3, "pool-20": 1}
    picks = result["explanation"]["picks"]
    carried = "role:rhel server" if purpose == "role" else "addon:els"
    assert [(p["group"], p["covers"]) for p in picks] == [
        ("stack:s1", [f"product:{PRODUCT}"]),
        ("pool:pool-20", [carried]),
    ]
    assert picks[1]["runner_up"] == "stack:s1"
    assert picks[1]["decided_by"] == "average_priority"
    seed = attach(partial_stack_purpose_job("seed", purpose))
    assert seed["pool_quantities"] == {"pool-12": 3}
    assert [p["covers"] for p in seed["explanation"]["picks"]] == [
        sorted([carried, f"product:{PRODUCT}"])
    ]


@pytest.mark.parametrize("rules", ["candlepin-5.42", "candlepin-5.44"])
def test_a_partial_stack_carrying_the_role_is_picked_again_when_it_wins_it(rules: str) -> None:
    """As above, but pool-20 provides only its own sku: it carries the role and nothing
    installed, so its priority loses the products match (5.42: 3149.5 against
    pool-12's 9026.5). The partial stack's group, still a candidate, wins the role on
    its average and is picked a second time, as rules.js pushes it again: the answer is
    {pool-12: 3} (rules.js 5.42 and 5.44 alike), reached by another path than the
    ``seed`` profile's.
    """
    result = attach(partial_stack_purpose_job(rules, unstacked_provides=False))
    assert result["pool_quantities"] == {"pool-12": 3}
    picks = result["explanation"]["picks"]
    assert [(p["group"], p["reason"], p["covers"]) for p in picks] == [
        ("stack:s1", "completes a partial stack", [f"product:{PRODUCT}"]),
        ("stack:s1", "best group", ["role:rhel server"]),
    ]
    assert picks[1]["runner_up"] == "pool:pool-20"
