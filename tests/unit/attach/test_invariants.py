"""Invariants over random jobs (hypothesis): availability, steps, filters, real coverage."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.attach.compliance import CoverageContext, attached_entitlements, compute_compliance
from apportion.attach.facts import consumer_profile
from apportion.attach.pools import view_pool
from apportion.contracts.attach import AutoAttachJob, Entitlement
from apportion.engine import run
from tests.unit.attach.support import CTX, NOW, attach

PRODUCTS = ["p0", "p1", "p2", "p3", "p4"]
ROLES = ["Server", "Workstation"]
ADDONS = ["EUS", "ELS"]


def _maybe(values: list[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.sampled_from(values))


@st.composite
def pools(draw: st.DrawFn, index: int) -> dict[str, Any]:
    pattrs: dict[str, str] = {}
    attrs: dict[str, str] = {}
    stack = draw(_maybe(["s1", "s2"]))
    if stack is not None:
        pattrs["stacking_id"] = stack
    if draw(st.integers(0, 3)) > 0:
        pattrs["multi-entitlement"] = "yes"
    for name in ("sockets", "cores", "ram", "vcpu"):
        value = draw(_maybe([1, 2, 4, 8, 16]))
        if value is not None:
            pattrs[name] = str(value)
    for name, values in (
        ("instance_multiplier", ["2", "4"]),
        ("arch", ["x86_64", "ALL", "x86"]),
        ("guest_limit", ["-1", "2", "8"]),
        ("roles", ["Server", "server,Workstation", "Other"]),
        ("addons", ["EUS", "eus, ELS", "Other"]),
        ("support_level", ["Premium", "Standard"]),
        ("usage", ["Production", "Development"]),
    ):
        value = draw(_maybe(values))
        if value is not None:
            pattrs[name] = value
    if draw(st.integers(0, 5)) == 0:
        attrs["virt_only"] = "true"
    if draw(st.integers(0, 6)) == 0:
        attrs["requires_host"] = draw(st.sampled_from(["h1", "h2"]))
    quantity = draw(st.integers(-1, 40))
    consumed = draw(st.integers(0, max(quantity, 0) // 4))
    start, end = draw(
        st.sampled_from(
            [
                ("2020-01-01T00:00:00Z", "2030-01-01T00:00:00Z"),
                ("2020-01-01T00:00:00Z", "2030-01-01T00:00:00Z"),
                ("2026-07-01T00:00:00Z", "2030-01-01T00:00:00Z"),
                ("2020-01-01T00:00:00Z", "2026-05-01T00:00:00Z"),
                (None, None),
            ]
        )
    )
    return {
        "id": f"pool-{index}",
        "product_id": draw(st.sampled_from(["sku-a", "sku-b", *PRODUCTS])),
        "quantity": quantity,
        "consumed": consumed,
        "start_date": start,
        "end_date": end,
        "attributes": attrs,
        "product_attributes": pattrs,
        "provided_products": draw(
            st.lists(st.sampled_from(PRODUCTS), min_size=1, max_size=3, unique=True)
        ),
    }


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    guest = draw(st.booleans())
    facts: dict[str, str] = {
        "cpu.cpu_socket(s)": str(draw(st.integers(1, 8))),
        "cpu.core(s)_per_socket": str(draw(st.integers(1, 4))),
        "memory.memtotal": str(draw(st.integers(1, 32)) * 1024 * 1024),
    }
    arch = draw(st.sampled_from(["x86_64", "x86_64", "ppc64le", "i686"]))
    facts["uname.machine"] = arch
    if guest:
        facts["virt.is_guest"] = "true"
    pool_list = [draw(pools(i)) for i in range(draw(st.integers(1, 10)))]
    ents = []
    for i in range(draw(st.integers(0, 2))):
        if pool_list:
            source = draw(st.sampled_from(pool_list))
            ents.append({"id": f"ent-{i}", "pool": source, "quantity": draw(st.integers(1, 3))})
    return {
        "consumer": {
            "uuid": "c",
            "facts": facts,
            "installed_products": draw(
                st.lists(st.sampled_from(PRODUCTS), min_size=1, max_size=4, unique=True)
            ),
            "role": draw(_maybe(ROLES)),
            "addons": draw(st.lists(st.sampled_from(ADDONS), max_size=2, unique=True)),
            "service_level": draw(_maybe(["premium", "Standard"])),
            "usage": draw(_maybe(["Production"])),
            "guest_ids": [
                {"guest_id": f"g{i}", "attributes": {"virtWhoType": "libvirt", "active": "1"}}
                for i in range(draw(st.integers(0, 4)))
            ],
        },
        "pools": pool_list,
        "entitlements": ents,
        "rules": draw(st.sampled_from(["seed", "candlepin-5.42", "candlepin-5.44"])),
        "host_uuid": draw(_maybe(["h1"])),
    }


SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)


@SETTINGS
@given(jobs())
def test_attach_results_respect_availability_steps_filters_and_coverage(
    payload: dict[str, Any],
) -> None:
    envelope = run("auto_attach", payload, CTX)
    assert envelope.status == "ok", envelope.error
    result = attach(payload)
    assert result == attach(payload)  # same input, same answer

    parsed = AutoAttachJob.model_validate(payload)
    profile = consumer_profile(parsed.consumer)
    by_id = {p.id: p for p in parsed.pools}
    dropped = {d["pool"] for d in result["explanation"]["dropped_pools"]}
    for pool_id, quantity in result["pool_quantities"].items():
        view = view_pool(by_id[pool_id], 0)
        assert pool_id not in dropped
        assert quantity >= 1
        if not view.unlimited:
            assert quantity <= view.available
        if not view.multi_ent:
            assert quantity == 1
        if not profile.is_guest and view.instance_multiplier:
            assert quantity % view.instance_multiplier == 0
        assert view.start is None or view.start <= NOW
        assert view.end is None or view.end >= NOW
        if view.virt_only_any or view.requires_host:
            assert profile.is_guest
        if view.requires_host:
            assert view.requires_host == payload["host_uuid"]

    for pick in result["explanation"]["picks"]:
        # Every chosen group contributes something needed, or completes a stack the
        # consumer holds part of (which it does whether or not the stack provides an
        # installed product).
        assert pick["covers"] or pick["reason"] == "completes a partial stack", pick

    to_cover = result["explanation"]["products_to_cover"]
    assert sorted(result["covered_products"] + result["uncovered_products"]) == sorted(to_cover)

    # The covered products really are covered once the chosen quantities are attached.
    added = [
        Entitlement(id=f"new-{i}", pool=by_id[pool_id], quantity=quantity)
        for i, (pool_id, quantity) in enumerate(result["pool_quantities"].items())
    ]
    attached = attached_entitlements([*parsed.entitlements, *added])
    status = compute_compliance(CoverageContext(profile), profile.installed, attached, NOW)
    assert set(result["covered_products"]) <= set(status.compliant)


@st.composite
def guest_jobs(draw: st.DrawFn) -> dict[str, Any]:
    base = draw(jobs())
    guest = dict(base["consumer"], uuid="guest-1")
    guest["facts"] = {**guest["facts"], "virt.is_guest": "true", "virt.uuid": "guest-1"}
    host = {
        "uuid": "h1",
        "type": "hypervisor",
        "facts": {"cpu.cpu_socket(s)": str(draw(st.integers(1, 8))), "uname.machine": "x86_64"},
    }
    for p in base["pools"]:
        if draw(st.booleans()):
            p["product_attributes"]["virt_limit"] = draw(st.sampled_from(["0", "2", "unlimited"]))
        if draw(st.booleans()):
            p["derived_product_id"] = "guest-sku"
            p["derived_provided_products"] = draw(
                st.lists(st.sampled_from(PRODUCTS), min_size=1, max_size=2, unique=True)
            )
    return {"guest": guest, "host": host, "pools": base["pools"], "rules": base["rules"]}


@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(guest_jobs())
def test_guest_host_results_are_consistent(payload: dict[str, Any]) -> None:
    envelope = run("guest_host_attach", payload, CTX)
    assert envelope.status == "ok", envelope.error
    result = envelope.result
    assert result is not None
    by_id = {p["id"]: p for p in payload["pools"]}
    for pool_id in result["host_pool_quantities"]:
        assert by_id[pool_id]["product_attributes"].get("virt_limit") not in (None, "0")
    derived = {p["id"]: p for p in result["derived_pools"]}
    for p in derived.values():
        assert p["attributes"]["virt_only"] == "true"
        assert p["attributes"]["requires_host"] == "h1"
        assert p["quantity"] == -1 or p["quantity"] > 0
    assert set(result["guest_pool_quantities"]) <= set(by_id) | set(derived)
    assert run("guest_host_attach", payload, CTX).result == result


@settings(max_examples=1, deadline=None, derandomize=True)
@given(st.lists(jobs(), min_size=12, max_size=12))
def test_the_same_jobs_give_byte_identical_envelopes_whatever_the_hash_seed(
    payloads: list[dict[str, Any]],
) -> None:
    # Sets of strings iterate in an order that changes with PYTHONHASHSEED: nothing the
    # engine writes may follow it. Random jobs, solved in fresh processes under different
    # seeds, the timing field aside (and the check time fixed: a job without one is
    # checked now).
    text = json.dumps([{**p, "at": NOW.isoformat()} for p in payloads])
    outputs = set()
    for seed in ("0", "1", "4242"):
        done = subprocess.run(
            [sys.executable, "-m", "apportion.cli", "solve", "auto_attach", "-"],
            input=text.encode(),
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            check=True,
        )
        outputs.add(re.sub(rb'"elapsed_ms":[0-9.e+-]+', b"", done.stdout))
    assert len(outputs) == 1
