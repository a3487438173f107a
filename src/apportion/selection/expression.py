"""The ``expression`` module: an administrator's own factor per account, in yaql.

The seed's "their own selection modules … vary the selection probability
percentages according to time and date". The expression is evaluated once per
account with ``$`` bound to that account's document::

    {"id": "vsphere-a", "priority": 10, "weight": 2, "cost_per_hour": 0.0,
     "cost": 0.04,            # mean cost per hour of its candidates (facts.py)
     "candidates": 2,         # how many candidates it has
     "failures": 2,           # failures in the window (the job's / the store's count)
     "utilisation": 0.25,     # 1 - free share over the requested classes (utilisation.py)
     "free_share": 0.75,
     "probability": 0.44,     # within its group, after the modules before this one
     "group": 0,              # its current priority group, 0 = most preferred
     "now": {"iso": "2026-11-21T22:00:00+00:00", "year": 2026, "month": 11, "day": 21,
             "hour": 22, "minute": 0, "weekday": 6, "timestamp": 1795298400.0}}

``now`` is the job's clock in UTC (weekday ISO: Monday 1 … Sunday 7). The result
must be a finite number ≥ 0 (a boolean counts as 1 or 0); the account's probability
is multiplied by it and its group renormalised. Example, prefer the free private
cloud at night::

    switch($.cost_per_hour = 0 and ($.now.hour >= 20 or $.now.hour < 6) => 3, true => 1)

All accounts are evaluated in one bounded batch (apportion.yaql_eval): the
expression is wrapped as ``$.select((EXPR))`` over the list of account documents,
which rebinds ``$`` to each account in turn and costs one parse and at most one fork
per module rather than one per account. An expression written in keys, arithmetic,
comparisons, ``and``/``or``/``not`` and ``switch`` is answered in-process by
yaql_eval's direct evaluation (yaql's semantics, bounded); anything else, or one it
declines, goes to the forked, time- and memory-limited child. yaql itself is slow per
operation (~0.1-0.3 ms per attribute access), so the batch's wall-time
limit is ``yaql_timeout_seconds + yaql_seconds_per_account * accounts`` — but never
more than what is left of the job's one budget, ``yaql_job_seconds``, which all the
expression modules of a job share: a job's time is bounded whatever its accounts or
its modules. The account list counts against ``yaql_max_iterations`` like any
collection.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import numpy as np

from apportion.contracts.policy import ExpressionModule
from apportion.errors import Problem, Rejected
from apportion.limits import Limits, env_name
from apportion.selection.distribution import Distribution
from apportion.selection.facts import Facts
from apportion.selection.modules import Step, adjustment, make_step
from apportion.yaql_eval import SYNTAX, TIMEOUT, data_paths, evaluate_batch, syntax_failure

_PREFIX = "$.select(("
_SUFFIX = "))"
_POSITION = re.compile(r"at position (\d+)")


def check(module: ExpressionModule, path: str, limits: Limits) -> list[Problem]:
    """Problems visible without evaluating (the length limit)."""
    size = len(module.expression)
    if size > limits.yaql_max_expression_length:
        return [
            Problem(
                f"{path}.expression",
                f"yaql expression of {size} characters exceeds the limit of "
                f"{limits.yaql_max_expression_length} "
                f"(raise {env_name('yaql_max_expression_length')})",
            )
        ]
    return []


def syntax_problems(module: ExpressionModule, path: str, limits: Limits) -> list[Problem]:
    """The syntax error the module would be rejected with when it runs, found by parsing
    alone (the policy store checks this on save; a job finds it when the module runs)."""
    name = f"{path}.expression"
    text = f"{_PREFIX}{module.expression}{_SUFFIX}"
    wrapped = limits.model_copy(
        update={
            "yaql_max_expression_length": limits.yaql_max_expression_length
            + len(_PREFIX)
            + len(_SUFFIX)
        }
    )
    failure = syntax_failure(name, text, wrapped)
    if failure is None:
        return []
    return [Problem(name, _unwrap(failure.message, text, module.expression))]


def now_document(now: datetime) -> dict[str, Any]:
    utc = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    return {
        "iso": utc.isoformat(),
        "year": utc.year,
        "month": utc.month,
        "day": utc.day,
        "hour": utc.hour,
        "minute": utc.minute,
        "weekday": utc.isoweekday(),
        "timestamp": utc.timestamp(),
    }


def account_documents(dist: Distribution, facts: Facts) -> list[dict[str, Any]]:
    """One document per account in ``dist.accounts`` order (see module doc)."""
    now = now_document(facts.now)
    free = facts.free_share.tolist() if facts.free_share is not None else None
    columns = zip(
        dist.accounts,
        facts.priority.tolist(),
        facts.weight.tolist(),
        facts.cost_per_hour.tolist(),
        facts.cost.tolist(),
        facts.candidates.tolist(),
        facts.failures.tolist(),
        dist.probs.tolist(),
        dist.group.tolist(),
        strict=True,
    )
    docs = []
    for i, (account, prio, weight, base_cost, cost, count, failures, p, group) in enumerate(
        columns
    ):
        share = free[i] if free is not None else 1.0
        docs.append(
            {
                "id": account,
                "priority": prio,
                "weight": weight,
                "cost_per_hour": base_cost,
                "cost": cost,
                "candidates": int(count),
                "failures": int(failures),
                "utilisation": 1.0 - share,
                "free_share": share,
                "probability": p,
                "group": group,
                "now": now,
            }
        )
    return docs


@adjustment("expression")
def apply(module: ExpressionModule, dist: Distribution, facts: Facts, path: str) -> Step:
    name = f"{path}.expression"
    text = f"{_PREFIX}{module.expression}{_SUFFIX}"
    base = facts.limits
    # One batch evaluates every account; yaql is slow per access (see limits.py), but
    # all the job's expression modules share one budget, whatever their number.
    own = base.yaql_timeout_seconds + base.yaql_seconds_per_account * len(dist.accounts)
    left = facts.expression_clock.remaining(base.yaql_job_seconds)
    if left <= 0:
        raise Rejected.at(name, _over_budget(base), code="bad_expression")
    limits = base.model_copy(
        update={
            # The wrapper's few characters must not count against the administrator's limit.
            "yaql_max_expression_length": base.yaql_max_expression_length
            + len(_PREFIX)
            + len(_SUFFIX),
            "yaql_timeout_seconds": min(own, left),
        }
    )
    documents = account_documents(dist, facts)
    memo = facts.expression_memo
    key = _memo_key(text, documents, limits) if memo is not None else None
    values = memo.get(key) if memo is not None and key is not None else None
    if values is None:
        result = evaluate_batch({name: text}, documents, limits)
        if not result.ok:
            failure = result.failures[0]
            message = failure.message
            if failure.code == SYNTAX:
                message = _unwrap(message, text, module.expression)
            elif failure.code == TIMEOUT:
                message = _over_budget(base) if left <= own else f"{message} ({_timeout_hint()})"
            raise Rejected(f"{name}: {message}", [Problem(name, message)], code="bad_expression")
        values = result.values[name]
        if memo is not None and key is not None:
            memo.put(key, values)
    if not isinstance(values, list) or len(values) != len(dist.accounts):
        raise Rejected.at(
            name, "the expression must give one factor per account", code="bad_expression"
        )
    factors = np.empty(len(values))
    for i, (account, value) in enumerate(zip(dist.accounts, values, strict=True)):
        factor = _factor(value)
        if factor is None:
            raise Rejected.at(
                name,
                f"returned {_show(value)} for account {account!r}; a factor must be a "
                "number >= 0 (or a boolean)",
                code="bad_expression",
            )
        factors[i] = factor
    label = f"{module.name}: " if module.name else ""
    changed = int(np.count_nonzero(factors != 1.0))
    note = f"{label}times yaql factor ({changed} of {len(factors)} accounts not 1)"
    return make_step(dist.multiplied(factors), note)


def _memo_key(text: str, documents: list[dict[str, Any]], limits: Limits) -> str | None:
    """What determines the wrapped expression's values: its text, the limits (but the
    time granted, which decides only whether it fails), and each account's data at the
    paths it reads (None when those cannot be proven, see data_paths)."""
    paths = data_paths(text, limits, each=True)
    if paths is None:
        return None
    order = sorted(paths)
    read = [[_at(doc, path) for path in order] for doc in documents]
    bounds = limits.model_dump(mode="json", exclude={"yaql_timeout_seconds"})
    return json.dumps([text, bounds, order, read], sort_keys=True)


def _at(document: Any, path: tuple[str, ...]) -> list[Any]:
    """``[0, value]`` at ``path``; ``[1, depth, value]`` where the path stops (a missing
    key or a value that is not a mapping), which yaql then sees the same way."""
    value = document
    for depth, key in enumerate(path):
        if not isinstance(value, dict) or key not in value:
            return [1, depth, value if not isinstance(value, dict) else None]
        value = value[key]
    return [0, value]


def _over_budget(limits: Limits) -> str:
    return (
        "the policy's expression modules used up the job's time budget of "
        f"{limits.yaql_job_seconds:g} s (raise {env_name('yaql_job_seconds')})"
    )


def _timeout_hint() -> str:
    return f"raise {env_name('yaql_timeout_seconds')} or {env_name('yaql_seconds_per_account')}"


def _factor(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        number = float(value) if not isinstance(value, int) or abs(value) < 2**1000 else math.inf
        if math.isfinite(number) and number >= 0:
            return number
    return None


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unwrap(message: str, wrapped: str, original: str) -> str:
    """Point a syntax error at the administrator's text rather than the wrapper."""
    message = message.replace(f"'{wrapped}'", f"'{original}'")
    return _POSITION.sub(lambda m: f"at position {max(0, int(m.group(1)) - len(_PREFIX))}", message)
