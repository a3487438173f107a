"""The one walk of decoded JSON (apportion.walk): its drivers, and its rules as the
edge and the worker's gate use them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion import kinds, unknown_fields, walk
from apportion.limits import Limits
from tests.conftest import load_example

GATE = {"outer_depth": 2, "outer_items": 8, "values": False}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_breadth_first_says_whether_it_looked_at_everything_was_stopped_or_ran_out_of_depth() -> (
    None
):
    def step(_: Any, values: list[Any], inner: list[walk.Group]) -> bool:
        lists = [v for v in values if type(v) is list]
        if any(v == "stop" for v in values):
            return False
        inner.extend((None, v) for v in lists)
        return True

    assert walk.breadth_first([(None, [nested(3)])], step, 5) is True
    assert walk.breadth_first([(None, [[["stop"]]])], step, 5) is False
    assert walk.breadth_first([(None, [nested(9)])], step, 5) is None


def test_the_first_wanted_value_is_found_with_its_path() -> None:
    value = {"a": [1, {"b": 2}], "c": {"d": 3}}

    assert walk.first(value, lambda node: node == 2) == (2, "a[1].b")
    assert walk.first(value, lambda node: node == 4) is None


def test_the_gate_rules_leave_strings_and_numbers_to_the_engine_but_bound_depth_and_values() -> (
    None
):
    limits = Limits(max_json_depth=3, max_json_items=5, max_string_length=4)
    odd = {"a": "x" * 10, "n": 2**70, "f": float("nan")}

    assert walk.check(odd, walk.Rules(limits, **GATE)) is None
    found = walk.check(odd, walk.Rules(limits))
    assert found is not None
    assert found.code in {"too_large", "number_out_of_range"}


@pytest.mark.parametrize(
    ("job", "code", "path"),
    [
        (nested(4), None, None),  # the job's own four levels, two more outside it
        (nested(5), "too_deep", "$[0][0][0][0][0][0]"),
        ([1, 2, 3, 4], None, None),  # the job's own values, eight more outside it
        ([1, 2, 3, 4, 5, 6], "too_large", "$[0][0]"),
        ({"x": {"__type__": 1, "__value__": 2}}, "reserved_key", "$[0][0].x"),
    ],
)
def test_a_job_inside_the_gates_wrapper_is_held_to_its_own_limits(
    job: Any, code: str | None, path: str | None
) -> None:
    limits = Limits(max_json_depth=4, max_json_items=5)
    call = [[job], {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]

    found = walk.check(call, walk.Rules(limits, **GATE))

    if code is None:
        assert found is None
    else:
        assert found is not None
        assert (found.code, found.problem.path) == (code, path)


def test_the_messages_speak_of_the_jobs_limits_not_the_wrappers() -> None:
    limits = Limits(max_json_depth=4, max_json_items=5)

    deep = walk.check([[nested(9)], {}, {}], walk.Rules(limits, **GATE))
    large = walk.check([[list(range(12))], {}, {}], walk.Rules(limits, **GATE))

    assert deep is not None
    assert deep.problem.message == (
        "nested deeper than 4 levels (raise APPORTION_LIMITS__MAX_JSON_DEPTH)"
    )
    assert large is not None
    assert large.problem.message == (
        "the job holds more than 5 values (raise APPORTION_LIMITS__MAX_JSON_ITEMS)"
    )


values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=6)
    | st.just({"__type__": "t", "__value__": "v"}),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=25,
)


@settings(max_examples=300)
@given(
    values,
    st.builds(
        Limits,
        max_json_depth=st.integers(1, 6),
        max_json_items=st.integers(1, 40),
        max_string_length=st.integers(1, 10),
    ),
    st.booleans(),
)
def test_the_gates_quick_pass_finds_a_problem_exactly_when_the_walk_with_paths_does(
    value: Any, limits: Limits, check_values: bool
) -> None:
    rules = walk.Rules(limits, outer_depth=2, outer_items=8, values=check_values)

    assert walk._shape_ok(value, rules) == (walk._locate(value, rules) is None)


EXAMPLES = {
    "partition": "partition.json",
    "auto_attach": "auto_attach.json",
    "launch_select": "launch_select.json",
    "heal_org": "heal_org.json",
}


def _places(value: Any) -> list[Any]:
    """Every object and array inside ``value``."""
    out = [value]
    for node in out:
        inside = node.values() if isinstance(node, dict) else node
        out += [v for v in inside if isinstance(v, dict | list)]
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(EXAMPLES)),
    st.integers(0, 10_000),
    st.sampled_from(["sizee", "href", "strict", "name", "id", "best_with_disk", "x-extra"]),
    values,
)
def test_the_unknown_field_quick_pass_finds_something_exactly_when_the_walk_lists_it(
    kind: str, where: int, key: str, extra: Any
) -> None:
    job = json.loads(json.dumps(load_example(EXAMPLES[kind])))
    objects = [p for p in _places(job) if isinstance(p, dict)]
    objects[where % len(objects)][key] = extra
    shape = unknown_fields._shape(kinds.get(kind).job)

    found: dict[Any, Any] = {}
    unknown_fields._walk(job, shape, found)

    assert unknown_fields._clean(job, shape) == (not found)
