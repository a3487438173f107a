"""Expressions proven cheap are evaluated in-process, with the child's very answers.

The proof (``yaql_eval.budget.is_cheap``) looks at the parsed expression and the shape of the
data; anything it cannot bound still goes to the forked child, which can be killed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from apportion import yaql_eval
from apportion.limits import Limits
from apportion.yaql_eval import budget, child, direct, parse, records
from tests.support.samples import comparison

# The child's deadline is generous: these tests compare values and failures, and a forked
# child on a machine busy with a second test run took more than a second to answer.
LIMITS = Limits(yaql_timeout_seconds=30.0)
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
    tree = parse.parse(LIMITS.yaql_max_iterations, LIMITS.yaql_memory_quota, expression)
    return budget.is_cheap(tree, budget.shape_of(data))


@pytest.mark.parametrize("expression", SCHEMA_EXPRESSIONS)
def test_the_seeds_kind_of_expression_is_proven_cheap(expression: str) -> None:
    assert _cheap(expression)


def test_a_batch_of_cheap_expressions_forks_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise AssertionError("a cheap batch forked a child")

    monkeypatch.setattr(child, "fork", no_fork)
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
    monkeypatch.setattr(yaql_eval, "route", lambda tree, shape: yaql_eval.CHILD)
    there = yaql_eval.evaluate_batch(batch, HARDWARE, LIMITS)
    assert here == there


# ---- the direct evaluation of plain expressions agrees with yaql ----------------------

_KEYS = ["ram", "disks", "type", "size", "id", "name", "missing"]
_values = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.booleans(),
    st.none(),
    st.sampled_from(["ssd", "hdd", "", "x"]),
)
_data = st.recursive(
    _values,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner),
    max_leaves=12,
)


@st.composite
def _plain_expressions(draw: st.DrawFn, depth: int = 0) -> str:
    simple = st.one_of(
        st.just("$"),
        st.builds(lambda k: f"$.{k}", st.sampled_from(_KEYS)),
        st.builds(lambda a, b: f"$.{a}.{b}", st.sampled_from(_KEYS), st.sampled_from(_KEYS)),
        st.sampled_from(["1", "2", "0", "2.5", "'ssd'", "true", "null"]),
    )
    if depth >= 2:
        return draw(simple)
    inner = _plain_expressions(depth + 1)
    operator = st.sampled_from(
        ["+", "-", "*", "/", "mod", "=", "!=", "<", ">", "<=", ">=", "and", "or"]
    )
    return draw(
        st.one_of(
            simple,
            st.builds(lambda a, o, b: f"({a}) {o} ({b})", inner, operator, inner),
            st.builds(lambda o, a: f"{o}({a})", st.sampled_from(["-", "+", "not "]), inner),
            st.builds(lambda a: f"({a}).len()", inner),
            st.builds(lambda a, p: f"({a}).where({p})", inner, inner),
            st.builds(lambda a, p: f"({a}).select({p})", inner, inner),
            st.builds(
                lambda rules, last: (
                    "switch("
                    + ", ".join(f"{c} => {v}" for c, v in rules)
                    + (f", true => {last}" if last is not None else "")
                    + ")"
                ),
                st.lists(st.tuples(inner, inner), min_size=1, max_size=2),
                st.none() | inner,
            ),
        )
    )


@comparison(100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_plain_expressions(), _data)
def test_a_plain_expression_evaluated_directly_gives_yaqls_value(
    expression: str, data: Any
) -> None:
    tree = parse.parse(LIMITS.yaql_max_iterations, LIMITS.yaql_memory_quota, expression)
    plain = direct.plain_line(0, tree, data, LIMITS.yaql_max_iterations)
    if plain is None:  # declined: yaql answers
        return
    context = records.data_context(data)
    assert plain == records.result_line(0, tree, context, LIMITS, (Exception,))


def test_the_disk_selection_of_a_schema_is_evaluated_without_yaql() -> None:
    tree = parse.parse(
        LIMITS.yaql_max_iterations, LIMITS.yaql_memory_quota, '$.disks.where($.type = "ssd")'
    )
    line = direct.plain_line(0, tree, HARDWARE, LIMITS.yaql_max_iterations)
    assert line is not None
    assert [d["id"] for d in json.loads(line)["v"]] == [
        d["id"] for d in DISKS if d["type"] == "ssd"
    ]
