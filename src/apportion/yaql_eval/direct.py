"""The direct evaluation: yaql's answer without yaql's dispatch.

yaql resolves every call among its overloads (~30 µs each), so a selection such as
``$.disks.where($.type = "ssd")`` over 24 disks costs ~3 ms, and the selection
module's ``$.select((switch(…)))`` over 1,000 accounts a few tenths of a second. The
few operations below (keys, ``len()``, ``where()``, ``select()``, arithmetic,
comparisons, ``and``/``or``/``not``, ``switch``, parentheses) are evaluated directly,
with yaql's own semantics, on the *happy path only*: a key that is present, numbers
that are not booleans, a list shorter than yaql's iteration limit, a predicate that
gives a boolean, a condition that is a plain value. Anything else (a missing key, a
division by zero, another type, another function) declines, and yaql evaluates the
whole expression, so errors and their messages are always yaql's own. Tests compare
both ways on generated expressions and data.

An expression not proven cheap for yaql may still be proven cheap for this
evaluation (:func:`.budget.is_direct`: only these operations, and at most
``_MAX_DIRECT_CALLS`` estimated calls, each a plain Python step that grows nothing
but the result list): it is tried in-process, and if it declines, yaql evaluates it
in the child as before. Its time is bounded by the same estimate as yaql's cheap
path, its memory by the data (no operation here builds anything larger than its
input, except ``select``'s one value per element).
"""

from __future__ import annotations

import json
from typing import Any

from yaql.language import expressions

from apportion.yaql_eval.parse import MAX_DEPTH


class _Decline(Exception):
    """The direct evaluation leaves this expression to yaql."""


_SCALARS = (str, int, float, bool, type(None))
_NUMBER_OPERATORS: dict[str, Any] = {
    "#operator_+": lambda a, b: a + b,
    "#operator_-": lambda a, b: a - b,
    "#operator_*": lambda a, b: a * b,
    # yaql's division: whole numbers divide to a whole number (floor), as upstream.
    "#operator_/": lambda a, b: a // b if isinstance(a, int) and isinstance(b, int) else a / b,
    "#operator_mod": lambda a, b: a % b,
}
_DIVIDING = frozenset({"#operator_/", "#operator_mod"})
_ORDER_OPERATORS: dict[str, Any] = {
    "#operator_<": lambda a, b: a < b,
    "#operator_>": lambda a, b: a > b,
    "#operator_<=": lambda a, b: a <= b,
    "#operator_>=": lambda a, b: a >= b,
}
_UNARY = frozenset({"#unary_operator_not", "#unary_operator_-", "#unary_operator_+"})
_BINARY = frozenset(
    {"*equal", "*not_equal", "#operator_and", "#operator_or"}
    | _NUMBER_OPERATORS.keys()
    | _ORDER_OPERATORS.keys()
)


def plain_line(index: int, expression: Any, data: Any, limit: int) -> str | None:
    """The result line for ``expression`` evaluated directly, or None to ask yaql."""
    try:
        value = _direct(expression, data, limit)
    except (_Decline, RecursionError):
        return None
    try:
        return json.dumps({"i": index, "v": value}, allow_nan=False)
    except ValueError:  # a non-finite number: yaql's path words that failure
        return None


def _direct(node: Any, dollar: Any, limit: int) -> Any:
    if isinstance(node, expressions.Statement):
        return _direct(node.expression, dollar, limit)
    kind = type(node)
    if kind is expressions.Wrap:  # parentheses
        return _direct(node.expr, dollar, limit)
    if kind is expressions.Constant:  # not a KeywordConstant (an identifier)
        if isinstance(node.value, _SCALARS):
            return node.value
        raise _Decline
    if kind is expressions.GetContextValue:
        if node.path.value == "$":
            return dollar
        raise _Decline
    if kind is expressions.UnaryOperator:
        return _unary(node.name, _direct(node.args[0], dollar, limit))
    if kind in (expressions.BinaryOperator, expressions.Function):
        name = node.name
        if name == "#operator_.":
            return _member(node.args[0], node.args[1], dollar, limit)
        if name == "switch" and kind is expressions.Function:
            return _switch(node.args, dollar, limit)
        if len(node.args) == 2:
            if name in _LOGICAL:
                # yaql: `left() and right()` / `left() or right()`, the right side lazily.
                left = _direct(node.args[0], dollar, limit)
                if not isinstance(left, _SCALARS):
                    raise _Decline
                if bool(left) == (name == "#operator_or"):
                    return left
                return _direct(node.args[1], dollar, limit)
            left, right = (_direct(arg, dollar, limit) for arg in node.args)
            return _binary(name, left, right)
    raise _Decline


_LOGICAL = frozenset({"#operator_and", "#operator_or"})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _unary(name: str, value: Any) -> Any:
    if name == "#unary_operator_not" and isinstance(value, _SCALARS):
        return not value
    if _number(value):
        if name == "#unary_operator_-":
            return -value
        if name == "#unary_operator_+":
            return +value
    raise _Decline


def _switch(rules: Any, dollar: Any, limit: int) -> Any:
    """yaql's ``switch``: the value of the first rule whose condition is true, else null."""
    # yaql matches the call before running it: every argument must be a `=>` rule.
    if not rules or any(type(rule) is not expressions.MappingRuleExpression for rule in rules):
        raise _Decline
    for rule in rules:
        condition = _direct(rule.source, dollar, limit)
        if not isinstance(condition, _SCALARS):
            raise _Decline
        if condition:
            return _direct(rule.destination, dollar, limit)
    return None


def _binary(name: str, left: Any, right: Any) -> Any:
    if name in ("*equal", "*not_equal"):
        if isinstance(left, _SCALARS) and isinstance(right, _SCALARS):
            return (left == right) == (name == "*equal")
        raise _Decline
    if _number(left) and _number(right):
        if name in _NUMBER_OPERATORS and not (name in _DIVIDING and right == 0):
            return _NUMBER_OPERATORS[name](left, right)
        if name in _ORDER_OPERATORS:
            return _ORDER_OPERATORS[name](left, right)
    raise _Decline


def _member(receiver: Any, member: Any, dollar: Any, limit: int) -> Any:
    """``receiver.key``, ``receiver.len()``, ``receiver.where(predicate)`` or
    ``receiver.select(selector)``."""
    value = _direct(receiver, dollar, limit)
    if type(member) is expressions.KeywordConstant:
        if isinstance(value, dict) and member.value in value:
            return value[member.value]
        raise _Decline
    if type(member) is not expressions.Function:
        raise _Decline
    if member.name == "len" and not member.args and isinstance(value, list | dict | str):
        return len(value)
    if member.name in ("where", "select") and len(member.args) == 1 and isinstance(value, list):
        if len(value) >= limit:
            raise _Decline
        lambda_ = member.args[0]
        if member.name == "select":
            return [_direct(lambda_, item, limit) for item in value]
        kept = []
        for item in value:
            verdict = _direct(lambda_, item, limit)
            if not isinstance(verdict, bool):
                raise _Decline
            if verdict:
                kept.append(item)
        return kept
    raise _Decline


def direct_only(node: Any, depth: int) -> bool:
    """Whether ``node`` is written only in what :func:`_direct` evaluates (whatever the
    data: that may still decline), so that trying it is never wasted on the syntax."""
    if depth > MAX_DEPTH:
        return False
    deeper = depth + 1
    if isinstance(node, expressions.Statement):
        return direct_only(node.expression, deeper)
    kind = type(node)
    if kind is expressions.Wrap:
        return direct_only(node.expr, deeper)
    if kind is expressions.Constant:
        return isinstance(node.value, _SCALARS)
    if kind is expressions.GetContextValue:
        return bool(node.path.value == "$")
    if kind is expressions.UnaryOperator:
        return node.name in _UNARY and direct_only(node.args[0], deeper)
    if kind not in (expressions.BinaryOperator, expressions.Function):
        return False
    name, args = node.name, node.args
    if name == "#operator_.":
        return _member_only(args[0], args[1], deeper)
    if name == "switch" and kind is expressions.Function:
        return _switch_only(args, deeper)
    return len(args) == 2 and name in _BINARY and all(direct_only(arg, deeper) for arg in args)


def _member_only(receiver: Any, member: Any, depth: int) -> bool:
    """:func:`direct_only` for ``receiver.member``: a key, ``len()``, ``where`` or ``select``."""
    if type(member) is expressions.KeywordConstant:
        return direct_only(receiver, depth)
    if type(member) is not expressions.Function:
        return False
    if member.name == "len":
        return not member.args and direct_only(receiver, depth)
    return (
        member.name in ("where", "select")
        and len(member.args) == 1
        and direct_only(receiver, depth)
        and direct_only(member.args[0], depth)
    )


def _switch_only(rules: Any, depth: int) -> bool:
    """:func:`direct_only` for ``switch(...)``: every argument a ``=>`` rule of plain parts."""
    return bool(rules) and all(
        type(rule) is expressions.MappingRuleExpression
        and direct_only(rule.source, depth)
        and direct_only(rule.destination, depth)
        for rule in rules
    )
