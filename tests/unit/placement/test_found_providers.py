"""The providers a set of candidates uses, and the trees their summaries cover."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from apportion.limits import DEFAULT_LIMITS
from apportion.placement.model import build_forest
from apportion.placement.shapes import Found
from apportion.placement.summaries import provider_summaries

from .test_forest_accounts import forests

ROWS = st.integers(min_value=0, max_value=30)
SLOTS = st.integers(min_value=1, max_value=5)


@given(st.data(), ROWS, SLOTS, st.integers(min_value=1, max_value=200))
def test_the_providers_of_candidates_are_every_assigned_index_ascending_once(
    data: st.DataObject, rows: int, slots: int, providers: int
) -> None:
    cells = data.draw(
        st.lists(
            st.integers(min_value=0, max_value=providers - 1),
            min_size=rows * slots,
            max_size=rows * slots,
        )
    )
    assigned = np.array(cells, dtype=np.intp).reshape(rows, slots)
    found = Found(np.zeros(rows, dtype=np.intp), assigned)

    used = found.providers()

    assert used.tolist() == sorted(set(cells))
    assert used.dtype == np.intp


def test_no_candidate_uses_no_provider() -> None:
    found = Found.of([], 3)

    assert found.providers().tolist() == []


@given(st.data(), forests())
def test_summaries_cover_every_provider_of_each_used_providers_tree_in_job_order(
    data: st.DataObject, providers: list[dict[str, Any]]
) -> None:
    forest = build_forest(providers, DEFAULT_LIMITS)
    used = data.draw(st.sets(st.integers(min_value=0, max_value=forest.size - 1)))
    by_uuid = {p["uuid"]: p for p in providers}

    def root(p: dict[str, Any]) -> str:
        while p["parent_provider_uuid"] is not None:
            p = by_uuid[p["parent_provider_uuid"]]
        return str(p["uuid"])

    trees = {root(providers[i]) for i in used}
    expected = [p["uuid"] for p in providers if root(p) in trees]

    summaries = provider_summaries(forest, np.array(sorted(used), dtype=np.intp))

    assert list(summaries) == expected
