"""The providers a set of candidates uses, and the trees their summaries cover."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from apportion.placement.shapes import Found

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
