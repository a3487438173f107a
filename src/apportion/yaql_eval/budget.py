"""The budget: which expressions are proven cheap enough to evaluate in this process.

The child exists because nothing in-process can stop an expression that runs away.
But the expressions a schema actually holds — ``$.ram * 2``, ``$.disks.where($.type =
"ssd")``, the seed's swap rule — are small, and the fork alone costs more than
evaluating them. So an expression whose work is proven small and bounded, from its
parsed form and the shape of the data, is evaluated in-process; everything else still
goes to the child. An expression is *cheap* when:

* it calls only functions from ``ALLOWED``, whose cost is linear in the size
  of their arguments (no ``range``, ``pow``, regexes, string formatting, sorting,
  user lambdas, or anything reading the clock);
* no iterating function (``_ITERATING``) appears inside another's arguments,
  so a lambda runs at most once per element of one collection;
* it has at most ``_MAX_ARITHMETIC`` arithmetic operators and every number in it
  and in the data is below 2⁶³, so no number grows past a few hundred digits (big-
  integer work is what a runaway would spend its time on);
* the estimated number of yaql calls — those outside lambdas once, those inside an
  iterating function once per element of the longest collection (doubled for every
  ``+``/``*``, which can concatenate or repeat collections) — is at most
  ``_MAX_CALLS`` (yaql spends ~30 µs per call, so a few tens of milliseconds at
  worst).

Memory stays bounded by yaql's own quota, which yaql checks before it builds a repeated
string or list. Anything the check cannot prove cheap (unknown node types included)
is simply not cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from yaql.language import expressions

from apportion import walk
from apportion.yaql_eval.direct import direct_only
from apportion.yaql_eval.parse import MAX_DEPTH

_ITERATING = frozenset(
    {"where", "select", "any", "all", "count", "len", "sum", "max", "min", "first", "last"}
    | {"contains", "#operator_in", "isEmpty", "toList", "keys", "values"}
)
_ARITHMETIC = frozenset(
    {"#operator_+", "#operator_-", "#operator_*", "#operator_/", "#operator_mod"}
    | {"#unary_operator_-", "#unary_operator_+"}
)
_GROWING = frozenset({"#operator_+", "#operator_*"})
ALLOWED = (
    _ITERATING
    | _ARITHMETIC
    | frozenset(
        {"#get_context_data", "#operator_.", "#operator_?.", "#indexer", "#list", "#map"}
        | {"*equal", "*not_equal", "#operator_<", "#operator_>", "#operator_<=", "#operator_>="}
        | {"#operator_and", "#operator_or", "#unary_operator_not", "#operator_->"}
        | {"let", "selectCase", "switchCase", "switch", "get", "int", "float", "round"}
        | {"abs", "bool", "str"}
    )
)
_MAX_ARITHMETIC = 8
_MAX_CALLS = 2_000
# The direct evaluation (.direct) spends ~1 µs where yaql spends ~30 µs on a call, so the
# same wall-time bound allows it this many.
_MAX_DIRECT_CALLS = 60_000
_SMALL = 2**63


@dataclass(frozen=True, slots=True)
class DataShape:
    """What the check needs to know about ``$``: its longest collection, its numbers."""

    longest: int  # elements of the longest list or mapping
    small_numbers: bool  # every number is below 2**63 in magnitude


def shape_of(data: Any) -> DataShape:
    """The longest collection and the numbers of JSON data, by the one walk of JSON data
    (:func:`apportion.walk.breadth_first`: no recursion, whatever the nesting).

    A container met again (the same object: the selection module's account documents
    share one ``now``) adds nothing new and is not walked twice. Data nested deeper than
    the walk goes is not proven cheap (the edge bounded the job's depth long before).
    """
    if not isinstance(data, dict | list):
        return DataShape(0, not _big(data))
    tally = _Tally()
    whole = walk.breadth_first([(None, [data])], tally.step, walk.DEEPEST)
    return DataShape(tally.longest, tally.small and whole is True)


class _Tally:
    """What :func:`shape_of` carries from level to level of the walk."""

    __slots__ = ("longest", "seen", "small")

    def __init__(self) -> None:
        self.longest = 0
        self.small = True
        self.seen: set[int] = set()

    def step(self, _: Any, level: list[Any], inner: list[walk.Group]) -> bool:
        seen, containers = self.seen, []
        for container in level:
            if id(container) in seen:
                continue
            seen.add(id(container))
            self.longest = max(self.longest, len(container))
            for value in container.values() if isinstance(container, dict) else container:
                if isinstance(value, dict | list):
                    containers.append(value)
                elif self.small and _big(value):
                    self.small = False
        if containers:
            inner.append((None, containers))
        return True


def _big(value: Any) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and not abs(value) < _SMALL
    )


@dataclass(slots=True)
class _Count:
    calls: int = 0  # yaql calls outside any lambda
    per_element: int = 0  # calls inside iterating functions' arguments, per element
    arithmetic: int = 0
    growing: int = 0
    literals: int = 0  # constants: a literal list is at most this long


def is_cheap(statement: Any, shape: DataShape) -> bool:
    """Whether ``statement`` (a parsed expression) is proven cheap on data of ``shape``."""
    calls = _estimated_calls(statement, shape)
    return calls is not None and calls <= _MAX_CALLS


def is_direct(statement: Any, shape: DataShape) -> bool:
    """Whether ``statement`` is proven cheap *for the direct evaluation* on data of
    ``shape``: written only in what the direct evaluation (:mod:`.direct`) evaluates, and bounded as
    :func:`is_cheap` bounds yaql, at the direct evaluation's own cost per call."""
    if not direct_only(statement, 0):
        return False
    calls = _estimated_calls(statement, shape)
    return calls is not None and calls <= _MAX_DIRECT_CALLS


def _estimated_calls(statement: Any, shape: DataShape) -> int | None:
    """The most calls ``statement`` can make on data of ``shape``; None if unbounded."""
    if not shape.small_numbers:
        return None
    count = _Count()
    if not _walk(statement, count, inside=False, depth=0):
        return None
    if count.arithmetic > _MAX_ARITHMETIC:
        return None
    elements = max(shape.longest, count.literals, 1) << count.growing
    return count.calls + count.per_element * elements


def _walk(node: Any, count: _Count, *, inside: bool, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(node, expressions.Statement):
        return _walk(node.expression, count, inside=inside, depth=depth + 1)
    if isinstance(node, expressions.Constant):  # KeywordConstant included
        count.literals += 1
        value = node.value
        return not isinstance(value, int | float) or isinstance(value, bool) or abs(value) < _SMALL
    if isinstance(node, expressions.Wrap):
        return _walk(node.expr, count, inside=inside, depth=depth + 1)
    if isinstance(node, expressions.MappingRuleExpression):
        return all(
            _walk(part, count, inside=inside, depth=depth + 1)
            for part in (node.source, node.destination)
        )
    if isinstance(node, expressions.Function):
        return _function(node, count, inside=inside, depth=depth)
    return False


def _function(node: expressions.Function, count: _Count, *, inside: bool, depth: int) -> bool:
    name = node.name
    if name not in ALLOWED:
        return False
    iterating = name in _ITERATING
    if iterating and inside:  # a lambda inside a lambda: elements × elements
        return False
    if inside:
        count.per_element += 1
    else:
        count.calls += 1
    count.arithmetic += name in _ARITHMETIC
    count.growing += name in _GROWING
    return all(_walk(arg, count, inside=inside or iterating, depth=depth + 1) for arg in node.args)
