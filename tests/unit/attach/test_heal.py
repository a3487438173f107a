"""heal_org answers what auto_attach answers consumer by consumer, each job carrying the
pools' consumed as raised by the consumers before it (Candlepin's HealEntireOrgJob)."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from apportion.engine import Context, run
from apportion.limits import Limits
from tests.support.samples import comparison
from tests.unit.attach.support import NOW, consumer, ent, pool, stacking

CTX = Context(now=NOW)
PRODUCTS = [f"p{i}" for i in range(6)]
STACKS = ["s1", "s2", "s3"]
HOSTS = ["host-1", "host-2"]
ROLES = ["RHEL Server", "Satellite"]
ADDONS = ["RHEL EUS", "ELS"]


# ---- generated estates ---------------------------------------------------------------


def _pool(rng: random.Random, index: int) -> dict[str, Any]:
    pattrs: dict[str, str] = {}
    attrs: dict[str, str] = {}
    if rng.random() < 0.45:
        pattrs.update(stacking(rng.choice(STACKS)))
    elif rng.random() < 0.5:
        pattrs["multi-entitlement"] = "yes"
    for name, values, p in (
        ("sockets", ["1", "2", "4"], 0.5),
        ("cores", ["4", "8"], 0.15),
        ("vcpu", ["2", "4"], 0.1),
        ("guest_limit", ["2", "-1"], 0.05),
        ("instance_multiplier", ["2"], 0.08),
        ("arch", ["x86_64", "ALL", "ppc64le"], 0.2),
        ("roles", ROLES, 0.2),
        ("addons", ADDONS, 0.15),
        ("support_level", ["Premium", "Standard"], 0.3),
    ):
        if rng.random() < p:
            pattrs[name] = rng.choice(values)
    if rng.random() < 0.25:
        # Host-bound: only the guests of that host may attach it.
        attrs["virt_only"] = "true"
        attrs["requires_host"] = rng.choice(HOSTS)
    elif rng.random() < 0.08:
        attrs["virt_only"] = "true"
    # Tight: a few consumers exhaust most pools, so later ones meet used-up pools.
    r = rng.random()
    quantity = -1 if r < 0.05 else rng.randint(1, 3) if r < 0.8 else rng.randint(4, 8)
    consumed = 0 if quantity < 0 or rng.random() < 0.7 else rng.randint(0, quantity)
    product = rng.choice(PRODUCTS) if rng.random() < 0.25 else f"sku-{index}"
    provided = tuple(rng.sample(PRODUCTS, rng.choice([1, 1, 2, 3])))
    return pool(
        f"pool-{index:02d}",
        product,
        provided=provided,
        quantity=quantity,
        consumed=consumed,
        attrs=attrs,
        pattrs=pattrs,
    )


def _consumer(rng: random.Random, index: int, pools: list[dict[str, Any]]) -> dict[str, Any]:
    guest = rng.random() < 0.4
    made = consumer(
        uuid=f"consumer-{index}",
        sockets=rng.choice([None, "1", "2", "4", "8"]),
        cores=rng.choice([None, "2", "4"]),
        arch=rng.choice([None, "x86_64", "x86_64", "ppc64le"]),
        guest=guest,
        installed=tuple(rng.sample(PRODUCTS, rng.randint(1, 4))),
        role=rng.choice([None, None, *ROLES]),
        addons=tuple(rng.sample(ADDONS, rng.choice([0, 0, 1]))),
        sla=rng.choice([None, "Premium"]),
        active_guests=0 if guest else rng.choice([0, 0, 1, 3]),
    )
    entry: dict[str, Any] = {"consumer": made, "entitlements": []}
    if guest and rng.random() < 0.8:
        entry["host_uuid"] = rng.choice(HOSTS)
    if rng.random() < 0.3:
        # An entitlement already attached: mostly one pool of a stack, a partial stack
        # (whether or not the stack provides what the consumer installs).
        stacked = [p for p in pools if "stacking_id" in p["product_attributes"]]
        source = copy.deepcopy(rng.choice(stacked if stacked and rng.random() < 0.7 else pools))
        entry["entitlements"].append(ent(f"ent-{index}", source, rng.randint(1, 2)))
    if rng.random() < 0.04:
        broken = pool("broken", "p0", pattrs={"sockets": "lots"})
        entry["entitlements"].append(ent(f"ent-bad-{index}", broken))
    if rng.random() < 0.1:
        entry["products"] = rng.sample(PRODUCTS, rng.randint(1, 3))
    return entry


def estate(rng: random.Random) -> dict[str, Any]:
    pools = [_pool(rng, i) for i in range(rng.randint(3, 14))]
    consumers = [_consumer(rng, i, pools) for i in range(rng.randint(1, 8))]
    return {
        "job_id": "heal",
        "rules": rng.choice(["seed", "candlepin-5.42", "candlepin-5.44"]),
        "at": "2026-06-01T00:00:00Z",
        "pools": pools,
        "consumers": consumers,
    }


# ---- the single-job loop the answer must equal ---------------------------------------


def one_by_one(job: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """auto_attach per consumer, raising the pools' consumed between the jobs."""
    consumed = {p["id"]: p["consumed"] for p in job["pools"]}
    touched: dict[str, int] = {}
    answers: list[dict[str, Any]] = []
    for entry in job["consumers"]:
        pools = [{**p, "consumed": consumed[p["id"]]} for p in job["pools"]]
        single = {
            "consumer": entry["consumer"],
            "entitlements": entry.get("entitlements", []),
            "products": entry.get("products"),
            "host_uuid": entry.get("host_uuid"),
            "pools": pools,
            "rules": job["rules"],
            "at": job["at"],
        }
        envelope = run("auto_attach", single, CTX).as_dict()
        if envelope["status"] != "ok":
            answers.append({"status": envelope["status"], "code": envelope["error"]["code"]})
            continue
        result = envelope["result"]
        for pool_id, quantity in result["pool_quantities"].items():
            consumed[pool_id] += quantity
            touched[pool_id] = consumed[pool_id]
        answers.append(
            {
                "status": "ok",
                "pool_quantities": result["pool_quantities"],
                "covered_products": result["covered_products"],
                "uncovered_products": result["uncovered_products"],
                "explanation": result["explanation"],
            }
        )
    return answers, touched


def heal(job: dict[str, Any], ctx: Context = CTX) -> dict[str, Any]:
    envelope = run("heal_org", job, ctx).as_dict()
    assert envelope["status"] == "ok", envelope["error"]
    result: dict[str, Any] = envelope["result"]
    return result


def comparable(answer: dict[str, Any]) -> dict[str, Any]:
    if answer["status"] != "ok":
        return {"status": answer["status"], "code": answer["error"]["code"]}
    keys = ("status", "pool_quantities", "covered_products", "uncovered_products")
    return {k: answer[k] for k in keys}


# ---- tests ---------------------------------------------------------------------------


@comparison(50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_a_heal_answers_what_auto_attach_answers_consumer_by_consumer(
    rng: random.Random,
) -> None:
    job = estate(rng)
    expected, consumed = one_by_one(job)

    result = heal(job)

    assert [comparable(a) for a in result["consumers"]] == [
        {k: v for k, v in a.items() if k != "explanation"} for a in expected
    ]
    assert result["consumed"] == consumed
    assert [a["index"] for a in result["consumers"]] == list(range(len(job["consumers"])))


@pytest.mark.parametrize("seed", range(12))
def test_a_heal_over_numbers_too_large_for_its_columns_answers_what_auto_attach_answers(
    seed: int,
) -> None:
    # Sizes and quantities past what the heal's 64-bit columns are trusted with (their
    # products could overflow): pools are scored one by one, as a single job scores them.
    rng = random.Random(seed)
    job = estate(rng)
    huge = str(2**62)
    job["pools"][0]["product_attributes"]["sockets"] = huge
    job["pools"][-1]["quantity"] = 2**62
    expected, consumed = one_by_one(job)

    result = heal(job)

    assert [comparable(a) for a in result["consumers"]] == [
        {k: v for k, v in a.items() if k != "explanation"} for a in expected
    ]
    assert result["consumed"] == consumed


def guest(uuid: str) -> dict[str, Any]:
    return consumer(uuid=uuid, guest=True, installed=("rhel",))


def _tight_estate() -> dict[str, Any]:
    stack = stacking("stack-a", sockets="2")
    return {
        "rules": "candlepin-5.42",
        "at": "2026-06-01T00:00:00Z",
        "pools": [
            pool("pool-stack", "rhel", quantity=4, pattrs=stack),
            pool("pool-single", "rhel", quantity=1, pattrs={"sockets": "8"}),
            pool(
                "pool-host-1",
                "rhel",
                quantity=1,
                attrs={"virt_only": "true", "requires_host": "host-1"},
            ),
        ],
        "consumers": [
            {"consumer": consumer(uuid="a", sockets="4", installed=("rhel",))},
            {"consumer": consumer(uuid="b", sockets="4", installed=("rhel",))},
            {"consumer": consumer(uuid="c", sockets="4", installed=("rhel",))},
            {"consumer": guest("d"), "host_uuid": "host-1"},
            {"consumer": guest("e"), "host_uuid": "host-1"},
        ],
    }


def test_a_heal_job_answers_each_consumer_in_order_with_what_the_earlier_ones_left() -> None:
    result = heal(_tight_estate())

    answers = [(a["consumer"], a["pool_quantities"]) for a in result["consumers"]]
    # a takes two of the 2-socket stack (4 sockets), b the other two, c the 8-socket
    # single pool; guest d takes the host-bound pool, e finds it used up.
    assert answers == [
        ("a", {"pool-stack": 2}),
        ("b", {"pool-stack": 2}),
        ("c", {"pool-single": 1}),
        ("d", {"pool-host-1": 1}),
        ("e", {}),
    ]
    assert result["consumed"] == {"pool-stack": 4, "pool-single": 1, "pool-host-1": 1}
    summary = result["summary"]
    assert summary["healed"] == 4
    assert summary["still_not_compliant"] == 1
    assert summary["pools_exhausted"] == ["pool-stack", "pool-single", "pool-host-1"]
    assert summary["complete"] is True
    last = result["consumers"][4]
    assert last["compliance_before"]["status"] == last["compliance_after"]["status"] == "invalid"
    assert result["consumers"][0]["compliance_after"] == {
        "status": "valid",
        "compliant_products": ["rhel"],
        "partially_compliant_products": [],
        "non_compliant_products": [],
        "partial_stacks": [],
    }


def test_a_consumer_with_a_bad_entitlement_is_rejected_and_the_loop_goes_on() -> None:
    job = _tight_estate()
    broken = pool("broken", "rhel", pattrs={"sockets": "lots"})
    job["consumers"][0]["entitlements"] = [ent("ent-1", broken)]

    result = heal(job)

    first = result["consumers"][0]
    assert first["status"] == "rejected"
    assert first["error"]["code"] == "invalid_job"
    assert [d["path"] for d in first["error"]["details"]] == [
        "consumers[0].entitlements[0].pool.product_attributes.sockets"
    ]
    assert result["consumers"][1]["pool_quantities"] == {"pool-stack": 2}
    assert result["summary"]["rejected"] == 1


def test_a_heal_job_over_the_consumer_limit_is_rejected_naming_the_limit() -> None:
    ctx = Context(now=NOW, limits=Limits(max_heal_consumers=4))

    envelope = run("heal_org", _tight_estate(), ctx)

    assert envelope.status == "rejected"
    assert envelope.error is not None
    assert envelope.error.code == "limit_exceeded"
    assert "APPORTION_LIMITS__MAX_HEAL_CONSUMERS" in envelope.error.message


def test_a_heal_out_of_time_answers_the_consumers_healed_so_far_and_where_it_stopped() -> None:
    # A limit already passed: the first consumer is always healed, then the loop stops.
    ctx = Context(now=NOW, limits=Limits(heal_seconds=1e-9))

    result = heal(_tight_estate(), ctx)

    assert [a["consumer"] for a in result["consumers"]] == ["a"]
    assert result["consumed"] == {"pool-stack": 2}
    summary = result["summary"]
    assert (summary["complete"], summary["stopped_at"], summary["answered"]) == (False, 1, 1)
    assert summary["stopped_reason"] == "heal_seconds"


def test_a_heal_reports_its_progress_after_each_consumer_including_rejected_ones() -> None:
    job = _tight_estate()
    job["consumers"][1]["entitlements"] = [
        ent("bad", pool("broken", "rhel", pattrs={"sockets": "x"}))
    ]
    reports: list[tuple[int, int]] = []
    ctx = Context(now=NOW, progress=lambda done, total: reports.append((done, total)))

    result = heal(job, ctx)

    assert result["consumers"][1]["status"] == "rejected"
    assert reports == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]


def test_a_heal_stopped_early_reports_only_the_consumers_it_answered() -> None:
    reports: list[tuple[int, int]] = []
    ctx = Context(
        now=NOW,
        limits=Limits(heal_seconds=1e-9),
        progress=lambda done, total: reports.append((done, total)),
    )

    heal(_tight_estate(), ctx)

    assert reports == [(1, 5)]


def test_a_heal_whose_answer_would_outgrow_the_envelope_answers_the_consumers_that_fit() -> None:
    job = _tight_estate()
    job["consumers"] = job["consumers"][:3] * 20
    ctx = Context(now=NOW, limits=Limits(max_envelope_bytes=16 * 1024))

    result = heal(job, ctx)

    summary = result["summary"]
    assert summary["complete"] is False
    assert summary["stopped_reason"] == "max_envelope_bytes"
    assert summary["stopped_at"] == summary["answered"] == len(result["consumers"])
    assert 3 < summary["answered"] < 60
    assert len(json.dumps(result)) + 1024 < 16 * 1024


def test_only_the_consumers_asked_for_carry_an_explanation() -> None:
    job = {**_tight_estate(), "explain": ["b"]}

    result = heal(job)

    assert ["explanation" in a for a in result["consumers"]] == [False, True, False, False, False]


def test_an_explained_consumer_carries_the_explanation_its_single_job_gets() -> None:
    job = {**_tight_estate(), "explain": ["c", "e"]}
    expected, _ = one_by_one(job)

    result = heal(job)

    assert result["consumers"][2]["explanation"] == expected[2]["explanation"]
    assert result["consumers"][4]["explanation"] == expected[4]["explanation"]


def test_camel_case_consumer_entries_are_read_as_auto_attach_reads_them() -> None:
    job = _tight_estate()
    job["consumers"][3] = {
        "consumer": {**job["consumers"][3]["consumer"]},
        "hostUuid": "host-1",
        "entitlements": [],
    }
    job["consumers"][3]["consumer"]["installedProducts"] = job["consumers"][3]["consumer"].pop(
        "installed_products"
    )

    result = heal(job)

    assert result["consumers"][3]["pool_quantities"] == {"pool-host-1": 1}
