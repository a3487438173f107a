"""Cases from Candlepin's own AutobindRulesTest, with its pools and expected answers.

Pools default to quantity 5 as in Candlepin's TestUtil; every case runs under the
``candlepin-5.42`` profile (which must give Candlepin's answers) and, where the case
is about selection rather than scores, under the other two profiles as well.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.attach.support import (
    PRODUCT,
    chosen,
    consumer,
    ent,
    job,
    pool,
    stacking,
    syspurpose,
)

ALL_RULES = ["candlepin-5.42", "candlepin-5.44", "seed"]


@pytest.fixture(params=ALL_RULES)
def rules(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


def test_a_single_pool_providing_the_product_is_attached_once(rules: str) -> None:
    assert chosen(job(consumer(), [pool("DEAD-BEEF")], [PRODUCT], rules=rules)) == {"DEAD-BEEF": 1}


def test_twelve_vcpu_guest_takes_six_of_a_two_core_stack(rules: str) -> None:
    p = pool("DEAD-BEEF", quantity=20, pattrs=stacking(PRODUCT, cores="2"))
    cons = consumer(guest=True, sockets="12", cores="1")
    assert chosen(job(cons, [p], [PRODUCT], rules=rules)) == {"DEAD-BEEF": 6}


def test_four_socket_consumer_takes_one_four_socket_pool(rules: str) -> None:
    p = pool("DEAD-BEEF", pattrs={"sockets": "4"})
    assert chosen(job(consumer(sockets="4"), [p], [PRODUCT], rules=rules)) == {"DEAD-BEEF": 1}


def _multi_attr_pools(virt: bool) -> list[dict[str, object]]:
    sku1 = stacking("1", sockets="2", cores="6", ram="2")
    sku2 = stacking("1", sockets=None if not virt else "1", cores="6")
    return [
        pool(
            "DEAD-BEEF1",
            PRODUCT,
            provided=("5000",),
            pattrs=sku1,
            attrs={"virt_only": "true"} if virt else None,
        ),
        pool("DEAD-BEEF2", "prod2", provided=("5000",), pattrs=sku2),
        pool("DEAD-BEEF3", PRODUCT, provided=("5000",), pattrs=sku1),
    ]


def test_the_attribute_needing_the_fewest_pools_is_chosen() -> None:
    cons = consumer(sockets="4", ram="16000000", cores="4")
    assert chosen(job(cons, _multi_attr_pools(virt=False), ["5000"])) == {"DEAD-BEEF2": 3}


def test_a_guest_keeps_the_virt_only_pool_and_takes_its_maximum() -> None:
    cons = consumer(sockets="4", ram="16000000", cores="4", guest=True)
    assert chosen(job(cons, _multi_attr_pools(virt=True), ["5000"])) == {
        "DEAD-BEEF1": 5,
        "DEAD-BEEF3": 3,
    }


def _sla_pools() -> list[dict[str, object]]:
    return [
        pool("pool-1", PRODUCT),
        pool("pool-with-premium-sla", "premium-sla-product", pattrs=syspurpose(sla="Premium")),
        pool("pool-with-standard-sla", "standard-sla-product", pattrs=syspurpose(sla="Standard")),
    ]


def test_service_level_prioritises_and_never_filters(rules: str) -> None:
    products = [PRODUCT, "premium-sla-product", "standard-sla-product"]
    cons = consumer(sla="Premium")
    assert chosen(job(cons, _sla_pools(), products, rules=rules)) == {
        "pool-1": 1,
        "pool-with-premium-sla": 1,
        "pool-with-standard-sla": 1,
    }


def test_an_attached_standard_entitlement_does_not_stop_the_premium_pool_winning(
    rules: str,
) -> None:
    standard = pool(
        "pool-with-standard-sla", "standard-sla-product", pattrs=syspurpose(sla="Standard")
    )
    pools = [
        pool("pool-1", PRODUCT),
        pool("pool-with-premium-sla", PRODUCT, pattrs=syspurpose(sla="Premium")),
    ]
    compliance = {"partially_compliant_products": {"b4b4b4": [ent("e1", standard)]}}
    payload = job(
        consumer(sla="Premium"),
        pools,
        [PRODUCT, "standard-sla-product"],
        rules=rules,
        compliance=compliance,
    )
    assert chosen(payload) == {"pool-with-premium-sla": 1}


def test_a_pool_covering_both_marketing_and_engineering_product_is_enough(rules: str) -> None:
    pools = [
        pool("pool1", "requiredMktProduct", provided=("requiredEngProduct",), quantity=1),
        pool("pool2", "nonRequiredMktProduct", provided=("requiredEngProduct",), quantity=1),
    ]
    cons = consumer(installed=("requiredEngProduct",))
    payload = job(cons, pools, ["requiredEngProduct", "requiredMktProduct"], rules=rules)
    assert chosen(payload) == {"pool1": 1}


def test_a_pool_with_nothing_available_is_not_chosen_even_when_it_matches_better(
    rules: str,
) -> None:
    pools = [
        pool(
            "RH00009",
            provided=("compliant-69",),
            quantity=0,
            pattrs=syspurpose(addons="Smart Management", usage="good-usage"),
        ),
        pool(
            "MCT1650",
            provided=("compliant-69", "non-compliant-89", "non-compliant-100"),
            quantity=1,
            pattrs=syspurpose(usage="bad-usage"),
        ),
    ]
    cons = consumer(usage="good-usage", installed=("compliant-69",))
    assert chosen(job(cons, pools, ["compliant-69"], rules=rules)) == {"MCT1650": 1}


def test_a_usage_or_sla_match_does_not_overpower_a_role_match(rules: str) -> None:
    pools = [
        pool("RH00009", provided=("non-compliant-69",), pattrs=syspurpose(roles="RHEL Server")),
        pool(
            "MCT_HA",
            provided=("non-compliant-69",),
            pattrs=syspurpose(roles="RHEL High Availability", sla="Premium", usage="Production"),
        ),
    ]
    cons = consumer(
        role="RHEL Server", sla="Premium", usage="Production", installed=("non-compliant-69",)
    )
    assert chosen(job(cons, pools, ["compliant-69"], rules=rules)) == {"RH00009": 1}


@pytest.mark.parametrize(
    ("cons_kwargs", "pattrs"),
    [
        ({"role": "my_role"}, syspurpose(roles="provided_role")),
        (
            {"addons": ("My Type of Management",)},
            syspurpose(addons="Smart Management,Other Management"),
        ),
        ({"role": "RHEL Server"}, syspurpose(roles="Random Role,RHEL Server")),
        (
            {"addons": ("My Type of Management", "Other Management")},
            syspurpose(addons="Smart Management,Other Management"),
        ),
        ({"addons": ("My Type of Management", "Other Management")}, {}),
        ({"role": "My Role"}, {}),
        ({}, syspurpose(addons="Smart Management,Other Management")),
        ({}, syspurpose(roles="Smart Role,Other Role")),
    ],
    ids=[
        "mismatched role",
        "mismatched addon",
        "one role of many matches",
        "one addon of many matches",
        "pool sets no addons",
        "pool sets no role",
        "consumer sets no addons",
        "consumer sets no role",
    ],
)
def test_a_pool_providing_the_installed_product_is_attached_whatever_its_syspurpose(
    cons_kwargs: dict[str, Any], pattrs: dict[str, str], rules: str
) -> None:
    p = pool("MCT1650", provided=("compliant-69",), quantity=1, pattrs=pattrs)
    cons = consumer(installed=("compliant-69",), **cons_kwargs)
    assert chosen(job(cons, [p], ["compliant-69"], rules=rules)) == {"MCT1650": 1}


@pytest.mark.parametrize(
    ("cons_kwargs", "first", "second", "installed"),
    [
        ({"role": "RHEL Server"}, syspurpose(roles="RHEL Server,Other Role"), {}, True),
        ({"addons": ("One Addon",)}, syspurpose(addons="One Addon,Other Addon"), {}, True),
        (
            {"addons": ("First Addon", "Second Addon")},
            syspurpose(addons="First Addon,random_addon"),
            syspurpose(addons="Second Addon"),
            False,
        ),
        (
            {"addons": ("My Addon",), "role": "My Role"},
            syspurpose(addons="My Addon"),
            syspurpose(roles="My Role"),
            False,
        ),
    ],
    ids=["role + product", "addon + product", "two addons", "addon + role"],
)
def test_both_pools_of_a_stack_are_kept_when_each_provides_something_needed(
    cons_kwargs: dict[str, Any],
    first: dict[str, str],
    second: dict[str, str],
    installed: bool,
    rules: str,
) -> None:
    pools = [
        pool("MCT1650", quantity=1, pattrs={**first, **stacking("bob")}),
        pool(
            "MCT80",
            quantity=1,
            provided=("compliant-69",) if installed else (),
            pattrs={**second, **stacking("bob")},
        ),
    ]
    cons = consumer(installed=("compliant-69",), **cons_kwargs)
    assert chosen(job(cons, pools, ["compliant-69"], rules=rules)) == {"MCT1650": 1, "MCT80": 1}


@pytest.mark.parametrize(
    ("cons_kwargs", "pattrs", "expected"),
    [
        ({"role": "Other Role"}, syspurpose(roles="Smart Role,Other Role"), {"MCT1650": 1}),
        (
            {"addons": ("Other Addon",)},
            syspurpose(addons="Smart Addon,Other Addon"),
            {"MCT1650": 1},
        ),
        ({"usage": "Other Usage"}, syspurpose(roles="Smart Usage,Other Usage"), {}),
        ({"sla": "Other SLA"}, syspurpose(roles="Smart SLA,Other SLA"), {}),
    ],
    ids=["role", "addon", "usage", "sla"],
)
def test_roles_and_addons_are_needed_like_products_but_usage_and_sla_are_not(
    cons_kwargs: dict[str, Any],
    pattrs: dict[str, str],
    expected: dict[str, int],
    rules: str,
) -> None:
    p = pool("MCT1650", quantity=1, pattrs=pattrs)
    cons = consumer(installed=("compliant-69",), **cons_kwargs)
    assert chosen(job(cons, [p], ["compliant-69"], rules=rules)) == expected


@pytest.mark.parametrize("other_product", [None, "compliant-100"])
def test_only_pools_providing_a_product_role_or_addon_are_attached(
    other_product: str | None, rules: str
) -> None:
    extra = (other_product,) if other_product else ()
    pools = [
        pool("poolWithInstalledProductOnly", provided=("compliant-69",), quantity=1),
        pool(
            "poolWithRoleOnly",
            provided=extra,
            quantity=1,
            pattrs=syspurpose(roles="Smart Role,Other Role"),
        ),
        pool(
            "poolWithAddonOnly",
            provided=extra,
            quantity=1,
            pattrs=syspurpose(addons="Smart Addon,Other Addon"),
        ),
        pool(
            "poolWithUsageOnly", provided=extra, quantity=1, pattrs=syspurpose(usage="Other Usage")
        ),
        pool("poolWithSLAOnly", provided=extra, quantity=1, pattrs=syspurpose(sla="Other SLA")),
    ]
    cons = consumer(
        installed=("compliant-69",),
        role="Other Role",
        addons=("Other Addon",),
        usage="Other Usage",
        sla="Other SLA",
    )
    assert chosen(job(cons, pools, ["compliant-69"], rules=rules)) == {
        "poolWithInstalledProductOnly": 1,
        "poolWithRoleOnly": 1,
        "poolWithAddonOnly": 1,
    }


@pytest.mark.parametrize(
    ("cons_kwargs", "pattrs"),
    [
        ({"sla": "mysla"}, syspurpose("random_role", "random_addon", "mysla", "random_usage")),
        ({"role": "myrole"}, syspurpose("myrole", "random_addon", "random_sla", "random_usage")),
        (
            {"addons": ("myaddon",)},
            syspurpose("random_role", "myaddon", "random_sla", "random_usage"),
        ),
    ],
    ids=["sla", "role", "addons"],
)
def test_a_syspurpose_match_outweighs_sockets_cores_and_ram_mismatches(
    cons_kwargs: dict[str, Any], pattrs: dict[str, str], rules: str
) -> None:
    sized = {**pattrs, "sockets": "32", "cores": "32", "ram": "19960912"}
    pools = [
        pool("MCT1650", provided=("compliant-69",), quantity=1, pattrs=sized),
        pool("genericPool", provided=("compliant-69",), quantity=1),
    ]
    cons = consumer(
        sockets="1", cores="1", ram="9980456", installed=("compliant-69",), **cons_kwargs
    )
    assert chosen(job(cons, pools, ["compliant-69"], rules=rules)) == {"MCT1650": 1}


def test_an_sla_match_outweighs_vcpu_and_ram_mismatches_on_a_guest(rules: str) -> None:
    sized = {
        **syspurpose("random_role", "random_addon", "mysla", "random_usage"),
        "ram": "19960912",
        "vcpu": "32",
    }
    pools = [
        pool("MCT1650", provided=("compliant-69",), quantity=1, pattrs=sized),
        pool("genericPool", provided=("compliant-69",), quantity=1),
    ]
    cons = consumer(
        sla="mysla", ram="9980456", facts={"virt.is_guest": "True"}, installed=("compliant-69",)
    )
    assert chosen(job(cons, pools, ["compliant-69"], rules=rules)) == {"MCT1650": 1}


def test_a_null_role_does_not_overpower_a_usage_match(rules: str) -> None:
    pools = [
        pool(
            "MCT1650",
            provided=("compliant-69",),
            quantity=1,
            pattrs=syspurpose(roles="another_role", usage="myusage"),
        ),
        pool("genericPool", provided=("compliant-69",), quantity=1),
    ]
    cons = consumer(usage="myusage", installed=("compliant-69",))
    assert chosen(job(cons, pools, ["compliant-69"], rules=rules)) == {"MCT1650": 1}


@pytest.mark.parametrize(
    ("cons_kwargs", "value"),
    [
        ({"role": "RHEL Server"}, syspurpose(roles="RHEL Server,random_role")),
        (
            {"addons": ("my_addon1", "my_addon2")},
            syspurpose(addons="my_addon1,my_addon2,random_role"),
        ),
    ],
    ids=["role", "addons"],
)
def test_one_of_two_identical_stacked_pools_is_attached_once(
    cons_kwargs: dict[str, Any], value: dict[str, str], rules: str
) -> None:
    pools = [
        pool(
            f"pool{i}",
            provided=("compliant-69",),
            quantity=100,
            pattrs={**value, **stacking("my_stack")},
        )
        for i in (1, 2)
    ]
    cons = consumer(installed=("compliant-69",), **cons_kwargs)
    result = chosen(job(cons, pools, ["compliant-69"], rules=rules))
    assert len(result) == 1
    assert list(result.values()) == [1]


@pytest.mark.parametrize(
    ("cons_kwargs", "useless", "useful"),
    [
        (
            {"addons": ("my_addon1", "my_addon2")},
            syspurpose(addons="random_addon"),
            syspurpose(addons="my_addon1"),
        ),
        ({"role": "my_role"}, syspurpose(roles="random_role"), syspurpose(roles="my_role")),
    ],
    ids=["addon", "role"],
)
def test_a_stacked_pool_providing_nothing_needed_is_pruned(
    cons_kwargs: dict[str, Any],
    useless: dict[str, str],
    useful: dict[str, str],
    rules: str,
) -> None:
    pools = [
        pool("pool1", quantity=100, pattrs={**useless, **stacking("my_stack")}),
        pool("pool2", quantity=100, pattrs={**useful, **stacking("my_stack")}),
    ]
    cons = consumer(**cons_kwargs)
    assert chosen(job(cons, pools, ["compliant-69"], rules=rules)) == {"pool2": 1}


@pytest.mark.parametrize(
    "mismatched",
    [
        syspurpose("mismatched_role", "mismatched_addon", "mismatched_sla", "Production"),
        syspurpose("mismatched_role", "mismatched_addon", "Premium", "mismatched_usage"),
        syspurpose("mismatched_role", "my_addon", "mismatched_sla", "mismatched_usage"),
        syspurpose("RHEL Workstation", "mismatched_addon", "mismatched_sla", "mismatched_usage"),
    ],
    ids=["usage", "sla", "addon", "role"],
)
def test_one_match_beats_a_pool_with_no_syspurpose_despite_every_other_mismatch(
    mismatched: dict[str, str], rules: str
) -> None:
    pools = [
        pool("pool1", provided=("compliant-69",), quantity=1, pattrs=mismatched),
        pool("pool2", provided=("compliant-69",), quantity=1),
    ]
    cons = consumer(
        addons=("my_addon",),
        role="RHEL Workstation",
        sla="Premium",
        usage="Production",
        installed=("compliant-69",),
    )
    assert chosen(job(cons, pools, ["compliant-69"], rules=rules)) == {"pool1": 1}


def _instance_pool(quantity: int = 100) -> dict[str, object]:
    return pool(
        "DEAD-BEEF", quantity=quantity, pattrs=stacking("1", sockets="2", instance_multiplier="2")
    )


def test_a_partial_stack_whose_pools_all_break_it_yields_nothing(rules: str) -> None:
    attached = ent("mock-ent", _instance_pool(), quantity=4)
    compliance = {
        "partially_compliant_products": {PRODUCT: [attached]},
        "partial_stacks": {"stack_9000": [attached]},
    }
    p = pool("pool1", "other", quantity=5, pattrs={"stacking_id": "stack_9000", "sockets": "2"})
    payload = job(consumer(sockets="12"), [p], [PRODUCT], rules=rules, compliance=compliance)
    assert chosen(payload) == {}


@pytest.mark.parametrize(
    ("cons_kwargs", "pattrs", "products"),
    [
        ({"role": "rHeL sErVeR"}, syspurpose(roles="RHEL Server"), []),
        ({"addons": ("rHeL EuS",)}, syspurpose(addons="RHEL EUS"), []),
        ({"role": "JBoss"}, syspurpose(roles="RHEL Server,  JBoss,  Satellite"), []),
        ({"addons": ("RHEL ELS",)}, syspurpose(addons="RHEL EUS,   RHEL ELS "), []),
    ],
    ids=["role case", "addon case", "role list spaces", "addon list spaces"],
)
def test_roles_and_addons_match_case_insensitively_in_trimmed_lists(
    cons_kwargs: dict[str, Any], pattrs: dict[str, str], products: list[str], rules: str
) -> None:
    cons = consumer(**cons_kwargs)
    assert chosen(job(cons, [pool("p1", pattrs=pattrs)], products, rules=rules)) == {"p1": 1}


@pytest.mark.parametrize(
    ("cons_kwargs", "p2"),
    [
        ({"usage": "dEvElOpMeNt"}, syspurpose(sla="RandomSLA", usage="Development")),
        ({"sla": "pReMiUm"}, syspurpose(sla="Premium", usage="RandomUsage")),
    ],
    ids=["usage", "sla"],
)
def test_usage_and_sla_match_case_insensitively(
    cons_kwargs: dict[str, Any], p2: dict[str, str], rules: str
) -> None:
    p1_attrs = (
        syspurpose(usage="RandomUsage") if "usage" in cons_kwargs else syspurpose(sla="RandomSLA")
    )
    pools = [
        pool("p1", provided=("prod-69",), pattrs=p1_attrs),
        pool("p2", provided=("prod-69",), pattrs=p2),
    ]
    cons = consumer(installed=("prod-69",), **cons_kwargs)
    assert chosen(job(cons, pools, ["prod-69"], rules=rules)) == {"p2": 1}


@pytest.mark.parametrize(
    ("cons_kwargs", "satisfied", "pattrs"),
    [
        ({"role": "RHEL SERVER"}, {"role": "RheL ServeR"}, syspurpose(roles="RHEL SERVER")),
        ({"addons": ("RHEL EUS",)}, {"addons": "RheL eUs"}, syspurpose(addons="RHEL EUS")),
    ],
    ids=["role", "addon"],
)
def test_a_role_or_addon_already_provided_case_insensitively_is_not_attached_again(
    cons_kwargs: dict[str, Any],
    satisfied: dict[str, str],
    pattrs: dict[str, str],
    rules: str,
) -> None:
    from tests.unit.attach.support import satisfied_role_compliance

    compliance = satisfied_role_compliance(**satisfied)
    cons = consumer(**cons_kwargs)
    payload = job(cons, [pool("p1", pattrs=pattrs)], [], rules=rules, compliance=compliance)
    assert chosen(payload) == {}


def test_a_partial_stack_of_another_id_is_not_completed(rules: str) -> None:
    pool1 = pool("DEAD-BEEF", "A", provided=("C",), pattrs=stacking("1", sockets="2"))
    pool2 = pool("DEAD-BEEF2", "B", provided=("C",), pattrs=stacking("2", sockets="2"))
    compliance = {"partial_stacks": {"1": [ent("e1", pool1, quantity=2)]}}
    payload = job(consumer(sockets="8"), [pool2], ["B", "C"], rules=rules, compliance=compliance)
    assert "DEAD-BEEF" not in chosen(payload)


def test_a_completed_partial_stack_leaves_its_addon_to_the_pool_scoring_higher(
    rules: str,
) -> None:
    """8 sockets, addons RHEL EUS and ELS; compliance as Candlepin's tests set it up:
    stack s1 partial with 2 of "held" (sockets 2), a-product partially compliant.

        stack s1   stack-more  sockets 2  a-product  addons ELS
        unstacked  eus                    a-product  addons RHEL EUS
        unstacked  els                    a-product  addons ELS

    stack-more completes the stack with 2 and takes a-product off. rules.js leaves both
    addons needed: eus and els each score 3 above stack-more (sockets unset, +20,
    against stack-more's 17) and take them: {stack-more: 2, eus: 1, els: 1}. The seed
    profile counts ELS as provided by the completed stack: {stack-more: 2, eus: 1}.
    """
    held = pool("held", pattrs=stacking("s1", sockets="2"))
    more = pool(
        "stack-more",
        "sku-more",
        provided=(PRODUCT,),
        pattrs={**stacking("s1", sockets="2"), **syspurpose(addons="ELS")},
    )
    eus = pool("eus", "sku-eus", provided=(PRODUCT,), pattrs=syspurpose(addons="RHEL EUS"))
    els = pool("els", "sku-els", provided=(PRODUCT,), pattrs=syspurpose(addons="ELS"))
    held_ent = ent("e1", held, quantity=2)
    compliance = {
        "partial_stacks": {"s1": [held_ent]},
        "partially_compliant_products": {PRODUCT: [held_ent]},
    }
    cons = consumer(sockets="8", installed=(PRODUCT,), addons=("RHEL EUS", "ELS"))
    payload = job(cons, [more, eus, els], None, rules=rules, compliance=compliance)
    expected = {"stack-more": 2, "eus": 1}
    if rules != "seed":
        expected["els"] = 1
    assert chosen(payload) == expected


def test_no_pools_means_nothing_to_attach(rules: str) -> None:
    assert chosen(job(consumer(), [], ["QUANTITY001"], rules=rules)) == {}


def test_on_an_exact_tie_the_later_pool_wins(rules: str) -> None:
    pools = [
        pool("pool1", end="2050-02-26T00:00:00Z"),
        pool("pool2", end="2060-02-26T00:00:00Z"),
    ]
    assert chosen(job(consumer(sockets="32"), pools, [PRODUCT], rules=rules)) == {"pool2": 1}


def test_instance_based_pool_without_socket_fact_takes_two(rules: str) -> None:
    assert chosen(job(consumer(), [_instance_pool()], [PRODUCT], rules=rules)) == {"DEAD-BEEF": 2}


def test_instance_based_pool_on_eight_sockets_takes_eight(rules: str) -> None:
    assert chosen(job(consumer(sockets="8"), [_instance_pool()], [PRODUCT], rules=rules)) == {
        "DEAD-BEEF": 8
    }


@pytest.mark.parametrize("available", [7, 4])
def test_instance_based_pool_without_enough_for_eight_sockets_yields_nothing(
    available: int, rules: str
) -> None:
    payload = job(consumer(sockets="8"), [_instance_pool(available)], [PRODUCT], rules=rules)
    assert chosen(payload) == {}


def test_instance_based_partial_stack_is_completed_with_the_missing_four(rules: str) -> None:
    attached = ent("mock-ent", _instance_pool(), quantity=4)
    compliance = {
        "partially_compliant_products": {PRODUCT: [attached]},
        "partial_stacks": {"1": [attached]},
    }
    payload = job(
        consumer(sockets="8"), [_instance_pool()], [PRODUCT], rules=rules, compliance=compliance
    )
    assert chosen(payload) == {"DEAD-BEEF": 4}


def test_instance_based_pool_on_a_guest_steps_by_one(rules: str) -> None:
    payload = job(consumer(sockets="8", guest=True), [_instance_pool()], [PRODUCT], rules=rules)
    assert chosen(payload) == {"DEAD-BEEF": 1}


def test_host_restricted_pool_on_a_guest_needs_one(rules: str) -> None:
    p = pool(
        "DEAD-BEEF",
        quantity=100,
        pattrs=stacking("1", sockets="2", virt_limit="4"),
        attrs={"virt_only": "true", "requires_host": "BLAH"},
    )
    payload = job(consumer(sockets="8", guest=True), [p], [PRODUCT], rules=rules, host_uuid="BLAH")
    assert chosen(payload) == {"DEAD-BEEF": 1}


def test_a_stack_enforcing_nothing_needs_one(rules: str) -> None:
    p = pool("DEAD-BEEF", quantity=100, pattrs=stacking("1"))
    assert chosen(job(consumer(sockets="8"), [p], [PRODUCT], rules=rules)) == {"DEAD-BEEF": 1}


def test_an_unlimited_pool_is_attached_once(rules: str) -> None:
    p = pool("POOL-ID", quantity=-1, pattrs={"sockets": "2"})
    assert chosen(job(consumer(), [p], [PRODUCT], rules=rules)) == {"POOL-ID": 1}


def test_an_unlimited_two_socket_stack_covers_eight_sockets_with_four(rules: str) -> None:
    p = pool("POOL-ID", quantity=-1, pattrs=stacking("stackid", sockets="2"))
    assert chosen(job(consumer(sockets="8"), [p], [PRODUCT], rules=rules)) == {"POOL-ID": 4}


def _guest_limit_pools(stacked: bool) -> tuple[dict[str, object], dict[str, object]]:
    if stacked:
        server = stacking("stackid1", sockets="2", guest_limit="4")
        hyper = stacking("stackid2", sockets="2", guest_limit="-1")
    else:
        server = {"sockets": "2", "guest_limit": "4"}
        hyper = {"sockets": "2", "guest_limit": "-1"}
    return (
        pool("POOL-ID1", PRODUCT, quantity=10, pattrs=server),
        pool("Pool-ID2", "hypervisor", quantity=10, pattrs=hyper),
    )


def test_guest_limit_four_cannot_cover_five_active_guests(rules: str) -> None:
    server, hyper = _guest_limit_pools(stacked=True)
    payload = job(consumer(sockets="8", active_guests=5), [server, hyper], [PRODUCT], rules=rules)
    assert chosen(payload) == {}


def test_an_attached_unlimited_guest_limit_lets_the_server_stack_cover(rules: str) -> None:
    server, hyper = _guest_limit_pools(stacked=True)
    compliance = {"compliant_products": {"hypervisor": [ent("e-h", hyper, quantity=4)]}}
    payload = job(
        consumer(sockets="8", active_guests=5),
        [server, hyper],
        [PRODUCT],
        rules=rules,
        compliance=compliance,
    )
    assert chosen(payload) == {"POOL-ID1": 4}


def test_an_attached_unlimited_guest_limit_covers_a_non_stacked_server(rules: str) -> None:
    server, hyper = _guest_limit_pools(stacked=False)
    compliance = {"compliant_products": {"hypervisor": [ent("e-h", hyper, quantity=1)]}}
    payload = job(
        consumer(sockets="2", active_guests=5),
        [server, hyper],
        [PRODUCT],
        rules=rules,
        compliance=compliance,
    )
    assert chosen(payload) == {"POOL-ID1": 1}


def _socket_pool(pool_id: str, sockets: int, stack: str) -> dict[str, object]:
    return pool(pool_id, quantity=100, pattrs=stacking(stack, sockets=str(sockets)))


@pytest.mark.parametrize("same_stack", [True, False], ids=["one stack", "two stacks"])
@pytest.mark.parametrize(
    ("small", "large", "consumer_sockets", "winner", "quantity"),
    [
        (1, 2, "32", "large", 16),
        (2, 32, "8", "small", 4),
        (3, 5, "8", "small", 3),
        (1, 5, "9", "large", 2),
    ],
    ids=["1 vs 2 on 32", "2 vs 32 on 8", "3 vs 5 on 8", "1 vs 5 on 9"],
)
def test_the_best_fitting_socket_pool_is_used(
    small: int,
    large: int,
    consumer_sockets: str,
    winner: str,
    quantity: int,
    same_stack: bool,
    rules: str,
) -> None:
    pools = [
        _socket_pool("small", small, "1"),
        _socket_pool("large", large, "1" if same_stack else "2"),
    ]
    payload = job(consumer(sockets=consumer_sockets), pools, [PRODUCT], rules=rules)
    assert chosen(payload) == {winner: quantity}
