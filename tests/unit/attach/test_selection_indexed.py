"""The two implementations of the greedy selection choose the same groups.

Small selections rescan the candidates every round; large ones (select.SCAN_LIMIT)
follow the scan through segment trees. Both must give the same picks, the same
runner-ups and the same deciding criteria, including the host-specific/virt_only
skipping rule, which makes the scan's result depend on the visiting order.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.attach import select as selection
from apportion.attach.groups import GroupWork, Offer
from apportion.attach.ranking import Pick
from tests.unit.attach.test_selection import P1, P2, ROLE, group, member

P3: Offer = ("product", "p3")
P4: Offer = ("product", "p4")
ADDON: Offer = ("addon", "eus")
UNIVERSE = (P1, P2, P3, P4, ROLE, ADDON)

_member = st.fixed_dictionaries(
    {
        "priority": st.sampled_from([100, 100, 200, 300, 301]),
        "offers": st.sets(st.sampled_from(UNIVERSE), max_size=3),
        "virt_only": st.booleans(),
        "host": st.integers(0, 3).map(lambda n: n == 0),
    }
)
_group = st.fixed_dictionaries(
    {"stacked": st.booleans(), "members": st.lists(_member, min_size=1, max_size=3)}
)
_problem = st.fixed_dictionaries(
    {
        "groups": st.lists(_group, min_size=1, max_size=12),
        "needed": st.sets(st.sampled_from(UNIVERSE), min_size=1),
        "partial": st.lists(st.integers(0, 11), max_size=2),
        "products_first": st.booleans(),
        "partials_cover_products_only": st.booleans(),
    }
)


def _build(problem: dict[str, Any]) -> tuple[list[GroupWork], list[str]]:
    groups: list[GroupWork] = []
    for i, g in enumerate(problem["groups"]):
        stack = f"s{i}" if g["stacked"] else None
        specs = g["members"] if stack else g["members"][:1]
        members = [
            member(
                f"g{i}m{j}",
                m["priority"],
                m["offers"],
                virt_only=m["virt_only"],
                host=m["host"],
                stack=stack,
            )
            for j, m in enumerate(specs)
        ]
        groups.append(group(*members))
    partial = [
        groups[i].stack_id or ""
        for i in problem["partial"]
        if i < len(groups) and groups[i].stackable
    ]
    return groups, partial


def _outcome(picks: list[Pick]) -> list[tuple[Any, ...]]:
    return [
        (p.group.key, p.reason, p.new, p.decided_by, p.runner_up, p.values, p.group.quantities())
        for p in picks
    ]


def _run(problem: dict[str, Any], limit: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(selection, "SCAN_LIMIT", limit)
    groups, partial = _build(problem)
    needed = set(problem["needed"])
    picks = selection.select(
        groups,
        needed,
        partial,
        problem["products_first"],
        partials_cover_products_only=problem["partials_cover_products_only"],
    )
    return _outcome(picks), needed


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(problem=_problem)
def test_indexed_rounds_pick_what_rescanning_picks(
    problem: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    scanned = _run(problem, 10**12, monkeypatch)
    indexed = _run(problem, -1, monkeypatch)
    assert indexed == scanned


def test_a_host_specific_group_met_first_still_blocks_a_wider_group_when_indexed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(selection, "SCAN_LIMIT", -1)
    host = group(member("host", 100, {P1}, host=True))
    wide = group(member("wide", 100, {P1, P2}))
    picks = selection.select([host, wide], {P1, P2}, [], products_first=True)
    assert [p.group.key for p in picks] == ["pool:host", "pool:wide"]
    assert picks[0].runner_up == "pool:wide"
    assert (picks[0].decided_by or "").startswith("host_specific_pools (the runner-up")


def test_among_equal_keys_the_candidate_met_first_wins_when_indexed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(selection, "SCAN_LIMIT", -1)
    first = group(member("first", 100, {P1}))
    second = group(member("second", 100, {P1}))
    picks = selection.select([first, second], {P1}, [])
    assert [p.group.key for p in picks] == ["pool:first"]
    assert picks[0].runner_up == "pool:second"
    assert (picks[0].decided_by or "").startswith("input order")


def test_equal_float_averages_are_ranked_exactly_when_indexed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 10**17 + 1 and 10**17 round to the same float; the exact averages still differ.
    monkeypatch.setattr(selection, "SCAN_LIMIT", -1)
    low = group(member("low", 10**17, {P1}))
    high = group(member("high", 10**17 + 1, {P1}))
    picks = selection.select([low, high], {P1}, [])
    assert [p.group.key for p in picks] == ["pool:high"]
    assert picks[0].decided_by == "average_priority"
