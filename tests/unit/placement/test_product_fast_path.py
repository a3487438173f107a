"""The product fast path (placement/product.py) gives the plain search's candidates.

When no slot interacts with another, the candidates are computed as arrays instead
of being searched anchor by anchor and interleaved. The plain formulation is the
search itself (``_collect``: a generator per anchor, interleaved by ``round_robin``);
both must give the same candidates in the same order, and spend the same steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from apportion.limits import DEFAULT_LIMITS
from apportion.placement.candidates import _collect
from apportion.placement.model import Forest, build_forest
from apportion.placement.product import product_candidates
from apportion.placement.query import parse_request
from apportion.placement.search import Budget, SearchSpec
from apportion.placement.slots import SlotPlan, plan_slots
from tests.unit.placement.helpers import SHARES, make_job
from tests.unit.placement.test_brute_force import forests, requests

CLASSES = ("A", "B", "C")


def planned(providers: list[dict[str, Any]], request: str) -> tuple[Forest, SlotPlan | None]:
    job = make_job(providers, request)
    forest = build_forest(job.providers, DEFAULT_LIMITS)
    return forest, plan_slots(forest, parse_request(job.request, DEFAULT_LIMITS))


def sharing_mask(forest: Forest) -> Any:
    return forest.mask(np.fromiter(forest.sharing, dtype=np.int64, count=len(forest.sharing)))


def check_same(forest: Forest, plan: SlotPlan, want: int, steps: int) -> None:
    """Fast and plain agree (when the fast path answers), budget included."""
    fast_budget, plain_budget = Budget(steps), Budget(steps)
    fast = product_candidates(plan, want, fast_budget, sharing_mask(forest))
    plain, exhausted = _collect(forest, plan, want, plain_budget)
    if fast is None:
        event("declined")
        everything_shared = any(all(p in forest.sharing for p in a) for _, a in plain)
        assert exhausted or everything_shared or len(plan.anchors[:want]) > steps
        assert fast_budget.left == steps  # declining spends nothing
        return
    event("answered")
    assert not exhausted
    assert list(fast) == plain
    assert fast_budget.left == plain_budget.left


@st.composite
def clouds(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Many trees (hosts with a few children) and some sharing providers, so that the
    anchors' products differ in size and the interleaving takes several rounds."""
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
        for c in range(draw(st.integers(0, 3))):
            inventories = {rc: {"total": 1 + draw(amounts)} for rc in CLASSES if draw(amounts)}
            providers.append(
                {"uuid": f"{host}-{c}", "parent_provider_uuid": host, "inventories": inventories}
            )
    draw(st.randoms()).shuffle(providers)  # parents need not come first
    return providers


@st.composite
def flat_requests(draw: st.DrawFn) -> str:
    """An unsuffixed group and suffixed groups, each class asked for once: no slot
    competes with another for capacity."""
    classes = draw(st.permutations(CLASSES))
    cut = sorted(draw(st.lists(st.integers(0, 3), min_size=2, max_size=2)))
    parts = [classes[: cut[0]], *((rc,) for rc in classes[cut[0] : cut[1]])]
    query = [
        f"resources{f'_{i}' if i else ''}={','.join(f'{rc}:1' for rc in p)}"
        for i, p in enumerate(parts)
        if p
    ]
    assume(query)
    if draw(st.booleans()):
        query.append("group_policy=none")
    return "&".join(query)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_the_fast_path_gives_the_search_s_candidates_on_random_small_forests(
    data: st.DataObject,
) -> None:
    providers = data.draw(forests())
    forest, plan = planned(providers, data.draw(requests(len(providers))).render())
    assume(plan is not None and plan.anchors and not SearchSpec.of(plan).bound_count)
    assert plan is not None
    check_same(forest, plan, data.draw(st.integers(1, 20)), data.draw(st.integers(1, 8)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(providers=clouds(), request=flat_requests(), want=st.integers(1, 120))
def test_the_fast_path_gives_the_search_s_candidates_on_clouds_of_many_trees(
    providers: list[dict[str, Any]], request: str, want: int
) -> None:
    forest, plan = planned(providers, request)
    assume(plan is not None and plan.anchors and not SearchSpec.of(plan).bound_count)
    assert plan is not None
    check_same(forest, plan, want, 10_000)


def test_a_candidate_of_sharing_providers_only_is_left_to_the_search() -> None:
    # Two trees served by one sharing provider: its candidate comes from both anchors.
    providers = [
        {"uuid": "ss", "inventories": {"A": {"total": 9}}, "traits": [SHARES], "aggregates": ["g"]},
        {"uuid": "h0", "aggregates": ["g"]},
        {"uuid": "h1", "aggregates": ["g"]},
    ]
    forest, plan = planned(providers, "resources=A:1")
    assert plan is not None
    assert product_candidates(plan, 10, Budget(100), sharing_mask(forest)) is None
    assert len(_collect(forest, plan, 10, Budget(100))[0]) == 1
