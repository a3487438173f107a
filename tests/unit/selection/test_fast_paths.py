"""The policy's vectorised shortcuts give exactly what the plain formulations give.

Each shortcut replaced a per-account Python step or a record sort that dominated the
policy's time at 1,000 accounts (bench/selection.md); these pin them to the
straightforward versions they replaced.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.selection.distribution import Distribution, _group_rows
from apportion.selection.facts import MAX_COST, finite_costs
from apportion.selection.policy import _positions
from tests.unit.selection.builders import one_host_each, select

# Few distinct values (0.0 and -0.0 among them) so that equal rows are common.
KEY_VALUES = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 1e300, -1e300])


@st.composite
def key_rows(draw: st.DrawFn) -> np.ndarray:
    n = draw(st.integers(1, 30))
    k = draw(st.integers(1, 4))
    values = draw(st.lists(KEY_VALUES, min_size=n * k, max_size=n * k))
    return np.array(values, dtype=np.float64).reshape(n, k)


@settings(max_examples=300, deadline=None)
@given(key_rows())
def test_rows_are_grouped_as_numpys_unique_over_rows_groups_them(keys: np.ndarray) -> None:
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)

    group, n_groups = _group_rows(keys)

    assert n_groups == len(unique)
    assert group.tolist() == inverse.reshape(-1).tolist()


@settings(max_examples=200, deadline=None)
@given(key_rows(), st.data())
def test_trace_maps_list_accounts_group_by_group_in_canonical_order(
    keys: np.ndarray, data: st.DataObject
) -> None:
    accounts = tuple(f"a{i:02d}" for i in range(len(keys)))
    raw = np.array(data.draw(st.lists(st.floats(0, 10), min_size=len(keys), max_size=len(keys))))
    dist = Distribution.single_group(accounts, raw).dist
    for column in keys.T:  # one strict module per key column
        dist = dist.regrouped(column).dist

    flat, groups = dist.trace_maps()

    expected: list[dict[str, float]] = [{} for _ in range(dist.n_groups)]
    for account, g, p in zip(accounts, dist.group.tolist(), dist.probs.tolist(), strict=True):
        expected[g][account] = p
    assert [list(g.items()) for g in groups] == [list(g.items()) for g in expected]
    assert list(flat.items()) == [item for g in expected for item in g.items()]


def test_every_position_of_the_winner_is_found_in_order() -> None:
    accounts = ["b", "a", "b", "c", "b"]

    assert _positions(accounts, "b") == [0, 2, 4]
    assert _positions(accounts, "c") == [3]
    assert _positions(accounts, "z") == []


def test_finite_costs_pass_through_unchanged_and_absurd_ones_are_clamped() -> None:
    assert finite_costs([0.5, 0.0, 3.25]) == [0.5, 0.0, 3.25]
    assert finite_costs([1.0, float("inf"), float("nan"), -float("inf")]) == [
        1.0,
        MAX_COST,
        MAX_COST,
        -MAX_COST,
    ]


def test_a_note_over_many_accounts_names_the_first_eight_and_counts_the_rest() -> None:
    ids = [f"acct{i:04d}" for i in range(1000)]
    requests, providers = one_host_each(*ids)
    accounts = {a: {"weight": 2 if i % 2 else 1} for i, a in enumerate(ids)}
    failures = dict.fromkeys(ids[:20], 1)

    outcome = select(
        requests,
        providers,
        [{"module": "equal"}, {"module": "weights"}, {"module": "failure_penalty"}],
        accounts=accounts,
        failures=failures,
    )

    weights_note = outcome.selection["trace"][1]["note"]
    penalty_note = outcome.selection["trace"][2]["note"]
    assert weights_note == (
        "times weight acct0001=2, acct0003=2, acct0005=2, acct0007=2, acct0009=2, "
        "acct0011=2, acct0013=2, acct0015=2 and 492 more"
    )
    assert penalty_note is not None
    assert penalty_note.startswith(
        "-5 points per failure in 6 h: acct0000 x1, acct0001 x1, acct0002 x1, acct0003 x1, "
        "acct0004 x1, acct0005 x1, acct0006 x1, acct0007 x1 and 12 more"
    )
