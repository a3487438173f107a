"""launch_select's fast path gives byte-identical results to a plain pipeline.

The engine runs the policy on its compact candidates and builds each
AllocationRequest once, as plain dicts (apportion/launch.py). The reference here is
the straightforward pipeline: each candidate and summary written out one by one from
the job and validated against the result's TypedDicts, then ``apply_policy``
annotating copies of them. Both must serialise to the same bytes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, event, given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from apportion.contracts.launch import (
    AllocationRequest,
    LaunchSelectJob,
    LaunchSelectResult,
    ProviderSummary,
)
from apportion.engine import Context, run
from apportion.errors import DomainError
from apportion.launch import chosen_policy, failure_counts, solve
from apportion.placement import CandidateSet, find_candidates
from apportion.selection import apply_policy
from apportion.selection.facts import request_costs
from tests.support.samples import comparison
from tests.unit.placement.helpers import SHARES, rp
from tests.unit.placement.test_brute_force import forests, requests

REQUEST: TypeAdapter[AllocationRequest] = TypeAdapter(AllocationRequest)
SUMMARY: TypeAdapter[ProviderSummary] = TypeAdapter(ProviderSummary)
RESULT: TypeAdapter[LaunchSelectResult] = TypeAdapter(LaunchSelectResult)
NOW = datetime(2026, 11, 22, 3, tzinfo=UTC)
DEFAULT_POLICY: list[dict[str, Any]] = [
    {"module": "equal"},
    {"module": "weights"},
    {"module": "failure_penalty", "percent": 5, "window_hours": 6},
    {"module": "priority", "mode": "strict"},
]
POLICIES: list[Any] = [
    None,
    "default",
    [{"module": "equal"}],
    [{"module": "least_used"}, {"module": "weights"}, {"module": "cost", "amount": 1}],
    [
        {"module": "equal", "weighted": True},
        {"module": "priority", "mode": "probabilistic"},
        {"module": "failure_penalty", "percent": 30, "hard_limit": 2},
        {"module": "cost", "mode": "probabilistic"},
    ],
]
PRICE = st.sampled_from([0.0, 0.01, 0.1, 0.5, 3.0, -0.25, 1e308, -1e308])
ACCOUNT = st.fixed_dictionaries(
    {
        "priority": st.sampled_from([0, 1, 2]),
        "weight": st.sampled_from([0.0, 1.0, 2.5]),
        "cost_per_hour": st.sampled_from([0.0, -0.0, 0.25, 1e308]),
        "enabled": st.sampled_from([True, True, False]),
    }
)


def plain_requests(cs: CandidateSet) -> list[AllocationRequest]:
    """The candidates built the straightforward way: validated, one by one.

    Amounts a provider gives for several slots add up in one allocation, placed
    where its first such slot is; the unsuffixed group maps the set of its
    providers, sorted by uuid; the account is the anchoring root's.
    """
    assert cs.builder is not None
    uuids, plan = cs.forest.uuids, cs.builder
    out = []
    for anchor, assignment in cs.found:
        merged: dict[str, dict[str, int]] = {}
        for p, demands in zip(assignment, plan.demands, strict=True):
            for rc, amount in demands:
                held = merged.setdefault(uuids[p], {})
                held[rc] = held.get(rc, 0) + amount
        mappings: dict[str, list[str]] = {}
        if plan.unsuffixed:
            mappings[""] = sorted({uuids[assignment[k]] for k in plan.unsuffixed})
        for k, suffix in plan.suffixed:
            mappings[suffix] = [uuids[assignment[k]]]
        out.append(
            REQUEST.validate_python(
                {
                    "allocations": {u: {"resources": r} for u, r in merged.items()},
                    "mappings": mappings,
                    "account": cs.forest.accounts[anchor],
                }
            )
        )
    return out


def plain_summaries(cs: CandidateSet, job: LaunchSelectJob) -> dict[str, ProviderSummary]:
    """Every provider of every touched tree, in job order, from the job itself."""
    forest = cs.forest
    trees = {
        forest.roots[forest.index[u]]
        for r in cs.requests
        for us in r["mappings"].values()
        for u in us
    }
    out = {}
    for i, provider in enumerate(job.providers):
        if forest.roots[i] not in trees:
            continue
        parent = forest.parents[i]
        resources = {}
        for rc, inv in provider["inventories"].items():
            capacity = int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"])
            resources[rc] = {
                "capacity": min(capacity, 2**53 - 1),
                "used": provider["usages"].get(rc, 0),
            }
        out[provider["uuid"]] = SUMMARY.validate_python(
            {
                "resources": resources,
                "traits": sorted(set(provider["traits"])),
                "parent_provider_uuid": None if parent < 0 else forest.uuids[parent],
                "root_provider_uuid": forest.uuids[forest.roots[i]],
            }
        )
    return out


def reference(job: LaunchSelectJob, ctx: Context) -> LaunchSelectResult:
    """The plain pipeline: validated dicts, annotated copies, a validated result."""
    policy, record = chosen_policy(job, ctx)
    cs = find_candidates(job, ctx)
    requests = plain_requests(cs) if cs.found else []
    summaries = plain_summaries(cs, job) if cs.found else {}
    if not requests:
        solve(job, ctx)  # raises the engine's own Infeasible
        raise AssertionError("no candidates, yet solve did not raise")
    if policy is None:
        return RESULT.validate_python(
            {
                "allocation_requests": requests,
                "provider_summaries": summaries,
                "extra": cs.extra(),
                "policy": record,
            }
        )
    accounts = sorted({r["account"] for r in requests if r["account"] is not None})
    failures, failure_info = failure_counts(job, policy, accounts, ctx)
    outcome = apply_policy(
        requests,
        {p["uuid"]: p for p in job.providers},
        job.accounts,
        policy,
        failures=failures,
        exclude_accounts=job.exclude_accounts,
        seed=job.seed,
        now=ctx.now,
        limits=ctx.limits,
    )
    return RESULT.validate_python(
        {
            "allocation_requests": list(outcome.requests),
            "provider_summaries": summaries,
            "selection": outcome.selection,
            "extra": {**cs.extra(), **failure_info},
            "policy": record,
        }
    )


def outcome_of(job: LaunchSelectJob, ctx: Context, how: Any) -> tuple[str, str]:
    try:
        return "ok", json.dumps(how(job, ctx))
    except DomainError as exc:
        return type(exc).__name__, exc.message


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    providers = draw(forests())
    req = draw(requests(len(providers)))
    for p in providers:
        if draw(st.integers(0, 2)) == 0:
            classes = [*p["inventories"], "DISK_GB"]
            p["prices"] = {rc: draw(PRICE) for rc in classes[: draw(st.integers(1, 3))]}
        if draw(st.integers(0, 3)) == 0:
            p["account"] = draw(st.sampled_from(["a", "b"]))
    job: dict[str, Any] = {
        "providers": providers,
        "request": req.render(),
        "seed": draw(st.integers(0, 3)),
        "accounts": draw(st.dictionaries(st.sampled_from(["a", "b", "p0"]), ACCOUNT)),
    }
    policy = draw(st.sampled_from(POLICIES))
    if policy != "default":
        job["policy"] = policy
    if draw(st.booleans()):
        job["failures"] = {"a": 3, "p0": 1}
    if draw(st.integers(0, 3)) == 0:
        job["exclude_accounts"] = ["b"]
    return job


QUERIES = [
    "resources=VCPU:1",
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10",
    "resources=VCPU:2,DISK_GB:10&required=HW_NUMA_ROOT",
    "resources=VCPU:1&resources1=DISK_GB:5",
    "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate",
    "resources1=VCPU:1&resources2=VCPU:1&resources3=MEMORY_MB:256",
    "resources_A=VCPU:1&resources_B=MEMORY_MB:256&same_subtree=_A,_B",
    "resources_D=DISK_GB:10&resources_C=VCPU:1,MEMORY_MB:512"
    "&required_N=HW_NUMA_ROOT&same_subtree=_N,_C",
    "resources=VCPU:1,DISK_GB:2&limit=3",
]


@st.composite
def clouds(draw: st.DrawFn) -> dict[str, Any]:
    """Hosts with NUMA children and shared storage: most queries have candidates."""
    providers = [
        {
            **rp(f"ss{s}", traits=[SHARES], aggs=["agg"], DISK_GB=draw(st.sampled_from([5, 100]))),
            "prices": {"DISK_GB": draw(PRICE)},
        }
        for s in range(draw(st.integers(0, 2)))
    ]
    for h in range(draw(st.integers(1, 4))):
        providers.append(
            rp(f"cn{h}", aggs=["agg"], account=draw(st.sampled_from([None, "a", "b"])))
        )
        for n in range(draw(st.integers(0, 2))):
            numa = rp(
                f"cn{h}-n{n}",
                f"cn{h}",
                traits=["HW_NUMA_ROOT"],
                used={"VCPU": draw(st.integers(0, 2))},
                VCPU=draw(st.integers(1, 4)),
                MEMORY_MB=draw(st.sampled_from([256, 1024])),
            )
            if draw(st.booleans()):
                numa["prices"] = {"VCPU": draw(PRICE), "MEMORY_MB": draw(PRICE)}
            providers.append(numa)
    job: dict[str, Any] = {
        "providers": providers,
        "request": draw(st.sampled_from(QUERIES)),
        "seed": draw(st.integers(0, 3)),
        "accounts": draw(st.dictionaries(st.sampled_from(["a", "b", "cn0"]), ACCOUNT)),
    }
    policy = draw(st.sampled_from(POLICIES))
    if policy != "default":
        job["policy"] = policy
    if draw(st.booleans()):
        job["failures"] = {"a": 3, "cn0": 1}
    return job


@comparison(30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(raw=st.one_of(jobs(), clouds()))
def test_the_fast_path_serialises_to_the_same_bytes_as_the_plain_pipeline(
    raw: dict[str, Any],
) -> None:
    job = LaunchSelectJob.model_validate(raw)
    ctx = Context(now=NOW, default_policy=DEFAULT_POLICY)
    fast = outcome_of(job, ctx, solve)
    event(fast[0] if fast[0] != "ok" else f"ok, {len(json.loads(fast[1])['allocation_requests'])}")
    assert fast == outcome_of(job, ctx, reference)


@comparison(50, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(raw=st.one_of(jobs(), clouds()))
def test_the_engine_prices_candidates_exactly_as_selection_prices_built_ones(
    raw: dict[str, Any],
) -> None:
    job = LaunchSelectJob.model_validate(raw)
    cs = find_candidates(job, Context(now=NOW))
    base = {a: s.cost_per_hour for a, s in job.accounts.items()}
    expected = request_costs(cs.requests, {p["uuid"]: p for p in job.providers}, base)
    # Compared as text: NaN (inf - inf from absurd prices) must match NaN too.
    assert [repr(c) for c in cs.costs(base)] == [repr(c) for c in expected]


def test_a_priced_job_through_run_matches_the_plain_pipeline_byte_for_byte() -> None:
    """Two hosts of two accounts and a shared storage, all priced; default policy.

    ::

        SS (DISK_GB 100 at 0.01, shares via agg)
         : agg
        CN1 "a" (VCPU 4 at 0.5)     CN2 "b" (VCPU 4 at 0.25, MEMORY_MB)
    """
    providers = [
        {**rp("SS", traits=[SHARES], aggs=["agg"], DISK_GB=100), "prices": {"DISK_GB": 0.01}},
        {**rp("CN1", aggs=["agg"], account="a", VCPU=4), "prices": {"VCPU": 0.5}},
        {
            **rp("CN2", aggs=["agg"], account="b", VCPU=4, MEMORY_MB=512),
            "prices": {"VCPU": 0.25, "MEMORY_MB": 0.001},
        },
    ]
    raw = {
        "providers": providers,
        "request": "resources=VCPU:2,DISK_GB:10",
        "accounts": {"a": {"cost_per_hour": 0.1}, "b": {"priority": 1}},
        "seed": 42,
    }
    ctx = Context(now=NOW, default_policy=DEFAULT_POLICY)
    env = run("launch_select", raw, ctx)
    assert env.status == "ok"
    expected = reference(LaunchSelectJob.model_validate(raw), ctx)
    assert json.dumps(env.result) == json.dumps(expected)
    assert env.result is not None
    costs = {r["account"]: r["cost_per_hour"] for r in env.result["allocation_requests"]}
    assert costs == {"a": 0.1 + 2 * 0.5 + 10 * 0.01, "b": 2 * 0.25 + 10 * 0.01}
    assert env.result["selection"]["account"] == "b"  # priority 1 beats a's 0
