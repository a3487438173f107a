"""The edge's fast path answers exactly as the strict path, or leaves the answer to it."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from apportion import edge
from apportion.edge_fast import fast_decode
from apportion.errors import Rejected
from apportion.limits import Limits


@dataclass(frozen=True)
class Obj:
    """A JSON object as written: its members in order, a key possibly more than once."""

    members: list[tuple[str, Any]]


def strict_loads(text: str | bytes, limits: Limits) -> Any:
    """The edge as it is without a fast path: the reference every answer must equal."""
    try:
        value, duplicate = edge.strict_decode(text)
    except RecursionError:
        return ("too_deep",)
    except ValueError as exc:
        return ("malformed_json", f"not valid JSON: {exc}")
    if duplicate is not None:
        return ("duplicate_key", *duplicate)
    return value


def outcome(text: str | bytes, limits: Limits) -> Any:
    """What :func:`edge.loads` answers, in the reference's terms."""
    try:
        value = edge.loads(text, limits)
    except Rejected as exc:
        if exc.code == "too_deep":
            return ("too_deep",)
        if exc.code == "duplicate_key":
            key = ast.literal_eval(exc.message.split("the key ", 1)[1].split(" appears")[0])
            return ("duplicate_key", exc.problems[0].path, key)
        return (exc.code, exc.problems[0].message)
    return value


def typed(value: Any) -> str:
    """Equal for equal values of equal types, in the same order (1 and 1.0, 0.0 and -0.0
    and key order all differ)."""
    return repr(value)


keys = st.sampled_from(
    ["a", "b", ":", "a:b", "[", "]", "{", '"', "\\", "é", "\ud800", ""]
) | st.text(max_size=3)
strings = st.text(st.sampled_from([*'ab:[]{}"\\/\n\t é😀\x00\x7f', "\ud800", "\udc00"]), max_size=6)
# Near-JSON token soup: mostly invalid, sometimes valid in odd ways.
tokens = [*'{}[]":,0123456789.eE-+ \\u\n', "true", "null", "NaN", '"a"', "\ud800", "\\u003a"]
soups = st.lists(st.sampled_from(tokens), max_size=30).map("".join)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 10**19])
    | st.floats()
    | strings
)
trees = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.lists(st.tuples(keys, inner), max_size=4).map(Obj)
    ),
    max_leaves=25,
)


@dataclass(frozen=True)
class Style:
    ascii: bool  # non-ASCII as \\u escapes
    colons: bool  # ':' in strings as \\u003a
    space: str  # after separators


def write(value: Any, style: Style) -> str:
    """JSON text of a tree, duplicates, NaN and lone surrogates included."""
    sep = "," + style.space
    if isinstance(value, Obj):
        inner = sep.join(
            f"{write(k, style)}:{style.space}{write(v, style)}" for k, v in value.members
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + sep.join(write(v, style) for v in value) + "]"
    text = json.dumps(value, ensure_ascii=style.ascii)
    if isinstance(value, str) and style.colons:
        text = text.replace(":", "\\u003a")
    return text


styles = st.builds(Style, st.booleans(), st.booleans(), st.sampled_from(["", " ", "\n\t "]))


def assert_same(text: str | bytes, limits: Limits | None = None) -> None:
    limits = limits or Limits()
    assert typed(outcome(text, limits)) == typed(strict_loads(text, limits))


@settings(max_examples=200)
@given(trees, styles)
def test_loads_answers_every_written_document_as_the_strict_path_does(
    tree: Any, style: Style
) -> None:
    text = write(tree, style)

    assert_same(text)
    assert_same(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=200)
@given(soups)
@example('{"a": 1, "a": 2}')
@example('{"a": 1, "\\u0061": 2}')
@example('{"a": {"b": [1, {"c": 1, "c": 1}]}}')
@example('{"x": "1:2", "x": 3}')
@example("[NaN]")
@example("[1E400]")
@example("[-0, -0.0, 0e0, 1.0]")
@example("[123456789012345678901234567890]")
@example("[18446744073709551615, -9223372036854775809]")
@example('["\\ud800"]')
@example('["\\ud83d\\ude00", "\\"", "\\\\", "\\\\\\"]"]')
@example("\ufeff{}")
@example(" \t\n{}\r\n")
def test_loads_answers_any_text_as_the_strict_path_does(text: str) -> None:
    assert_same(text)


@pytest.mark.parametrize("levels", [150, 199, 200, 201, 990, 1023, 1025, 5000])
def test_deep_nesting_is_answered_as_the_strict_path_answers_it(levels: int) -> None:
    for text in ("[" * levels + "]" * levels, '{"a":' * levels + "1" + "}" * levels):
        assert_same(text, Limits(max_json_depth=10_000))
        assert_same(text)


def test_a_colon_escaped_in_a_key_is_left_to_the_strict_path_which_finds_the_repeat() -> None:
    text = '{"a:": 1, "a\\u003a": 2}'

    assert fast_decode(text) is None
    assert outcome(text, Limits()) == ("duplicate_key", "a:", "a:")


def height(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(height, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(height, value), default=0)
    return 0


def items(value: Any) -> int:
    if isinstance(value, dict):
        return len(value) + sum(map(items, value.values()))
    if isinstance(value, list):
        return len(value) + sum(map(items, value))
    return 0


def longest(value: Any) -> int:
    if isinstance(value, dict):
        return max([*map(len, value), *map(longest, value.values())], default=0)
    if isinstance(value, list):
        return max(map(longest, value), default=0)
    return len(value) if isinstance(value, str) else 0


small_limits = st.builds(
    Limits,
    max_json_depth=st.integers(1, 6),
    max_json_items=st.integers(1, 40),
    max_string_length=st.integers(1, 8),
)


@settings(max_examples=200)
@given(trees, styles, small_limits)
def test_the_bounds_of_a_text_hold_for_its_value_and_vouch_only_for_a_clean_shape(
    tree: Any, style: Style, limits: Limits
) -> None:
    text = write(tree, style)
    fast = fast_decode(text, limits)
    if fast is None:
        return
    value, bounds = fast

    assert bounds.height >= height(value)
    assert bounds.items >= items(value)
    assert bounds.longest >= longest(value)
    if bounds.vouch(limits):
        assert edge.shape_problem(value, limits) is None
    if isinstance(value, list) and bounds.vouch(limits, level=1):
        assert all(edge.shape_problem(job, limits) is None for job in value)


def test_a_long_string_in_a_long_text_is_not_vouched_for() -> None:
    text = json.dumps({"pad": ["x" * 5] * 20, "s": "y" * 9})
    limits = Limits(max_string_length=8)

    value, bounds = edge.load_bounded(text, limits)

    assert bounds is not None
    assert not bounds.vouch(limits)
    found = edge.shape_problem(value, limits)
    assert found is not None
    assert found.problem.path == "s"


def test_a_text_without_escapes_or_long_numbers_takes_the_fast_path() -> None:
    text = json.dumps({"providers": [{"uuid": "a:b", "n": [1, 2.5, None, True]}] * 3})

    fast = fast_decode(text, Limits())

    assert fast is not None
    assert fast[0] == json.loads(text)
    assert fast[1].height == 4
    assert fast[1].vouch(Limits())


json_numbers = st.from_regex(
    r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][-+]?[0-9]{1,3})?", fullmatch=True
)


@settings(max_examples=200)
@given(json_numbers)
def test_a_number_is_read_as_the_strict_path_reads_it_to_the_last_bit(number: str) -> None:
    assert_same(f"[{number}, {{{json.dumps(number)}: {number}}}]")


@pytest.mark.parametrize(
    "text", ["[NaN]", "[Infinity]", "[-Infinity]", "[1E400]", "\ufeff[]", '["\\ud800"]', "[1,]"]
)
def test_orjson_still_refuses_what_the_fast_path_leaves_to_the_strict_path(text: str) -> None:
    # Canary: the fast path answers only for texts orjson accepts; were orjson to accept
    # one of these, its value could differ from the strict path's answer.
    assert fast_decode(text) is None
