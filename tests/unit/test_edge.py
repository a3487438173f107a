"""The edge every job passes before any engine: strict JSON, and the shape walk."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from apportion import edge, walk
from apportion.engine import parse_json_text, run
from apportion.errors import Rejected
from apportion.limits import Limits
from tests.conftest import load_example
from tests.support.samples import comparison


def rejection(text: str, limits: Limits | None = None) -> Rejected:
    with pytest.raises(Rejected) as caught:
        edge.loads(text, limits or Limits())
    return caught.value


def test_a_duplicate_key_is_rejected_with_the_path_of_the_repeated_key() -> None:
    exc = rejection('{"schema": [{"id": "a", "size": 1, "size": 900}], "hardware": {}}')

    assert exc.code == "duplicate_key"
    assert [p.path for p in exc.problems] == ["schema[0].size"]
    assert "'size' appears more than once" in exc.message


def test_a_duplicate_key_at_the_top_is_named_by_the_key_alone() -> None:
    exc = rejection('{"job_id": "a", "job_id": "b"}')

    assert [p.path for p in exc.problems] == ["job_id"]


def test_the_same_key_in_two_different_objects_is_not_a_duplicate() -> None:
    assert edge.loads('[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}]


def test_nan_and_infinity_tokens_are_not_json() -> None:
    for token in ("NaN", "Infinity", "-Infinity"):
        exc = rejection(f'{{"size": {token}}}')
        assert exc.code == "malformed_json"


def test_a_payload_over_the_limit_names_the_variable_to_raise() -> None:
    exc = rejection('{"a": "' + "x" * 100 + '"}', Limits(max_payload_bytes=50))

    assert exc.code == "too_large"
    assert "APPORTION_LIMITS__MAX_PAYLOAD_BYTES" in exc.message


def test_nesting_beyond_the_interpreter_stack_is_too_deep_not_a_crash() -> None:
    exc = rejection("[" * 100_000 + "]" * 100_000)

    assert exc.code == "too_deep"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=edge.INT_MIN, max_value=edge.INT_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",))),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(blacklist_categories=("Cs",)), max_size=5), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@given(json_values)
def test_strict_decoding_returns_what_plain_json_returns_for_any_valid_document(
    value: Any,
) -> None:
    text = json.dumps(value)

    assert edge.loads(text) == json.loads(text)
    assert edge.shape_problem(json.loads(text)) is None


@pytest.mark.parametrize(
    ("value", "path", "code"),
    [
        (
            {"hardware": {"disks": [{"size": 10**400}]}},
            "hardware.disks[0].size",
            "number_out_of_range",
        ),
        ({"failures": {"a": -(2**63) - 1}}, "failures.a", "number_out_of_range"),
        ({"weight": float("inf")}, "weight", "number_out_of_range"),
        ({"weight": float("nan")}, "weight", "number_out_of_range"),
        ({"pools": [{"product_id": "x\ud800"}]}, "pools[0].product_id", "invalid_string"),
        ({"attributes": {"\udfff": "v"}}, "attributes", "invalid_string"),
        ({"a": [[[[["deep"]]]]]}, "a[0][0][0][0]", "too_deep"),
        ({"a": list(range(20))}, "a", "too_large"),
    ],
)
def test_the_shape_walk_names_the_first_offending_value(value: Any, path: str, code: str) -> None:
    limits = Limits(max_json_depth=5, max_json_items=10)

    found = edge.shape_problem(value, limits)

    assert found is not None
    assert (found.problem.path, found.code) == (path, code)


def test_integers_at_the_edges_of_64_bits_pass_and_one_beyond_does_not() -> None:
    assert edge.shape_problem({"n": [edge.INT_MAX, edge.INT_MIN]}) is None
    assert edge.shape_problem({"n": [edge.INT_MAX + 1]}) is not None


def test_every_limit_message_names_the_environment_variable_to_raise() -> None:
    limits = Limits(max_json_depth=2, max_json_items=3, max_string_length=4)
    for value, variable in [
        ({"a": {"b": {"c": 1}}}, "MAX_JSON_DEPTH"),
        ({"a": [1, 2, 3, 4]}, "MAX_JSON_ITEMS"),
        ({"a": "xxxxx"}, "MAX_STRING_LENGTH"),
        ({"xxxxx": 1}, "MAX_STRING_LENGTH"),
    ]:
        found = edge.shape_problem(value, limits)
        assert found is not None
        assert f"APPORTION_LIMITS__{variable}" in found.problem.message


def test_a_job_with_a_duplicate_key_is_answered_rejected_by_the_engine() -> None:
    text = json.dumps(load_example("partition.json"))
    text = text.replace('"hardware": {', '"hardware": {"ram": 1, ', 1)

    env = run("partition", text, job_id="task-1")

    assert env.status == "rejected"
    assert env.error is not None
    assert env.error.code == "duplicate_key"
    assert env.error.details[0].path == "hardware.ram"


def test_a_json_array_of_jobs_still_parses_when_each_job_uses_the_same_keys() -> None:
    job = load_example("partition.json")

    assert parse_json_text(json.dumps([job, job])) == [job, job]


@pytest.mark.parametrize("bad", ["a\nb", "\ud800", "x" * 257, "", "tab\there", "\x00"])
def test_a_job_id_that_is_not_printable_text_is_answered_under_the_task_id_saying_why(
    bad: str,
) -> None:
    job = {**load_example("partition.json"), "job_id": bad}

    env = run("partition", job, job_id="generated-task-id")

    assert env.status == "rejected"
    assert env.job_id == "generated-task-id"
    assert env.error is not None
    assert [d.path for d in env.error.details] == ["job_id"]
    orjson.dumps(env.as_dict())  # valid UTF-8 JSON: no lone surrogate came back


def test_a_python_callers_non_string_key_is_found_and_named() -> None:
    found = edge.shape_problem({"hardware": {1: "x"}}, Limits())

    assert found is not None
    assert found.code == "invalid_json"
    assert found.problem.path == "hardware"
    assert "key of type int" in found.problem.message


class Odd:
    """Not JSON data: what a Python caller might put in a payload."""


hostile_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1])
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["\ud800", "é\udfff", "x" * 9, Odd(), (1,), b"b"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=9) | st.sampled_from([1, None, (1,), "\ud800", "é", "k" * 9]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=30,
)


@comparison(100)
@given(
    hostile_values,
    st.builds(
        Limits,
        max_json_depth=st.integers(1, 6),
        max_json_items=st.integers(1, 40),
        max_string_length=st.integers(1, 10),
    ),
)
def test_the_quick_shape_pass_finds_a_problem_exactly_when_the_walk_with_paths_does(
    value: Any, limits: Limits
) -> None:
    rules = walk.Rules(limits)
    assert walk._shape_ok(value, rules) == (walk._locate(value, rules) is None)


# ---- reserved objects, long integers, a job that is a string --------------------------

RESERVED = {"__type__": "datetime", "__value__": "2020-01-01T00:00:00"}
RESERVED_MESSAGE = (
    "an object made of exactly __type__ and __value__ is reserved by the message codec; "
    "rename those keys"
)


def _partition_with_meta(meta: Any) -> dict[str, Any]:
    job = load_example("partition.json")
    job["schema"][1]["meta"] = meta
    return job


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(_partition_with_meta(RESERVED)),
        json.dumps(_partition_with_meta(RESERVED)).replace('"__type__"', '"\\u005F_typ\\u0065__"'),
    ],
    ids=["literal", "escaped"],
)
def test_a_job_holding_a_reserved_object_is_rejected_reserved_key_naming_its_path(
    text: str,
) -> None:
    env = run("partition", text).as_dict()

    assert env["status"] == "rejected"
    assert env["error"]["code"] == "reserved_key"
    assert env["error"]["details"] == [{"path": "schema[1].meta", "message": RESERVED_MESSAGE}]


def test_a_reserved_object_is_rejected_in_a_job_given_as_data_too() -> None:
    env = run("partition", _partition_with_meta(RESERVED)).as_dict()

    assert env["error"]["code"] == "reserved_key"
    assert env["error"]["details"][0]["path"] == "schema[1].meta"


def test_an_object_with_a_third_key_beside_type_and_value_is_ordinary_data() -> None:
    env = run("partition", _partition_with_meta({**RESERVED, "note": "x"})).as_dict()

    assert env["status"] == "ok"


def test_text_holding_the_type_key_vouches_for_nothing_so_the_walk_looks() -> None:
    _, plain = edge.load_bounded(json.dumps({"a": {"type": 1}}))
    _, typed = edge.load_bounded(json.dumps({"a": {"__type__": 1}}))

    assert plain is not None
    assert plain.vouch(Limits())
    assert typed is not None
    assert not typed.vouch(Limits())


@pytest.mark.parametrize("sign", ["", "-"])
def test_an_integer_of_5000_digits_is_out_of_range_with_its_path_not_malformed(
    sign: str,
) -> None:
    exc = rejection('{"hardware": {"ram": ' + sign + "9" * 5000 + "}}")

    assert exc.code == "number_out_of_range"
    assert [p.path for p in exc.problems] == ["hardware.ram"]
    assert exc.problems[0].message == (
        "an integer of 5000 digits is outside the 64-bit range the engines compute in "
        "(-9223372036854775808 to 9223372036854775807)"
    )
    assert "set_int_max_str_digits" not in exc.message


@pytest.mark.parametrize("payload", ["hi", json.dumps(load_example("partition.json"))])
def test_a_decoded_string_is_no_job_and_is_not_decoded_again(payload: str) -> None:
    env = run("partition", payload, decoded=True).as_dict()

    assert env["status"] == "rejected"
    assert env["error"]["code"] == "invalid_job"
    assert env["error"]["message"] == "$: a partition job must be a JSON object, got str"


def test_a_python_caller_may_still_pass_the_json_text_of_a_job() -> None:
    env = run("partition", json.dumps(load_example("partition.json"))).as_dict()

    assert env["status"] == "ok"
