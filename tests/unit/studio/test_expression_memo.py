"""The studio reuses an expression module's values while everything it reads is unchanged.

A slider that moves a weight does not change what ``switch($.cost_per_hour = 0 …)``
reads, so the page need not wait for the expression again; the answer must be the one
the engine gives without the memo, every number of it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from apportion.errors import Rejected
from apportion.limits import DEFAULT_LIMITS
from apportion.selection.memo import ExpressionMemo
from apportion.workers.studio import deployable as dep
from apportion.yaql_eval import data_paths
from tests.support.studio import many_accounts_job

NIGHT = datetime(2026, 11, 21, 22, 0, tzinfo=UTC)
PRIVATE_AT_NIGHT = (
    "switch($.cost_per_hour = 0 and ($.now.hour >= 20 or $.now.hour < 6) => 3, true => 1)"
)


@pytest.fixture(scope="module")
def deployable() -> dep.Deployable:
    job = many_accounts_job(120, 1)
    return dep.load(job, ident="t", label="t", source="upload", limits=DEFAULT_LIMITS)


def policy(expression: str, weight: float) -> list[dict[str, Any]]:
    return [
        {"module": "equal"},
        {"module": "weights", "weights": {"acct0002": weight}},
        {"module": "expression", "expression": expression},
        {"module": "priority", "mode": "strict"},
    ]


def run(
    deployable: dep.Deployable,
    expression: str,
    weight: float,
    memo: ExpressionMemo | None,
    now: datetime = NIGHT,
) -> dict[str, Any]:
    return dep.evaluate(
        deployable,
        policy(expression, weight),
        limits=DEFAULT_LIMITS,
        now=now,
        expression_memo=memo,
    )


def test_a_moved_weight_reuses_the_expressions_values_with_the_same_answer(
    deployable: dep.Deployable,
) -> None:
    memo = ExpressionMemo()
    first = run(deployable, PRIVATE_AT_NIGHT, 3, memo)
    moved = run(deployable, PRIVATE_AT_NIGHT, 5, memo)
    assert (memo.misses, memo.hits) == (1, 1)
    assert first == run(deployable, PRIVATE_AT_NIGHT, 3, None)
    assert moved == run(deployable, PRIVATE_AT_NIGHT, 5, None)
    assert moved["groups"] != first["groups"]


def test_an_expression_reading_probabilities_is_evaluated_again_when_they_change(
    deployable: dep.Deployable,
) -> None:
    memo = ExpressionMemo()
    reads_probability = "switch($.probability > 0.01 => 2, true => 1)"
    for weight in (3, 5, 3):
        assert run(deployable, reads_probability, weight, memo) == run(
            deployable, reads_probability, weight, None
        )
    assert (memo.misses, memo.hits) == (2, 1)  # the third repeats the first's input


def test_the_hour_is_what_the_expression_reads_of_the_clock(deployable: dep.Deployable) -> None:
    memo = ExpressionMemo()
    run(deployable, PRIVATE_AT_NIGHT, 3, memo, now=NIGHT)
    run(deployable, PRIVATE_AT_NIGHT, 3, memo, now=NIGHT.replace(minute=59, second=7))
    assert (memo.misses, memo.hits) == (1, 1)
    noon = run(deployable, PRIVATE_AT_NIGHT, 3, memo, now=NIGHT.replace(hour=12))
    assert memo.misses == 2
    assert noon == run(deployable, PRIVATE_AT_NIGHT, 3, None, now=NIGHT.replace(hour=12))


def test_an_expression_whose_reads_cannot_be_proven_is_not_memoised(
    deployable: dep.Deployable,
) -> None:
    memo = ExpressionMemo()
    for expression in ("$.get(weight)", "let(w => $.weight) -> $w"):
        run(deployable, expression, 3, memo)
        run(deployable, expression, 3, memo)
    assert len(memo) == 0
    # The timestamp is read, and it moves with every second.
    run(deployable, "$.now.timestamp * 0 + 1", 3, memo)
    run(deployable, "$.now.timestamp * 0 + 1", 3, memo, now=NIGHT.replace(second=1))
    assert (memo.misses, memo.hits) == (2, 0)


def test_a_failing_expression_is_not_memoised_and_fails_the_same_way(
    deployable: dep.Deployable,
) -> None:
    memo = ExpressionMemo()
    for _ in range(2):
        with pytest.raises(Rejected, match="ZeroDivisionError"):
            run(deployable, "1 / $.failures", 3, memo)
    assert len(memo) == 0
    for _ in range(2):  # evaluates, then the factor check refuses it, memo or not
        with pytest.raises(Rejected, match="returned 'acct0000' for account 'acct0000'"):
            run(deployable, "$.id", 3, memo)
    assert memo.hits == 1


def test_the_memo_keeps_only_the_most_recently_used_results() -> None:
    memo = ExpressionMemo(2)
    memo.put("a", [1.0])
    memo.put("b", [2.0])
    assert memo.get("a") == [1.0]
    memo.put("c", [3.0])
    assert (memo.get("b"), memo.get("a"), memo.get("c"), len(memo)) == (None, [1.0], [3.0], 2)


@pytest.mark.parametrize(
    ("expression", "paths"),
    [
        (PRIVATE_AT_NIGHT, {("cost_per_hour",), ("now", "hour")}),
        ("$.weight * (1 - $.utilisation)", {("weight",), ("utilisation",)}),
        ("$.now.keys().len()", {("now",)}),
        ("3", set()),
        ("$", None),
        ("$['weight']", None),
        ("$.get(weight)", None),
        ("let(w => $.weight) -> $w", None),
        ("regex('a').matches($.id)", None),
        ("1 +", None),
    ],
)
def test_the_paths_an_expression_reads(expression: str, paths: set[Any] | None) -> None:
    found = data_paths(expression, DEFAULT_LIMITS)
    assert (None if found is None else set(found)) == paths


def test_the_paths_the_selector_of_a_select_reads_of_each_element() -> None:
    wrapped = f"$.select(({PRIVATE_AT_NIGHT}))"
    assert data_paths(wrapped, DEFAULT_LIMITS, each=True) == {
        ("cost_per_hour",),
        ("now", "hour"),
    }
    assert data_paths(f"{wrapped}.len()", DEFAULT_LIMITS, each=True) is None
    assert data_paths("$.where(true)", DEFAULT_LIMITS, each=True) is None
    assert data_paths("$.select(($))", DEFAULT_LIMITS, each=True) is None
