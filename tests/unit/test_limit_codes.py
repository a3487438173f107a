"""Every limit of Limits answers a job over it with the code docs/contract.md gives it.

One case per field of :class:`Limits`: a job at the limit that is accepted, and one just
over it that gets the limit's code from :data:`LIMIT_CODES` (or, for a limit that cuts
the answer short instead of refusing the job, an answer that says so). A new limit
without a case fails here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apportion.engine import Context, parse_json_text, run
from apportion.errors import Rejected
from apportion.limits import LIMIT_CODES, Limits, env_name

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Answer:
    status: str
    code: str | None
    result: Any
    messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    kind: str
    at: tuple[Limits, Any]
    over: tuple[Limits, Any]
    # For a limit that cuts the answer short: what the answer over it says.
    cut_short: Callable[[Answer], bool] | None = None


def answer(kind: str, limits: Limits, job: Any) -> Answer:
    """The answer to ``job`` sent as JSON text, as a worker decodes and runs it."""
    try:
        payload = parse_json_text(json.dumps(job), limits)
    except Rejected as exc:
        return Answer("rejected", exc.code, None, tuple(p.message for p in exc.problems))
    env = run(kind, payload, Context(limits=limits, now=NOW))
    if env.error is None:
        return Answer(env.status, None, env.result)
    messages = tuple(d.message for d in env.error.details)
    return Answer(env.status, env.error.code, env.result, messages)


def provider(i: int, account: str = "a", vcpu: int = 4) -> dict[str, Any]:
    return {"uuid": f"rp{i}", "account": account, "inventories": {"VCPU": {"total": vcpu}}}


def launch(n: int = 1, request: str = "resources=VCPU:1", **fields: Any) -> dict[str, Any]:
    job = {"providers": [provider(i) for i in range(n)], "request": request, "policy": None}
    return job | fields


def expression_policy(expression: str) -> list[dict[str, Any]]:
    return [{"module": "equal"}, {"module": "expression", "expression": expression}]


def partition(
    spaces: int = 1, disks: int = 1, size: Any = 10, disk_size: int = 100
) -> dict[str, Any]:
    return {
        "schema": [{"id": f"s{i}", "type": "partition", "size": size} for i in range(spaces)],
        "hardware": {"disks": [{"id": f"d{j}", "size": disk_size} for j in range(disks)]},
    }


def sized(size: Any) -> dict[str, Any]:
    return partition(size=size)


def attach(pools: int = 1, products: int = 1, entitlements: int = 0) -> dict[str, Any]:
    def pool(i: int) -> dict[str, Any]:
        names = [f"prod{k}" for k in range(products)]
        return {"id": f"p{i}", "product_id": "sku", "quantity": 5, "provided_products": names}

    return {
        "consumer": {"uuid": "c", "installed_products": ["prod0"]},
        "pools": [pool(i) for i in range(pools)],
        "entitlements": [
            {"id": f"e{i}", "pool": pool(100 + i), "quantity": 1} for i in range(entitlements)
        ],
    }


def heal(consumers: int = 1) -> dict[str, Any]:
    job = attach()
    entry = {"consumer": job["consumer"]}
    return {"pools": job["pools"], "consumers": [entry] * consumers}


def outcome(ahead: timedelta) -> dict[str, Any]:
    at = (NOW + ahead).isoformat().replace("+00:00", "Z")
    return {"event_id": "e1", "account": "a", "outcome": "failed", "at": at}


def same_job(kind: str, job: Any, at: Limits, over: Limits, **kw: Any) -> Case:
    return Case(kind, (at, job), (over, job), **kw)


def payload_case() -> Case:
    job = launch(job_id="j")
    size = len(json.dumps(job))
    return same_job(
        "launch_select", job, Limits(max_payload_bytes=size), Limits(max_payload_bytes=size - 1)
    )


# 7 groups on 6 single-unit children: only the last group finds out it cannot fit.
HOPELESS = {
    "providers": [{"uuid": "cn", "inventories": {}}]
    + [
        {"uuid": f"gpu{i}", "parent_provider_uuid": "cn", "inventories": {"VGPU": {"total": 1}}}
        for i in range(6)
    ],
    "request": "&".join(f"resources{i}=VGPU:1" for i in range(7)),
    "policy": None,
}
SLOW = "range(0, 100000000).len()"  # a Python-level loop: only the clock stops it


CASES: dict[str, Case] = {
    "max_payload_bytes": payload_case(),
    "max_pools": Case(
        "auto_attach", (Limits(max_pools=2), attach(2)), (Limits(max_pools=2), attach(3))
    ),
    "max_products": Case(
        "auto_attach",
        (Limits(max_products=2), attach(products=2)),
        (Limits(max_products=2), attach(products=3)),
    ),
    "max_entitlements": Case(
        "auto_attach",
        (Limits(max_entitlements=1), attach(entitlements=1)),
        (Limits(max_entitlements=1), attach(entitlements=2)),
    ),
    "max_heal_consumers": Case(
        "heal_org",
        (Limits(max_heal_consumers=2), heal(2)),
        (Limits(max_heal_consumers=2), heal(3)),
    ),
    "heal_seconds": same_job(
        "heal_org",
        heal(2),
        Limits(heal_seconds=60),
        Limits(heal_seconds=1e-9),
        cut_short=lambda over: over.result["summary"]["stopped_at"] == 1,
    ),
    "max_providers": Case(
        "launch_select", (Limits(max_providers=2), launch(2)), (Limits(max_providers=2), launch(3))
    ),
    "max_request_length": same_job(
        "launch_select", launch(), Limits(max_request_length=16), Limits(max_request_length=15)
    ),
    "max_request_groups": Case(
        "launch_select",
        (Limits(max_request_groups=1), launch(request="resources=VCPU:1")),
        (Limits(max_request_groups=1), launch(request="resources=VCPU:1&resources1=VCPU:1")),
    ),
    "max_candidates": same_job(
        "launch_select",
        launch(3),
        Limits(max_candidates=3),
        Limits(max_candidates=2),
        cut_short=lambda over: over.result["extra"]["capped"] is True,
    ),
    "max_candidate_search_steps": Case(
        "launch_select",
        (Limits(max_candidate_search_steps=1000), launch(2)),
        (Limits(max_candidate_search_steps=1000), HOPELESS),
        cut_short=lambda over: (
            over.status == "infeasible" and "MAX_CANDIDATE_SEARCH_STEPS" in over.messages[0]
        ),
    ),
    "max_accounts": Case(
        "launch_select",
        (Limits(max_accounts=2), launch(policy=[{"module": "equal"}], accounts={"a": {}, "b": {}})),
        (
            Limits(max_accounts=2),
            launch(policy=[{"module": "equal"}], accounts={"a": {}, "b": {}, "c": {}}),
        ),
    ),
    "max_policy_modules": Case(
        "launch_select",
        (Limits(max_policy_modules=1), launch(policy=[{"module": "equal"}])),
        (Limits(max_policy_modules=1), launch(policy=[{"module": "equal"}, {"module": "weights"}])),
    ),
    "max_disks": Case(
        "partition",
        (Limits(max_disks=2), partition(disks=2)),
        (Limits(max_disks=2), partition(disks=3)),
    ),
    "max_spaces": Case(
        "partition",
        (Limits(max_spaces=2), partition(spaces=2)),
        (Limits(max_spaces=2), partition(spaces=3)),
    ),
    # variables: disks × (spaces + 1)
    "max_lp_variables": Case(
        "partition",
        (Limits(max_lp_variables=6), partition(spaces=2, disks=2)),
        (Limits(max_lp_variables=6), partition(spaces=3, disks=2)),
    ),
    "partition_max_size_mib": Case(
        "partition",
        (Limits(partition_max_size_mib=100), sized(100)),
        (Limits(partition_max_size_mib=100), sized(101)),
    ),
    "partition_solver_seconds": same_job(
        "partition",
        # three equal shares of 100 MiB: the exact whole-MiB step must search
        {
            "schema": [{"id": f"s{i}", "type": "partition", "weight": 1} for i in range(3)],
            "hardware": {"disks": [{"id": "d0", "size": 100}]},
        },
        Limits(),
        Limits(partition_solver_seconds=1e-9),
    ),
    "yaql_max_expression_length": Case(
        "partition",
        (Limits(yaql_max_expression_length=2), sized("yaql=10")),
        (Limits(yaql_max_expression_length=2), sized("yaql=100")),
    ),
    "yaql_max_iterations": Case(
        "partition",
        (Limits(yaql_max_iterations=100), sized("yaql=range(0, 50).len()")),
        (Limits(yaql_max_iterations=100), sized("yaql=list(range(0, 500)).len()")),
    ),
    "yaql_memory_quota": Case(
        "partition",
        (Limits(yaql_memory_quota=1000), sized("yaql=('x' * 10).len()")),
        (Limits(yaql_memory_quota=1000), sized("yaql=('x' * 2000).len()")),
    ),
    "yaql_timeout_seconds": Case(
        "partition",
        (Limits(yaql_timeout_seconds=0.3), sized("yaql=$.disks.len() * 10")),
        (Limits(yaql_timeout_seconds=0.3), sized(f"yaql={SLOW}")),
    ),
    "yaql_max_memory_mib": Case(
        "partition",
        (Limits(yaql_max_memory_mib=64), sized("yaql=$.disks.len() * 10")),
        (
            Limits(yaql_max_memory_mib=64, yaql_timeout_seconds=60.0),
            sized("yaql=let(s => 'x' * 90000) -> range(0, 9000).select($s).join('').len()"),
        ),
    ),
    "yaql_seconds_per_account": Case(
        "launch_select",
        (
            Limits(yaql_timeout_seconds=0.01, yaql_seconds_per_account=0.3),
            launch(policy=expression_policy("1")),
        ),
        (
            Limits(yaql_timeout_seconds=0.01, yaql_seconds_per_account=0.3),
            launch(policy=expression_policy(SLOW)),
        ),
    ),
    "yaql_job_seconds": Case(
        "launch_select",
        (Limits(yaql_job_seconds=0.3), launch(policy=expression_policy("1"))),
        (Limits(yaql_job_seconds=0.3), launch(policy=expression_policy(SLOW))),
    ),
    "max_string_length": same_job(
        "launch_select",
        launch(job_id="abcde"),
        Limits(max_string_length=16),
        Limits(max_string_length=15),
    ),
    "max_json_depth": same_job(
        "launch_select", launch(), Limits(max_json_depth=5), Limits(max_json_depth=4)
    ),
    "max_json_items": same_job(
        "launch_select", launch(), Limits(max_json_items=9), Limits(max_json_items=8)
    ),
    "max_envelope_bytes": same_job(
        "launch_select",
        launch(200),
        Limits(),
        Limits(max_envelope_bytes=2000),
        cut_short=lambda over: over.result["extra"]["truncated"] is True,
    ),
    "max_event_skew_seconds": Case(
        "launch_outcome",
        (Limits(max_event_skew_seconds=300), outcome(timedelta(seconds=300))),
        (Limits(max_event_skew_seconds=300), outcome(timedelta(seconds=301))),
    ),
}


def test_every_limit_has_a_code_and_a_case() -> None:
    assert sorted(LIMIT_CODES) == sorted(Limits.model_fields)
    assert sorted(CASES) == sorted(Limits.model_fields)


@pytest.mark.parametrize("field", sorted(Limits.model_fields))
def test_a_job_at_a_limit_is_accepted_and_one_over_it_gets_the_limits_code(field: str) -> None:
    case = CASES[field]
    at = answer(case.kind, *case.at)
    over = answer(case.kind, *case.over)

    assert (at.status, at.code) == ("ok", None)
    if case.cut_short is None:
        assert (over.status, over.code) == ("rejected", LIMIT_CODES[field])
        assert any(env_name(field) in message for message in over.messages), over.messages
    else:
        assert over.status in ("ok", "infeasible")
        assert case.cut_short(over)
