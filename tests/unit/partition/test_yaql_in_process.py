"""Expressions proven cheap are evaluated in-process, with the child's very answers.

The proof (``yaql_eval.is_cheap``) looks at the parsed expression and the shape of the
data; anything it cannot bound still goes to the forked child, which can be killed.
"""

from __future__ import annotations

from typing import Any

import pytest

from apportion import yaql_eval
from apportion.limits import Limits

LIMITS = Limits(yaql_timeout_seconds=1.0)
DISKS = [
    {"id": f"sd{chr(97 + i)}", "size": 100 + i, "type": "ssd" if i % 3 else "hdd"}
    for i in range(24)
]
HARDWARE = {"ram": 65_536, "disks": DISKS}

SCHEMA_EXPRESSIONS = [
    "$.ram * 2",
    "$.ram / 4",
    "$.disks.len() * 10240",
    '$.disks.where($.type = "ssd")',
    "let(ram => $.get(ram, 1024)) -> selectCase($ram <= 2048, $ram > 2048 and $ram < 8192,"
    " $ram > 8192 and $ram < 65536).switchCase($ram * 2, $ram, $ram / 2, 4096)",
]


def _cheap(expression: str, data: Any = HARDWARE) -> bool:
    tree = yaql_eval._parse(LIMITS.yaql_max_iterations, LIMITS.yaql_memory_quota, expression)
    return yaql_eval.is_cheap(tree, yaql_eval.shape_of(data))


@pytest.mark.parametrize("expression", SCHEMA_EXPRESSIONS)
def test_the_seeds_kind_of_expression_is_proven_cheap(expression: str) -> None:
    assert _cheap(expression)


def test_a_batch_of_cheap_expressions_forks_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise AssertionError("a cheap batch forked a child")

    monkeypatch.setattr(yaql_eval, "_fork", no_fork)
    result = yaql_eval.evaluate_batch(
        {f"e{i}": text for i, text in enumerate(SCHEMA_EXPRESSIONS)}, HARDWARE, LIMITS
    )
    assert result.failures == ()
    assert result.values["e0"] == 131_072
    assert result.values["e4"] == 4096  # the seed's swap rule for 64 GiB of RAM
    assert [d["id"] for d in result.values["e3"]] == [d["id"] for d in DISKS if d["type"] == "ssd"]


@pytest.mark.parametrize(
    ("expression", "data"),
    [
        ("range(0, 100000000).len()", HARDWARE),  # not an allowed function
        ("pow(10, pow(10, 8))", HARDWARE),
        ("regex('(a+)+$').matches('aaaa!')", HARDWARE),
        ("$.disks.where($.disks.where(true).len() > 1)", HARDWARE),  # a lambda in a lambda
        (" * ".join(["$.ram"] * 10), HARDWARE),  # more arithmetic than allowed
        ("$.ram * 99999999999999999999", HARDWARE),  # a number past 2**63
        ("$.ram * 2", {"ram": 10**30}),  # the data holds one
        ("$.big.select($ * 2)", {"big": list(range(5000))}),  # too many calls per element
        # each + may double a collection: 24 disks → 3,072 elements for the lambda
        ("(" + " + ".join(["$.disks"] * 8) + ").where($.size > 0)", HARDWARE),
    ],
    ids=[
        "range",
        "pow",
        "regex",
        "nested-lambda",
        "arithmetic",
        "big-constant",
        "big-data-number",
        "long-collection",
        "concatenated",
    ],
)
def test_an_expression_that_could_run_away_is_left_to_the_child(expression: str, data: Any) -> None:
    assert not _cheap(expression, data)


FAILING_OR_ODD = [
    "$.nothing.here",
    "1 / 0",
    "$.disks[99]",
    "$.disks.first().size + 'x'",
    "float('inf')",
    "$.disks.where($.type = 'nvme').first()",
    "'x' * 1000000",  # yaql's own memory quota
    "$.disks.select($.size).sum()",
]


@pytest.mark.parametrize("expression", FAILING_OR_ODD + SCHEMA_EXPRESSIONS)
def test_in_process_and_the_child_give_the_same_value_or_failure(
    expression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _cheap(expression)
    batch = {"schema[1].size": expression}
    here = yaql_eval.evaluate_batch(batch, HARDWARE, LIMITS)
    monkeypatch.setattr(yaql_eval, "is_cheap", lambda tree, shape: False)
    there = yaql_eval.evaluate_batch(batch, HARDWARE, LIMITS)
    assert here == there
