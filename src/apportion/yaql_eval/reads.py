"""What an expression reads: the key paths under ``$`` its value depends on, when that
can be proven (so that a caller may reuse a result while they are unchanged)."""

from __future__ import annotations

from typing import Any

from yaql.language import expressions

from apportion.limits import Limits
from apportion.yaql_eval.budget import ALLOWED
from apportion.yaql_eval.parse import MAX_DEPTH, YaqlFailure, parse_or_fail


def data_paths(
    text: str, limits: Limits, *, each: bool = False
) -> frozenset[tuple[str, ...]] | None:
    """The key paths under ``$`` that ``text`` reads, when they provably are all it reads.

    ``each=True`` is for ``$.select(SELECTOR)`` over a list: the paths the selector
    reads of each element (None if ``text`` is not of that form).

    ``$.now.hour`` reads ``("now", "hour")``; ``$.now.keys()`` reads ``("now",)``. So
    its value is a function of the data at those paths alone (yaql without the clock
    is deterministic), which lets a caller reuse a result while they are unchanged.
    None when that cannot be proven: a syntax error, ``$`` used other than through keys
    (``$``, ``$.get(…)``, ``$[…]``), another context name (``let`` bindings), or a
    function outside the cheap expressions' set (which read only their arguments).
    A ``$`` rebound inside a lambda or after ``->`` holds a value computed from those
    paths, so its own keys may be listed too, harmlessly.
    """
    tree = parse_or_fail("", text, limits)
    if isinstance(tree, YaqlFailure):
        return None
    if each:
        tree = _selector(tree)
        if tree is None:
            return None
    paths: set[tuple[str, ...]] = set()
    return frozenset(paths) if _reads(tree, paths, 0) else None


def _selector(statement: Any) -> Any | None:
    """``SELECTOR`` of a parsed ``$.select(SELECTOR)``; None for anything else."""
    node = statement.expression
    if not (type(node) is expressions.BinaryOperator and node.name == "#operator_."):
        return None
    receiver, member = node.args
    if not (type(receiver) is expressions.GetContextValue and receiver.path.value == "$"):
        return None
    if type(member) is not expressions.Function or member.name != "select":
        return None
    return member.args[0] if len(member.args) == 1 else None


def _reads(node: Any, paths: set[tuple[str, ...]], depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    deeper = depth + 1
    if isinstance(node, expressions.Statement):
        return _reads(node.expression, paths, deeper)
    if isinstance(node, expressions.GetContextValue):  # a bare `$`, or `$name`
        return False
    if isinstance(node, expressions.Constant):
        return True
    if isinstance(node, expressions.Wrap):
        return _reads(node.expr, paths, deeper)
    if isinstance(node, expressions.MappingRuleExpression):
        return _reads(node.source, paths, deeper) and _reads(node.destination, paths, deeper)
    if isinstance(node, expressions.Function):
        if node.name not in ALLOWED or node.name == "let":
            return False
        path = _key_path(node)
        if path is not None:
            paths.add(path)
            return True
        return all(_reads(arg, paths, deeper) for arg in node.args)
    return False


def _key_path(node: Any) -> tuple[str, ...] | None:
    """``("now", "hour")`` for ``$.now.hour``; None for anything but keys under ``$``."""
    keys: list[str] = []
    while (
        isinstance(node, expressions.Function)
        and node.name == "#operator_."
        and type(node.args[1]) is expressions.KeywordConstant
    ):
        keys.append(node.args[1].value)
        node = node.args[0]
    if keys and isinstance(node, expressions.GetContextValue) and node.path.value == "$":
        return tuple(reversed(keys))
    return None
