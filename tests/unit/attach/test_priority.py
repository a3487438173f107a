"""Pool priority: the seed's worked example, the reference's known values, Candlepin's cases."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.unit.attach.support import (
    attach,
    consumer,
    job,
    pool,
    priorities,
    satisfied_role_compliance,
    syspurpose,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference"


def _worked_example(rules: str) -> dict[str, object]:
    payload: dict[str, object] = json.loads((EXAMPLES / "auto_attach.json").read_text())
    payload["rules"] = rules
    return payload


@pytest.mark.parametrize(
    ("rules", "score"),
    [("seed", Fraction("9028.5")), ("candlepin-5.42", Fraction("9008.5"))],
)
def test_the_seed_worked_example_scores_as_documented(rules: str, score: Fraction) -> None:
    assert priorities(_worked_example(rules)) == {"pool-1": score}


def test_the_worked_example_attaches_one_of_pool_1_and_reports_its_priority() -> None:
    result = attach(_worked_example("seed"))
    assert result["pool_quantities"] == {"pool-1": 1}
    (group,) = result["explanation"]["groups"]
    assert group["pool_priorities"] == {"pool-1": 9028.5}
    expected = json.loads((REFERENCE / "auto_attach.json").read_text())
    assert result["pool_quantities"] == expected["pool_quantities"]


@pytest.mark.parametrize(
    ("rules", "score"),
    [
        ("candlepin-5.44", Fraction("12419.25")),
        ("candlepin-5.42", Fraction("6257.5")),
        ("seed", Fraction("6277.5")),
    ],
)
def test_a_physical_consumer_with_its_product_provided_scores_the_known_values(
    rules: str, score: Fraction
) -> None:
    payload = job(
        consumer(installed=("p",)), [pool("pool", "sku", provided=("p",))], None, rules=rules
    )
    assert priorities(payload) == {"pool": score}


def test_a_pool_never_scores_below_zero_even_with_everything_mismatched() -> None:
    cons = consumer(
        role="RHEL Server",
        sla="Premium",
        usage="Production",
        addons=("Smart Management",),
        installed=("compliant-69",),
    )
    p = pool(
        "pool_id",
        provided=("non-compliant-100",),
        pattrs=syspurpose(
            "mismatched_role", "mismatched_addon", "mismatched_sla", "mismatched_usage"
        ),
    )
    for rules in ("seed", "candlepin-5.42", "candlepin-5.44"):
        assert priorities(job(cons, [p], rules=rules))["pool_id"] >= 0


def test_sizing_closeness_rewards_the_exact_fit_and_loses_half_a_point_per_extra_entitlement() -> (
    None
):
    # 8 sockets: 4 × 2 sockets is exact (10 − 0 − 1.5) × 2 = 17; 1 × 32 overshoots by 24 → 0;
    # 3 × 3 overshoots by 1 (10 − 1 − 1) × 2 = 16; an unlimited pool has no "available".
    cons = consumer(sockets="8")
    pools = [
        pool("two", quantity=100, pattrs={"sockets": "2"}),
        pool("thirty-two", quantity=100, pattrs={"sockets": "32"}),
        pool("three", quantity=100, pattrs={"sockets": "3"}),
        pool("too-few", quantity=3, pattrs={"sockets": "2"}),
        pool("unlimited", quantity=-1, pattrs={"sockets": "2"}),
    ]
    base = priorities(job(cons, [pool("none")], rules="candlepin-5.42"))["none"] - 20
    got = {k: v - base for k, v in priorities(job(cons, pools, rules="candlepin-5.42")).items()}
    assert got == {"two": 17, "thirty-two": 0, "three": 16, "too-few": 0, "unlimited": 0}


def test_instance_based_availability_counts_instances_not_entitlements() -> None:
    # 8 sockets on 2-socket pools need 4; with instance_multiplier 2 the 7 available
    # entitlements are only 3.5 instances, so the closeness bonus is lost.
    cons = consumer(sockets="8")
    seven = pool("seven", quantity=7, attrs={"instance_multiplier": "2"}, pattrs={"sockets": "2"})
    eight = pool("eight", quantity=8, attrs={"instance_multiplier": "2"}, pattrs={"sockets": "2"})
    got = priorities(job(cons, [seven, eight], rules="candlepin-5.42"))
    assert got["eight"] - got["seven"] == 17


def test_virt_only_and_host_specific_pools_get_their_static_bonus() -> None:
    cons = consumer(guest=True)
    pools = [
        pool("plain"),
        pool("virt", attrs={"virt_only": "true"}),
        pool("host", attrs={"virt_only": "true", "requires_host": "h"}),
    ]
    got = priorities(job(cons, pools, rules="candlepin-5.42"))
    assert got["virt"] - got["plain"] == 100
    assert got["host"] - got["plain"] == 250


def _order(payload: dict[str, object]) -> dict[str, Fraction]:
    return priorities(payload)


RULES = ["seed", "candlepin-5.42", "candlepin-5.44"]


@pytest.mark.parametrize("rules", RULES)
def test_satisfied_role_and_needed_addon_prefer_the_addon_only_pool(rules: str) -> None:
    cons = consumer(role="RHEL Server", addons=("RHEL EUS",))
    pools = [
        pool(
            "p1",
            provided=("non-compliant-69",),
            pattrs=syspurpose("RHEL Server", "RHEL EUS", usage="Production"),
        ),
        pool("p2", pattrs=syspurpose(addons="RHEL EUS")),
        pool("p3", provided=("non-compliant-82",), pattrs=syspurpose("JBoss", "RHEL EUS")),
    ]
    got = _order(job(cons, pools, rules=rules, compliance=satisfied_role_compliance("RHEL Server")))
    assert got["p2"] > got["p1"] > got["p3"]


@pytest.mark.parametrize("rules", RULES)
def test_needed_role_and_addon_prefer_the_pool_providing_both(rules: str) -> None:
    cons = consumer(role="RHEL Server", addons=("RHEL EUS",))
    pools = [
        pool(
            "p1",
            provided=("non-compliant-69",),
            pattrs=syspurpose("RHEL Server", "RHEL EUS", usage="Production"),
        ),
        pool("p2", pattrs=syspurpose(addons="RHEL EUS")),
        pool("p3", provided=("non-compliant-82",), pattrs=syspurpose("JBoss", "RHEL EUS")),
    ]
    got = _order(job(cons, pools, rules=rules))
    assert got["p1"] > got["p2"] > got["p3"]


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize(
    ("role", "better", "worse"),
    [("Satellite", "MCT1650", "RH00009"), ("RHEL Server", "RH00009", "MCT1650")],
)
def test_the_role_decides_between_a_server_and_a_satellite_pool(
    role: str, better: str, worse: str, rules: str
) -> None:
    pools = [
        pool(
            "RH00009",
            provided=("non-compliant-69",),
            pattrs=syspurpose("RHEL Server", "Smart Management"),
        ),
        pool(
            "MCT1650",
            provided=("non-compliant-69", "non-compliant-89", "non-compliant-100"),
            pattrs=syspurpose(roles="Satellite"),
        ),
    ]
    got = _order(job(consumer(role=role), pools, rules=rules))
    assert got[better] > got[worse]


@pytest.mark.parametrize("rules", RULES)
def test_two_mismatched_roles_score_the_same(rules: str) -> None:
    pools = [
        pool("RH00009", provided=("non-compliant-69",), pattrs=syspurpose(roles="RHEL Server")),
        pool(
            "MCT1650",
            provided=("non-compliant-69", "non-compliant-89", "non-compliant-100"),
            pattrs=syspurpose(roles="Satellite"),
        ),
        pool(
            "MCT0352", provided=("non-compliant-69",), pattrs=syspurpose(roles="RHEL Workstation")
        ),
    ]
    got = _order(job(consumer(role="RHEL Workstation"), pools, rules=rules))
    assert got["MCT0352"] > got["RH00009"] == got["MCT1650"]


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize(
    ("addons", "pools", "order"),
    [
        (
            ("RHEL EUS",),
            {
                "RH00009": syspurpose("RHEL Server", "RHEL EUS"),
                "MCT1650": syspurpose("Satellite"),
                "RH00030": syspurpose(addons="RHEL EUS"),
            },
            ["RH00030", "RH00009", "MCT1650"],
        ),
        (
            ("RHEL EUS",),
            {
                "RH00009": syspurpose("RHEL Server", "Smart Management"),
                "RH00741": syspurpose("RHEL for HPC Compute Node", "RHEL EUS"),
                "RH00030": syspurpose(addons="RHEL EUS"),
            },
            ["RH00030", "RH00741", "RH00009"],
        ),
    ],
    ids=["use case 5", "use case 7"],
)
def test_with_the_role_satisfied_the_needed_addon_decides(
    addons: tuple[str, ...], pools: dict[str, dict[str, str]], order: list[str], rules: str
) -> None:
    cons = consumer(role="RHEL Server", addons=addons)
    payload = job(
        cons,
        [pool(k, pattrs=v) for k, v in pools.items()],
        rules=rules,
        compliance=satisfied_role_compliance("RHEL Server"),
    )
    got = _order(payload)
    assert got[order[0]] > got[order[1]] > got[order[2]]


@pytest.mark.parametrize("rules", RULES)
def test_each_of_two_needed_addons_is_worth_the_same(rules: str) -> None:
    cons = consumer(role="RHEL Server", addons=("RHEL EUS", "RHEL ELS"))
    pools = [
        pool("RH00009", pattrs=syspurpose("RHEL Server", "Smart Management")),
        pool("MCT1963", pattrs=syspurpose(addons="RHEL ELS")),
        pool("RH00030", pattrs=syspurpose(addons="RHEL EUS")),
    ]
    got = _order(job(cons, pools, rules=rules, compliance=satisfied_role_compliance("RHEL Server")))
    assert got["RH00030"] == got["MCT1963"] > got["RH00009"]


@pytest.mark.parametrize("rules", RULES)
def test_with_the_workstation_role_satisfied_the_addon_pool_leads(rules: str) -> None:
    cons = consumer(role="RHEL Workstation", addons=("RHEL EUS",))
    pools = [
        pool("RH00009", pattrs=syspurpose("RHEL Server", "Smart Management")),
        pool("MCT0352", pattrs=syspurpose(roles="RHEL Workstation")),
        pool("RH00030", pattrs=syspurpose(addons="RHEL EUS")),
    ]
    got = _order(
        job(cons, pools, rules=rules, compliance=satisfied_role_compliance("RHEL Workstation"))
    )
    assert got["RH00030"] > got["MCT0352"] > got["RH00009"]


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize(
    ("cons_kwargs", "better", "worse"),
    [
        (
            {"role": "RHEL Server", "sla": "Premium", "usage": "Development"},
            syspurpose("RHEL Server", "Smart Management", "Premium", "Production"),
            syspurpose("RHEL Server", "Smart Management", "Standard", "Production"),
        ),
        (
            {"role": "RHEL Server", "sla": "Premium"},
            syspurpose("RHEL Server", "Smart Management", "Premium", "Production"),
            syspurpose("RHEL Server", "Smart Management", "Standard", "Production"),
        ),
        (
            {"role": "RHEL Server", "sla": "Standard", "usage": "Development"},
            syspurpose("RHEL Server", "Smart Management", "Standard", "Production"),
            syspurpose("RHEL Server", "Smart Management", None, "Production"),
        ),
    ],
    ids=["use case 9", "use case 10", "use case 11"],
)
def test_with_equal_roles_the_matching_sla_wins(
    cons_kwargs: dict[str, Any], better: dict[str, str], worse: dict[str, str], rules: str
) -> None:
    pools = [pool("better", pattrs=better), pool("worse", pattrs=worse)]
    got = _order(job(consumer(**cons_kwargs), pools, rules=rules))
    assert got["better"] > got["worse"]


@pytest.mark.parametrize("rules", RULES)
def test_a_mistyped_usage_favours_the_pool_without_usage(rules: str) -> None:
    pools = [
        pool(
            "RH00009",
            pattrs=syspurpose("RHEL Server", "Smart Management", "Standard", "Development"),
        ),
        pool("RH00008", pattrs=syspurpose("RHEL Server", "Smart Management", "Premium")),
        pool("MCT1650", pattrs=syspurpose("Satellite", sla="Premium")),
    ]
    got = _order(job(consumer(role="RHEL Server", usage="Typo"), pools, rules=rules))
    assert got["RH00008"] > got["RH00009"] > got["MCT1650"]


@pytest.mark.parametrize("rules", RULES)
def test_only_role_and_sla_specified(rules: str) -> None:
    pools = [
        pool(
            "RH00009",
            pattrs=syspurpose("RHEL Server", "Smart Management", "Standard", "Development"),
        ),
        pool(
            "I_RH00009",
            pattrs=syspurpose("RHEL Server", "Smart Management", "Premium", "Production"),
        ),
        pool("MCT1650", pattrs=syspurpose("Satellite")),
    ]
    got = _order(job(consumer(role="Satellite", sla="Premium"), pools, rules=rules))
    assert got["MCT1650"] > got["I_RH00009"] > got["RH00009"]


@pytest.mark.parametrize("rules", RULES)
def test_sla_beats_usage_and_a_role_mismatch_outweighs_the_rest(rules: str) -> None:
    cons = consumer(
        role="RHEL Server",
        sla="Standard",
        usage="Development",
        addons=("RHEL EUS",),
        installed=("non-compliant-69",),
    )
    pools = [
        pool(
            "RH0000W",
            provided=("non-compliant-69",),
            pattrs=syspurpose("RHEL Workstation", sla="Standard"),
        ),
        pool(
            "RH0000D",
            provided=("non-compliant-69",),
            pattrs=syspurpose("RHEL Desktop", usage="Development"),
        ),
    ]
    got = _order(job(cons, pools, rules=rules))
    assert got["RH0000W"] > got["RH0000D"]

    cons = consumer(
        role="RHEL Server",
        sla="Premium",
        usage="Production",
        addons=("Smart Management",),
        installed=("non-compliant-69",),
    )
    pools = [
        pool(
            "RH00009",
            provided=("non-compliant-69",),
            pattrs=syspurpose("RHEL Server", None, "Standard", "Development"),
        ),
        pool(
            "RH00008",
            provided=("non-compliant-69",),
            pattrs=syspurpose(
                "RHEL for HPC Compute Node", "Smart Management", "Premium", "Production"
            ),
        ),
    ]
    got = _order(job(cons, pools, rules=rules))
    assert got["RH00009"] > got["RH00008"]


def test_the_seed_scores_all_four_sizes_but_candlepin_only_those_of_the_consumer_type() -> None:
    guest = consumer(guest=True, sockets="4", cores="2")
    p = pool("p", pattrs={"sockets": "1"})  # 4 × 1 socket: (10 − 0 − 1.5) × 2 = 17
    seed = priorities(job(guest, [p], rules="seed"))["p"]
    candlepin = priorities(job(guest, [p], rules="candlepin-5.42"))["p"]
    # seed: sockets 17 + cores 20 + ram 20 + vcpu 20; candlepin (guest): vcpu 20 + ram 20.
    assert seed - candlepin == 37
