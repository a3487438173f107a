"""An expression module proven cheap is evaluated in this process, with the child's answers.

The selection module wraps the administrator's expression as ``$.select((EXPR))`` over
every account's document; yaql's per-call dispatch made 1,000 accounts cost ~0.3 s in
the forked child. Written in what ``yaql_eval.direct`` evaluates (keys, arithmetic,
comparisons, ``and``/``or``/``not``, ``switch``), and bounded for it, the expression is
answered directly; anything else, or anything the direct evaluation declines (a missing
key, a division by zero, another type), still goes to the killable child.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from apportion import yaql_eval
from apportion.errors import Rejected
from apportion.limits import Limits
from apportion.selection.expression import now_document
from apportion.yaql_eval import budget, child, direct, parse, records
from tests.support.samples import comparison
from tests.unit.selection.builders import final, one_host_each, select

NIGHT = datetime(2026, 11, 21, 22, 0, tzinfo=UTC)
PRIVATE_AT_NIGHT = (
    "switch($.cost_per_hour = 0 and ($.now.hour >= 20 or $.now.hour < 6) => 3, true => 1)"
)
LIMITS = Limits()


def _forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the children forked from now on (each still forks)."""
    forked: list[int] = []
    real = child.fork

    def counting() -> int:
        pid = real()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(child, "fork", counting)
    return forked


def test_a_thousand_accounts_are_evaluated_without_a_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = [f"a{i:04d}" for i in range(1000)]
    requests, providers = one_host_each(*names)
    accounts = {n: {"cost_per_hour": 0.5} for n in names[1::2]}  # even ones are free
    forked = _forks(monkeypatch)
    policy = [{"module": "equal"}, {"module": "expression", "expression": PRIVATE_AT_NIGHT}]
    outcome = select(requests, providers, policy, accounts=accounts, now=NIGHT)
    assert forked == []
    probabilities = final(outcome)
    # 500 free accounts weigh 3, 500 paid ones 1: 3/2000 and 1/2000.
    assert probabilities["a0000"] == pytest.approx(3 / 2000)
    assert probabilities["a0001"] == pytest.approx(1 / 2000)


def test_an_expression_the_direct_evaluation_declines_is_answered_by_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Too many accounts for yaql in-process, few enough calls for the direct evaluation.
    names = [f"a{i:04d}" for i in range(1000)]
    requests, providers = one_host_each(*names)
    forked = _forks(monkeypatch)
    policy = [{"module": "equal"}, {"module": "expression", "expression": "1 / $.failures"}]
    failures = dict.fromkeys(names[:-1], 1)  # the last account has none: 1 / 0
    # A time limit no starved machine reaches: the answer must be the child's error.
    with pytest.raises(Rejected, match="ZeroDivisionError"):
        select(
            requests, providers, policy, failures=failures, limits=Limits(yaql_timeout_seconds=60)
        )
    assert len(forked) == 1


def test_a_hostile_expression_still_goes_to_the_child_and_is_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests, providers = one_host_each("a", "b")
    forked = _forks(monkeypatch)
    policy = [
        {"module": "equal"},
        {"module": "expression", "expression": "range(0, 100000000).len()"},
    ]
    with pytest.raises(Rejected, match="time limit"):
        select(requests, providers, policy, limits=Limits(yaql_timeout_seconds=0.3))
    assert len(forked) == 1


def _route(expression: str, data: Any) -> str:
    tree = parse.parse(LIMITS.yaql_max_iterations, LIMITS.yaql_memory_quota, expression)
    return yaql_eval.route(tree, budget.shape_of(data))


def test_the_direct_evaluation_is_bounded_by_the_work_it_would_do() -> None:
    docs = [{"id": f"a{i}", "weight": 1.0, "failures": 0} for i in range(1000)]
    assert _route(f"$.select(({PRIVATE_AT_NIGHT.replace('$.now.hour', '$.weight')}))", docs) == (
        yaql_eval.DIRECT
    )
    # ~60 calls per account, 1,000 accounts: past the direct evaluation's allowance.
    heavy = " and ".join(["$.weight > $.failures"] * 16)
    assert _route(f"$.select(({heavy}))", docs) == yaql_eval.CHILD
    # A function the direct evaluation does not know, or a lambda in a lambda.
    assert _route("$.select((int($.weight)))", docs) == yaql_eval.CHILD
    assert _route("$.select(($.id.len()))", docs) == yaql_eval.CHILD


SAME_AS_THE_CHILD = [
    PRIVATE_AT_NIGHT,
    "$.weight * (1 - $.utilisation) / (1 + $.failures)",
    "$.id != 'b'",
    "switch($.failures > 0 => 0.5, $.group = 0 => 2)",  # null for the rest: rejected
    "not $.failures",
    "$.priority mod 2 + 1",
    "-$.weight",
    "$.candidates / 0",
    "$.missing",
    "$.now.hour and $.cost",
    "($.failures or $.weight) * 2",
]


@pytest.mark.parametrize("expression", SAME_AS_THE_CHILD)
def test_in_process_and_the_child_give_the_same_probabilities_or_rejection(
    expression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests, providers = one_host_each("a", "b", "c")
    policy = [
        {"module": "equal"},
        {"module": "weights"},
        {"module": "expression", "expression": expression},
    ]
    kwargs: dict[str, Any] = {
        "accounts": {"a": {"cost_per_hour": 0.2, "weight": 3, "priority": 1}},
        "failures": {"b": 2},
        "now": NIGHT,
    }

    def outcome() -> Any:
        try:
            return final(select(requests, providers, policy, **kwargs))
        except Rejected as exc:
            return (str(exc), exc.problems, exc.code)

    here = outcome()
    monkeypatch.setattr(yaql_eval, "route", lambda tree, shape: yaql_eval.CHILD)
    assert outcome() == here


# ---- generated: the direct answer is yaql's, on account documents -------------------

_FIELDS = ["id", "priority", "weight", "cost_per_hour", "cost", "candidates", "failures"]
_FIELDS += ["utilisation", "free_share", "probability", "group", "missing"]
_NOW_FIELDS = ["hour", "weekday", "minute", "iso", "timestamp"]


@st.composite
def _account_expressions(draw: st.DrawFn, depth: int = 0) -> str:
    simple = st.one_of(
        st.builds(lambda k: f"$.{k}", st.sampled_from(_FIELDS)),
        st.builds(lambda k: f"$.now.{k}", st.sampled_from(_NOW_FIELDS)),
        st.sampled_from(["0", "1", "2", "0.5", "6", "20", "'a1'", "true", "false", "null"]),
    )
    if depth >= 3:
        return draw(simple)
    inner = _account_expressions(depth + 1)
    operator = st.sampled_from(
        ["+", "-", "*", "/", "mod", "=", "!=", "<", ">", "<=", ">=", "and", "or"]
    )
    return draw(
        st.one_of(
            simple,
            st.builds(lambda a, o, b: f"{a} {o} {b}", inner, operator, inner),
            st.builds(lambda a, o, b: f"({a}) {o} ({b})", inner, operator, inner),
            st.builds(lambda o, a: f"{o}({a})", st.sampled_from(["-", "not "]), inner),
            st.builds(lambda c, v, w: f"switch({c} => {v}, true => {w})", inner, inner, inner),
        )
    )


_documents = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.sampled_from(["a0", "a1", "b"]),
            "priority": st.sampled_from([0.0, 1.0, 10.0]),
            "weight": st.sampled_from([0.0, 1.0, 2.5]),
            "cost_per_hour": st.sampled_from([0.0, 0.4]),
            "cost": st.floats(0, 10),
            "candidates": st.integers(1, 4),
            "failures": st.integers(0, 3),
            "utilisation": st.floats(0, 1),
            "free_share": st.floats(0, 1),
            "probability": st.floats(0, 1),
            "group": st.integers(0, 2),
            "now": st.sampled_from([now_document(NIGHT), now_document(datetime(2026, 1, 5, 6))]),
        }
    ),
    min_size=1,
    max_size=4,
)


@comparison(100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_account_expressions(), _documents)
def test_an_account_expression_evaluated_directly_gives_yaqls_value(
    expression: str, documents: list[dict[str, Any]]
) -> None:
    text = f"$.select(({expression}))"
    tree = parse.parse(LIMITS.yaql_max_iterations, LIMITS.yaql_memory_quota, text)
    plain = direct.plain_line(0, tree, documents, LIMITS.yaql_max_iterations)
    if plain is None:  # declined: the child answers
        return
    context = records.data_context(documents)
    assert plain == records.result_line(0, tree, context, LIMITS, (Exception,))
