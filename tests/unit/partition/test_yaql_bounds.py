"""yaql is bounded in length, iterations, memory and wall time (docs/contract.md#limits).

Each bomb must be stopped within a couple of seconds with a failure naming the
expression; the worker (this test process) keeps serving afterwards.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from apportion import yaql_eval
from apportion.engine import Context, run
from apportion.errors import Rejected
from apportion.limits import Limits

from .support import disks, in_vg, lv, partition, payload

# Each bomb must stop within its deadline: measured alone, not beside the rest of the suite.
pytestmark = pytest.mark.serial

LIMITS = Limits(yaql_timeout_seconds=1.0)
HARDWARE = {"ram": 2048, "disks": [{"id": "sda", "size": 100, "type": "hdd"}]}


def _evaluate(expression: str, limits: Limits = LIMITS) -> tuple[yaql_eval.BatchResult, float]:
    started = time.monotonic()
    result = yaql_eval.evaluate_batch(
        {"before": "$.ram", "schema[3].size": expression, "after": "1 + 1"}, HARDWARE, limits
    )
    return result, time.monotonic() - started


def _failure(result: yaql_eval.BatchResult) -> yaql_eval.YaqlFailure:
    assert len(result.failures) == 1, result.failures
    return result.failures[0]


@pytest.mark.parametrize(
    "bomb",
    [
        "range(0, 100000000).len()",  # Python-level loop, never trips limitIterators
        "pow(10, pow(10, 8))",  # C-level bignum work: uninterruptible in-process
        "regex('(a+)+$').matches('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!')",
    ],
    ids=["long-loop", "bignum", "regex-backtracking"],
)
def test_a_runaway_expression_is_killed_at_the_deadline(bomb: str) -> None:
    result, elapsed = _evaluate(bomb)
    failure = _failure(result)
    assert (failure.name, failure.code) == ("schema[3].size", yaql_eval.TIMEOUT)
    assert failure.message == "yaql evaluation exceeded the time limit of 1 s"
    assert elapsed < 2.5
    # `before` and `after` are proven cheap and evaluated in-process: only the bomb
    # went to the child that was killed.
    assert result.values == {"before": 2048, "after": 2}


def test_a_huge_string_build_runs_out_of_its_memory_allowance() -> None:
    # Every piece passes yaql's own quota; the joined 800 MB string hits RLIMIT_AS.
    bomb = "let(s => 'x' * 90000) -> range(0, 9000).select($s).join('').len()"
    # A time limit far above what the bomb needs: on a starved machine the child's fork
    # and start must not reach it first, since this test is about the memory allowance.
    result, _ = _evaluate(bomb, Limits(yaql_max_memory_mib=64, yaql_timeout_seconds=60.0))
    failure = _failure(result)
    assert (failure.name, failure.code) == ("schema[3].size", yaql_eval.MEMORY)
    assert failure.message == (
        "yaql expression ran out of its memory allowance of 64 MiB "
        "(raise APPORTION_LIMITS__YAQL_MAX_MEMORY_MIB)"
    )
    assert result.values == {"before": 2048, "after": 2}  # the child carried on


def test_a_single_huge_string_trips_yaqls_memory_quota_at_once() -> None:
    result, _ = _evaluate("'x' * 200000")
    assert (_failure(result).code, _failure(result).message) == (
        yaql_eval.MEMORY,
        "yaql expression exceeded yaql's memory quota (raise APPORTION_LIMITS__YAQL_MEMORY_QUOTA)",
    )


def test_a_huge_collection_trips_the_iteration_limit() -> None:
    result, elapsed = _evaluate("range(0, 100000000)")
    failure = _failure(result)
    assert failure.code == yaql_eval.ITERATIONS
    assert "exceeds 10000 elements" in failure.message
    assert elapsed < 1.0


def test_a_syntax_error_is_reported_without_evaluating() -> None:
    result, _ = _evaluate("$.ram +")
    failure = _failure(result)
    assert (failure.name, failure.code) == ("schema[3].size", yaql_eval.SYNTAX)
    assert failure.message.startswith("yaql syntax error")


def test_an_expression_over_the_length_limit_is_not_parsed() -> None:
    result, _ = _evaluate("1 + " * 2000 + "1", Limits(yaql_max_expression_length=4096))
    failure = _failure(result)
    assert (failure.code, failure.message) == (
        yaql_eval.TOO_LONG,
        "yaql expression of 8001 characters exceeds the limit of 4096 "
        "(raise APPORTION_LIMITS__YAQL_MAX_EXPRESSION_LENGTH)",
    )


def test_a_result_that_is_not_json_data_is_a_failure() -> None:
    result, _ = _evaluate("float('nan')")
    assert (_failure(result).code, _failure(result).message) == (
        yaql_eval.NOT_DATA,
        "the result is not a finite number",
    )


def test_the_clock_is_not_available_to_expressions() -> None:
    result, _ = _evaluate("now()")
    assert _failure(result).code == yaql_eval.ERROR
    assert 'Unknown function "now"' in _failure(result).message


def test_values_come_back_as_plain_data_under_their_names() -> None:
    result = yaql_eval.evaluate_batch(
        {
            "a": "$.ram * 2",
            "b": '$.disks.where($.type = "hdd")',
            "c": '$.disks.where($.type = "hdd")',
            "d": "set(1, 2)",
            "e": "$.ram / 3",
        },
        HARDWARE,
        LIMITS,
    )
    assert result.ok
    assert result.values == {
        "a": 4096,
        "b": [{"id": "sda", "size": 100, "type": "hdd"}],
        "c": [{"id": "sda", "size": 100, "type": "hdd"}],
        "d": [1, 2],
        "e": 682,  # yaql divides integers as integers, as upstream
    }


def test_raise_if_failed_rejects_with_every_failing_path() -> None:
    result = yaql_eval.evaluate_batch({"x.size": "1 +", "y.size": "1 +", "z": "1"}, {}, LIMITS)
    with pytest.raises(Rejected) as caught:
        result.raise_if_failed()
    assert [p.path for p in caught.value.problems] == ["x.size", "y.size"]
    assert caught.value.code == "bad_expression"


def _bomb_job(expression: str) -> dict[str, Any]:
    schema = [*in_vg(lv("root"), lv("swap")), partition("p", size="yaql=" + expression)]
    return payload(schema, disks(("sda", 100)), ram=1024)


def test_a_partition_job_with_a_runaway_size_is_rejected_naming_the_field() -> None:
    ctx = Context(limits=LIMITS)
    started = time.monotonic()
    envelope = run("partition", _bomb_job("range(0, 100000000).len()"), ctx)
    assert time.monotonic() - started < 2.5
    assert envelope.status == "rejected"
    assert envelope.error is not None
    assert [(d.path, d.message) for d in envelope.error.details] == [
        (
            "schema[3].size",
            "yaql evaluation exceeded the time limit of 1 s "
            "(raise APPORTION_LIMITS__YAQL_TIMEOUT_SECONDS)",
        )
    ]
    # The same worker still serves the next job.
    assert run("partition", _bomb_job("$.ram / 64"), ctx).status == "ok"


def test_a_caller_may_set_the_batch_deadline() -> None:
    started = time.monotonic()
    result = yaql_eval.evaluate_batch(
        {"slow": "range(0, 100000000).len()"}, {}, LIMITS, timeout_seconds=0.3
    )
    assert time.monotonic() - started < 0.9
    assert [(f.code, f.message) for f in result.failures] == [
        (yaql_eval.TIMEOUT, "yaql evaluation exceeded the time limit of 0.3 s")
    ]
