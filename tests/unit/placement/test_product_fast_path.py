"""The array fast path (placement/product.py) gives the plain search's candidates.

Where it answers, the candidates are computed as arrays instead of being searched
anchor by anchor and interleaved. The plain formulation is the search itself
(``_collect``: a depth-first generator per anchor, interleaved by ``round_robin``);
both must give the same candidates in the same order.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given
from hypothesis import strategies as st

from apportion.limits import DEFAULT_LIMITS
from apportion.placement.candidates import _collect
from apportion.placement.model import Forest, build_forest
from apportion.placement.product import product_candidates
from apportion.placement.query import parse_request
from apportion.placement.search import Budget, SearchSpec
from apportion.placement.shapes import Found
from apportion.placement.slots import SlotPlan, plan_slots
from tests.support.samples import comparison
from tests.unit.placement.helpers import SHARES, make_job
from tests.unit.placement.test_brute_force import TRAITS, forests, requests

CLASSES = ("A", "B", "C")
SIMPLE = "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"
SUBTREE = (
    "resources_DISK=DISK_GB:10&resources_COMPUTE=VCPU:1,MEMORY_MB:512"
    "&required_NUMA=HW_NUMA_ROOT&same_subtree=_NUMA,_COMPUTE"
)


def planned(providers: list[dict[str, Any]], request: str) -> tuple[Forest, SlotPlan | None]:
    job = make_job(providers, request)
    forest = build_forest(job.providers, DEFAULT_LIMITS)
    return forest, plan_slots(forest, parse_request(job.request, DEFAULT_LIMITS))


def fast(forest: Forest, plan: SlotPlan, want: int, steps: int) -> Found | None:
    return product_candidates(forest, plan, SearchSpec.of(plan), want, Budget(steps))


def check_same(forest: Forest, plan: SlotPlan, want: int, steps: int) -> str:
    """Fast and plain agree when the fast path answers; whether it did, and how."""
    found = fast(forest, plan, want, steps)
    plain, exhausted = _collect(forest, plan, want, Budget(steps))
    if found is None:
        return "declined"
    assert not exhausted  # it answers only where the search cannot run out of steps
    assert list(found) == plain
    return f"answered ({'bound' if SearchSpec.of(plan).bound_count else 'product'})"


@st.composite
def clouds(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Many trees (hosts with a few children, some with children of their own) and
    some sharing providers, so that the anchors' answers differ in size and the
    interleaving takes several rounds."""
    providers: list[dict[str, Any]] = []
    amounts = st.integers(0, 3)
    for s in range(draw(st.integers(0, 3))):
        providers.append(
            {
                "uuid": f"s{s}",
                "inventories": {rc: {"total": 4} for rc in CLASSES if draw(amounts) == 0},
                "traits": [SHARES],
                "aggregates": draw(st.sets(st.sampled_from(["g1", "g2"]), max_size=2)),
            }
        )
    for h in range(draw(st.integers(1, 12))):
        host = f"h{h}"
        providers.append({"uuid": host, "aggregates": draw(st.sets(st.just("g1"), max_size=1))})
        parents = [host]
        for c in range(draw(st.integers(0, 4))):
            inventories = {rc: {"total": 1 + draw(amounts)} for rc in CLASSES if draw(amounts)}
            providers.append(
                {
                    "uuid": f"{host}-{c}",
                    "parent_provider_uuid": draw(st.sampled_from(parents)),
                    "inventories": inventories,
                    "traits": draw(st.sets(st.sampled_from(TRAITS), max_size=1)),
                }
            )
            parents.append(f"{host}-{c}")
    draw(st.randoms()).shuffle(providers)  # parents need not come first
    return providers


@st.composite
def cloud_requests(draw: st.DrawFn) -> str:
    """An unsuffixed group and up to three suffixed ones, classes repeated or not
    (competing for capacity), with or without isolate, same_subtree and the
    unsuffixed group's required traits."""
    resources = st.lists(st.sampled_from(CLASSES), unique=True, max_size=2)
    query = []
    unsuffixed = draw(resources)
    if unsuffixed:
        query.append(
            "resources=" + ",".join(f"{rc}:{draw(st.integers(1, 2))}" for rc in unsuffixed)
        )
        if draw(st.integers(0, 3)) == 0:
            query.append("required=" + draw(st.sampled_from(["T1", "in:T1,T2", "!T2"])))
    suffixes = [f"_{i}" for i in range(draw(st.integers(0, 3)))]
    resourceless = []
    for suffix in suffixes:
        classes = draw(resources)
        if classes:
            query.append(f"resources{suffix}=" + ",".join(f"{rc}:1" for rc in classes))
        else:
            resourceless.append(suffix)
            query.append(f"required{suffix}=" + draw(st.sampled_from(TRAITS)))
    tied = draw(st.sets(st.sampled_from(suffixes))) if suffixes else set()
    tied |= set(resourceless)
    if resourceless and len(tied) < 2:
        assume(len(suffixes) > 1)
        tied |= set(suffixes[:2])
    if len(tied) > 1:
        query.append("same_subtree=" + ",".join(sorted(tied)))
    if draw(st.booleans()):
        query.append("group_policy=isolate")
    assume(unsuffixed or len(resourceless) < len(suffixes))
    return "&".join(query)


@comparison(20, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_the_fast_path_gives_the_search_s_candidates_on_random_small_forests(
    data: st.DataObject,
) -> None:
    providers = data.draw(forests())
    forest, plan = planned(providers, data.draw(requests(len(providers))).render())
    assume(plan is not None and plan.anchors)
    assert plan is not None
    event(check_same(forest, plan, data.draw(st.integers(1, 20)), data.draw(st.integers(1, 40))))


@comparison(30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(providers=clouds(), request=cloud_requests(), want=st.integers(1, 120))
def test_the_fast_path_gives_the_search_s_candidates_on_clouds_of_many_trees(
    providers: list[dict[str, Any]], request: str, want: int
) -> None:
    forest, plan = planned(providers, request)
    assume(plan is not None and plan.anchors)
    assert plan is not None
    event(check_same(forest, plan, want, 10_000))


def test_a_candidate_of_sharing_providers_only_is_left_to_the_search() -> None:
    # Two trees served by one sharing provider: its candidate comes from both anchors.
    providers = [
        {"uuid": "ss", "inventories": {"A": {"total": 9}}, "traits": [SHARES], "aggregates": ["g"]},
        {"uuid": "h0", "aggregates": ["g"]},
        {"uuid": "h1", "aggregates": ["g"]},
    ]
    forest, plan = planned(providers, "resources=A:1")
    assert plan is not None
    assert fast(forest, plan, 10, 100) is None
    assert len(_collect(forest, plan, 10, Budget(100))[0]) == 1


def test_a_search_that_could_run_out_of_steps_is_left_to_the_search() -> None:
    providers = [{"uuid": f"h{i}", "inventories": {"A": {"total": 1}}} for i in range(5)]
    forest, plan = planned(providers, "resources=A:1")
    assert plan is not None
    assert fast(forest, plan, 10, 4) is None  # five anchors, four steps
    assert fast(forest, plan, 10, 5) is not None


@pytest.mark.parametrize("request_", [SIMPLE, SUBTREE], ids=["flat", "same_subtree"])
def test_the_benchmark_s_requests_are_answered_by_the_fast_path(request_: str) -> None:
    providers = [
        {"uuid": "ss", "inventories": {"DISK_GB": {"total": 1000}}, "traits": [SHARES]},
        *(
            p
            for h in range(6)
            for p in (
                {"uuid": f"cn{h}"},
                *(
                    {
                        "uuid": f"cn{h}-numa{n}",
                        "parent_provider_uuid": f"cn{h}",
                        "inventories": {"VCPU": {"total": 4}, "MEMORY_MB": {"total": 4096}},
                        "traits": ["HW_NUMA_ROOT"],
                    }
                    for n in range(2)
                ),
            )
        ),
    ]
    for p in providers:
        p["aggregates"] = ["agg"]
    forest, plan = planned(providers, request_)
    assert plan is not None
    for want in (1, 5, 6, 7, 13, 100):
        assert check_same(forest, plan, want, 10_000).startswith("answered")
