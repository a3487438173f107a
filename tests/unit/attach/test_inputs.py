"""Input handling: Candlepin's own JSON, rejections with field paths, limits."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from apportion.engine import Context, run
from apportion.limits import Limits
from tests.unit.attach.support import CTX, NOW, PRODUCT, consumer, ent, job, pool, stacking

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _details(kind: str, payload: dict[str, Any], ctx: Context = CTX) -> list[tuple[str, str]]:
    envelope = run(kind, payload, ctx)
    assert envelope.status == "rejected", envelope
    assert envelope.error is not None
    return [(d.path, d.message) for d in envelope.error.details]


def _paths(kind: str, payload: dict[str, Any], ctx: Context = CTX) -> list[str]:
    return [path for path, _ in _details(kind, payload, ctx)]


def test_both_examples_run_through_the_engine() -> None:
    auto = run("auto_attach", json.loads((EXAMPLES / "auto_attach.json").read_text()), CTX)
    assert auto.status == "ok"
    assert auto.result is not None
    assert auto.result["pool_quantities"] == {"pool-1": 1}
    guest = run(
        "guest_host_attach", json.loads((EXAMPLES / "guest_host_attach.json").read_text()), CTX
    )
    assert guest.status == "ok"
    assert guest.result is not None
    assert guest.result["host_pool_quantities"] == {"dc-pool": 1}


def test_candlepins_own_json_is_accepted() -> None:
    payload = {
        "consumer": {
            "uuid": "c-1",
            "type": {"label": "system", "manifest": False},
            "facts": {"cpu.cpu_socket(s)": "8", "uname.machine": "x86_64"},
            "installedProducts": [{"productId": "69", "productName": "RHEL"}],
            "serviceLevel": "Premium",
            "addOns": ["EUS"],
            "guestIds": [
                {"guestId": "g1", "attributes": {"virtWhoType": "libvirt", "active": "1"}}
            ],
            "href": "/consumers/c-1",
        },
        "pools": [
            {
                "id": "8a8d",
                "productId": "RH00009",
                "quantity": 10,
                "consumed": 2,
                "startDate": "2026-01-01T00:00:00.000+0000",
                "endDate": "2027-01-01T00:00:00.000+0000",
                "attributes": [{"name": "multi-entitlement", "value": "yes"}],
                "productAttributes": [
                    {"name": "stacking_id", "value": "rhel-stack"},
                    {"name": "sockets", "value": "2"},
                    {"name": "support_level", "value": "Premium"},
                ],
                "providedProducts": [{"productId": "69", "productName": "RHEL"}],
                "owner": {"key": "admin"},
            }
        ],
        "compliance": {
            "compliantProducts": {},
            "partiallyCompliantProducts": {},
            "partialStacks": {},
        },
        "at": "2026-06-01T00:00:00Z",
        "rules": "candlepin-5.42",
    }
    envelope = run("auto_attach", payload, CTX)
    assert envelope.status == "ok"
    assert envelope.result is not None
    assert envelope.result["pool_quantities"] == {"8a8d": 4}
    assert envelope.result["covered_products"] == ["69"]


def test_duplicate_pool_ids_are_rejected_with_the_path_of_the_second() -> None:
    payload = job(consumer(), [pool("p"), pool("q"), pool("p")], None)
    assert _paths("auto_attach", payload) == ["pools[2].id"]


@pytest.mark.parametrize(
    ("where", "name", "value"),
    [
        ("product_attributes", "sockets", "two"),
        ("attributes", "cores", "4.5"),
        ("product_attributes", "ram", "-8"),
        ("product_attributes", "vcpu", ""),
        ("attributes", "instance_multiplier", "x2"),
        ("product_attributes", "virt_limit", "lots"),
        ("product_attributes", "guest_limit", "-2"),
        ("derived_product_attributes", "sockets", "many"),
    ],
)
def test_non_numeric_sizes_are_rejected_at_their_path(where: str, name: str, value: str) -> None:
    p = pool("p", derived="d")
    p[where] = {name: value}
    assert _paths("auto_attach", job(consumer(), [p], None)) == [f"pools[0].{where}.{name}"]


@pytest.mark.parametrize(
    ("name", "value"),
    [("guest_limit", "-1"), ("virt_limit", "Unlimited"), ("sockets", "0"), ("ram", " 16 ")],
)
def test_special_numeric_values_are_accepted(name: str, value: str) -> None:
    envelope = run("auto_attach", job(consumer(), [pool("p", pattrs={name: value})], None), CTX)
    assert envelope.status == "ok"


@pytest.mark.parametrize(
    ("fact", "path"),
    [
        ("cpu.cpu_socket(s)", 'consumer.facts["cpu.cpu_socket(s)"]'),
        ("cpu.core(s)_per_socket", 'consumer.facts["cpu.core(s)_per_socket"]'),
        ("memory.memtotal", 'consumer.facts["memory.memtotal"]'),
        ("band.storage.usage", 'consumer.facts["band.storage.usage"]'),
    ],
)
def test_non_numeric_consumer_facts_are_rejected(fact: str, path: str) -> None:
    payload = job(consumer(facts={fact: "lots"}), [], None)
    assert _paths("auto_attach", payload) == [path]


def test_negative_quantities_other_than_minus_one_are_rejected() -> None:
    payload = job(
        consumer(),
        [pool("ok", quantity=-1), pool("bad", quantity=-2)],
        None,
        entitlements=[ent("e", pool("ep", quantity=-3))],
    )
    assert _paths("auto_attach", payload) == ["pools[1].quantity", "entitlements[0].pool.quantity"]


def test_every_problem_is_listed_in_one_rejection() -> None:
    payload = job(
        consumer(facts={"cpu.cpu_socket(s)": "x"}),
        [pool("p", pattrs={"sockets": "y"}), pool("p")],
        None,
    )
    assert sorted(_paths("auto_attach", payload)) == [
        'consumer.facts["cpu.cpu_socket(s)"]',
        "pools[0].product_attributes.sockets",
        "pools[1].id",
    ]


def test_unparseable_dates_are_rejected_by_the_contract() -> None:
    payload = job(consumer(), [pool("p", start="next tuesday")], None, at="soon")
    assert sorted(_paths("auto_attach", payload)) == ["at", "pools[0].start_date"]


def test_dates_without_a_zone_are_read_as_utc() -> None:
    payload = job(
        consumer(),
        [pool("p", start="2026-06-01T00:00:00", end="2026-06-01T00:00:01")],
        ["a-product"],
    )
    envelope = run("auto_attach", payload, CTX)
    assert envelope.result is not None
    assert envelope.result["pool_quantities"] == {"p": 1}


def test_compliance_entitlement_problems_carry_their_full_path() -> None:
    bad = pool("bp", pattrs={"sockets": "?"})
    payload = job(consumer(), [], None, compliance={"partialStacks": {"my.stack": [ent("e", bad)]}})
    assert _paths("auto_attach", payload) == [
        'compliance.partial_stacks["my.stack"][0].pool.product_attributes.sockets'
    ]


def test_limits_bound_pools_products_and_entitlements() -> None:
    tight = Context(limits=Limits(max_pools=2, max_products=2, max_entitlements=1), now=NOW)
    assert _paths(
        "auto_attach", job(consumer(), [pool("a"), pool("b"), pool("c")], None), tight
    ) == ["pools"]
    assert _paths("auto_attach", job(consumer(installed=("x", "y", "z")), [], None), tight) == [
        "consumer.installed_products"
    ]
    assert _paths("auto_attach", job(consumer(), [], ["x", "y", "z"]), tight) == ["products"]
    assert _paths(
        "auto_attach", job(consumer(), [pool("a", provided=("x", "y", "z"))], None), tight
    ) == ["pools[0].provided_products"]
    ents = [ent("e1", pool("a")), ent("e2", pool("b"))]
    assert _paths("auto_attach", job(consumer(), [], None, entitlements=ents), tight) == [
        "entitlements"
    ]
    envelope = run("auto_attach", job(consumer(), [pool("a")], None), tight)
    assert envelope.status == "ok"


def test_the_first_limit_exceeded_is_reported_pools_before_compliance() -> None:
    tight = Context(limits=Limits(max_pools=5, max_products=2, max_entitlements=1), now=NOW)
    compliance = {"compliant_products": {"x": [ent("e1", pool("a")), ent("e2", pool("b"))]}}
    wide = pool("w", provided=("x", "y", "z"))
    bad = pool("bad", pattrs={"sockets": "many"})
    both = job(consumer(), [bad, wide], None, compliance=compliance)
    assert _details("auto_attach", both, tight) == [
        (
            "pools[1].provided_products",
            "3 products exceed the limit of 2 per job (raise APPORTION_LIMITS__MAX_PRODUCTS)",
        )
    ]
    only_compliance = job(consumer(), [bad], None, compliance=compliance)
    assert _details("auto_attach", only_compliance, tight) == [
        (
            "compliance",
            "2 entitlements exceed the limit of 1 per job "
            "(raise APPORTION_LIMITS__MAX_ENTITLEMENTS)",
        )
    ]


def _guest_job() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / "guest_host_attach.json").read_text())
    return data


def test_a_guest_job_whose_guest_is_not_a_guest_is_rejected() -> None:
    payload = _guest_job()
    payload["guest"]["facts"]["virt.is_guest"] = "false"
    assert _paths("guest_host_attach", payload) == ['guest.facts["virt.is_guest"]']


def test_requested_pools_must_exist() -> None:
    payload = _guest_job()
    payload["requested_pools"] = ["dc-pool", "nope"]
    assert _paths("guest_host_attach", payload) == ["requested_pools[1]"]


def test_guest_job_fields_are_checked_like_auto_attach_fields() -> None:
    payload = _guest_job()
    bad = copy.deepcopy(payload["pools"][0])
    bad["product_attributes"]["virt_limit"] = "several"
    payload["pools"].append(bad)
    assert _paths("guest_host_attach", payload) == [
        "pools[1].id",
        "pools[1].product_attributes.virt_limit",
    ]


def test_an_auto_attach_finding_nothing_is_ok_with_an_empty_map() -> None:
    envelope = run(
        "auto_attach", job(consumer(installed=("x",)), [pool("p", pattrs=stacking("s"))], None), CTX
    )
    assert envelope.status == "ok"
    assert envelope.result is not None
    assert envelope.result["pool_quantities"] == {}
    assert envelope.result["uncovered_products"] == ["x"]


def _code(kind: str, payload: dict[str, Any]) -> str:
    envelope = run(kind, payload, CTX)
    assert envelope.error is not None
    return envelope.error.code


def test_an_empty_derived_product_id_is_refused_at_its_path_as_product_id_would_be() -> None:
    # The derived pool built for the guest takes it as its product_id (at least 1
    # character): refused at the edge, not by that inner pool as an internal error.
    payload = _guest_job()
    payload["pools"][0]["derived_product_id"] = ""
    assert _code("guest_host_attach", payload) == "invalid_job"
    assert _details("guest_host_attach", payload) == [
        ("pools[0].derived_product_id", "String should have at least 1 character")
    ]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("derived_provided_products", [""], "String should have at least 1 character"),
        ("provided_products", ["p1", ""], "String should have at least 1 character"),
        ("provided_products", ["p1", {"productId": ""}], "String should have at least 1 character"),
        ("derived_provided_products", ["x" * 257], "String should have at most 256 characters"),
    ],
)
def test_an_empty_or_overlong_product_id_in_a_product_list_is_refused_as_a_string_at_its_index(
    field: str, value: list[Any], message: str
) -> None:
    p = pool("p", derived="d")
    p[field] = value
    index = len(value) - 1
    assert _details("auto_attach", job(consumer(), [p], None)) == [
        (f"pools[0].{field}[{index}]", message)
    ]


def test_an_empty_installed_product_id_is_refused_as_a_string_at_its_index() -> None:
    payload = job(consumer(installed=("p1", "")), [], None)
    assert _details("auto_attach", payload) == [
        ("consumer.installed_products[1]", "String should have at least 1 character")
    ]


@pytest.mark.parametrize(
    "field", ["attributes", "product_attributes", "derived_product_attributes"]
)
@pytest.mark.parametrize(
    ("name", "got"), [(None, "null"), ({"n": "sockets"}, "dict"), (["sockets"], "list")]
)
def test_an_attribute_listed_without_a_string_name_is_refused_at_its_index(
    field: str, name: Any, got: str
) -> None:
    p = pool("p", derived="d")
    p[field] = [{"name": "arch", "value": "x86_64"}, {"name": name, "value": "2"}]
    payload = job(consumer(), [p], None)
    assert _code("auto_attach", payload) == "invalid_job"
    assert _details("auto_attach", payload) == [
        (f"pools[0].{field}[1].name", f"an attribute needs a name (a string), got {got}")
    ]


@pytest.mark.parametrize("field", ["attributes", "product_attributes"])
def test_an_attribute_named_twice_in_the_list_form_is_refused_at_the_second(field: str) -> None:
    p = pool("p")
    p[field] = [
        {"name": "sockets", "value": "abc"},
        {"name": "arch", "value": "x86_64"},
        {"name": "sockets", "value": "2"},
    ]
    assert _details("auto_attach", job(consumer(), [p], None)) == [
        (
            f"pools[0].{field}[2].name",
            "duplicate attribute name 'sockets' (also item 0): send it once",
        )
    ]


def test_a_consumer_guest_id_attribute_named_twice_is_refused_at_the_second() -> None:
    cons = consumer()
    cons["guest_ids"] = [
        {"guest_id": "g", "attributes": [{"name": "active", "value": "1"}, {"name": "active"}]}
    ]
    assert _paths("auto_attach", job(cons, [], None)) == [
        "consumer.guest_ids[0].attributes[1].name"
    ]


def test_an_attribute_listed_without_a_value_is_unset_as_a_null_value_is() -> None:
    listed = pool("p", pattrs=stacking("s"))
    listed["product_attributes"] = [
        *({"name": k, "value": v} for k, v in stacking("s").items()),
        {"name": "sockets"},
    ]
    with_null = pool("p", pattrs={**stacking("s"), "sockets": None})
    cons = consumer(sockets="4", installed=(PRODUCT,))
    answers = [run("auto_attach", job(cons, [p], None), CTX) for p in (listed, with_null)]
    assert [a.status for a in answers] == ["ok", "ok"]
    assert answers[0].result == answers[1].result


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("sockets", "-1", "must be a non-negative whole number, got '-1'"),
        ("cores", "-4", "must be a non-negative whole number, got '-4'"),
        ("guest_limit", "-2", "must be a non-negative whole number or -1 (unlimited), got '-2'"),
        ("virt_limit", "-1", "must be a non-negative whole number or \"unlimited\", got '-1'"),
    ],
)
def test_a_negative_numeric_attribute_is_refused_as_not_a_non_negative_whole_number(
    name: str, value: str, expected: str
) -> None:
    payload = job(consumer(), [pool("p", pattrs={name: value})], None)
    assert _details("auto_attach", payload) == [(f"pools[0].product_attributes.{name}", expected)]


def test_a_guest_whose_uuid_is_its_hosts_is_refused_as_its_own_host() -> None:
    payload = _guest_job()
    payload["guest"]["uuid"] = payload["host"]["uuid"]
    assert _code("guest_host_attach", payload) == "invalid_job"
    assert _details("guest_host_attach", payload) == [
        ("guest.uuid", "a guest cannot be its own host: host.uuid is 'host-1' too")
    ]
