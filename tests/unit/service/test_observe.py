"""What the worker shows operators about a job: Flower's preview of the envelope, the
envelope itself stored unchanged, one log line per job, JSON logs."""

from __future__ import annotations

import inspect
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS
from celery.utils.saferepr import saferepr
from hypothesis import given, settings
from hypothesis import strategies as st
from kombu.utils.json import dumps

from apportion.engine import run
from apportion.workers import observe
from apportion.workers.logs import FIELDS, DropPerJobLines, JsonFormatter
from apportion.workers.observe import PREVIEW_MAX, Answer, job_line, preview, sent_at
from tests.conftest import load_example

REJECTED = run("partition", {"job_id": "bad-1", "schema": [], "hardware": {}}).as_dict()
OK = run("partition", load_example("partition.json")).as_dict()


def test_a_rejected_job_previews_as_rejected_with_its_code_message_and_job() -> None:
    text = preview(REJECTED)

    assert text.startswith("REJECTED invalid_job: schema: ")
    assert "(job bad-1, " in text


def test_an_ok_job_previews_its_job_time_and_result_fields() -> None:
    assert preview(OK).startswith("OK (job example-partition-1, ")
    assert preview(OK).endswith("result: disks, volume_groups, partitions")


def test_a_preview_is_one_short_line_whatever_the_message() -> None:
    envelope = dict(REJECTED, error={"code": "x", "message": "y\n" * 500, "details": []})

    assert len(preview(envelope)) <= PREVIEW_MAX


def test_celery_shows_an_answer_as_its_preview_and_stores_the_envelope_unchanged() -> None:
    answer = Answer(REJECTED)

    # Celery's repr of a return value: Flower's result text and the "succeeded" log line.
    assert saferepr(answer, PREVIEW_MAX) == preview(REJECTED)
    # What the result backend stores (kombu's JSON encoder) is the envelope itself.
    assert json.loads(dumps({"result": answer})) == {"result": REJECTED}


def test_the_job_line_names_the_job_and_its_times_and_carries_them_as_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="apportion.jobs")

    job_line(REJECTED, "task-1", started=None, sent=1000.0, now=1000.25)

    (record,) = caplog.records
    assert record.getMessage().startswith("job bad-1 partition rejected invalid_job: schema: ")
    assert record.getMessage().endswith("end-to-end 250.0 ms) task task-1")
    fields: dict[str, Any] = getattr(record, FIELDS)
    assert fields["job_id"] == "bad-1"
    assert fields["status"] == "rejected"
    assert fields["code"] == "invalid_job"
    assert fields["end_to_end_ms"] == 250.0
    assert fields["task_id"] == "task-1"


def test_json_logs_are_one_object_per_record_with_a_job_lines_fields() -> None:
    record = logging.LogRecord("apportion.jobs", logging.INFO, __file__, 1, "job %s", ("a",), None)
    setattr(record, FIELDS, {"job_id": "a", "status": "ok", "engine_ms": 1.5})

    line = json.loads(JsonFormatter().format(record))

    assert line["message"] == "job a"
    assert line["level"] == "INFO"
    assert line["logger"] == "apportion.jobs"
    assert (line["job_id"], line["status"], line["engine_ms"]) == ("a", "ok", 1.5)


def test_celerys_per_task_lines_are_dropped_at_info_and_nothing_else() -> None:
    drop = DropPerJobLines()

    def record(level: int, msg: str) -> logging.LogRecord:
        return logging.LogRecord("celery.app.trace", level, __file__, 1, msg, None, None)

    assert not drop.filter(record(logging.INFO, LOG_SUCCESS))
    assert not drop.filter(record(logging.INFO, LOG_RECEIVED))
    assert drop.filter(record(logging.ERROR, LOG_SUCCESS))
    assert drop.filter(record(logging.INFO, "Connected to redis://…"))


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (SimpleNamespace(apportion_sent_at=12.5), 12.5),
        (SimpleNamespace(headers={"apportion_sent_at": 7}), 7.0),
        (SimpleNamespace(apportion_sent_at="soon"), None),
        (SimpleNamespace(apportion_sent_at=True), None),
        (SimpleNamespace(), None),
        (None, None),
    ],
)
def test_the_sent_at_header_is_read_only_when_it_is_a_number(
    request_: Any, expected: float | None
) -> None:
    assert sent_at(request_) == expected


@pytest.mark.parametrize(
    ("loglevel", "keep_env", "quiet"),
    [(logging.INFO, "", True), (logging.DEBUG, "", False), (logging.INFO, "true", False)],
)
def test_celerys_per_task_loggers_are_quiet_at_info_so_celery_never_makes_the_lines(
    loglevel: int, keep_env: str, quiet: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apportion.workers.logs import configure

    monkeypatch.setenv("APPORTION_LOG_CELERY_TASK_LINES", keep_env)
    names = ("celery.worker.strategy", "celery.app.trace")
    saved = [(logging.getLogger(n).level, list(logging.getLogger(n).filters)) for n in names]
    try:
        configure(logging.getLogger("apportion-test"), loglevel)

        for name in names:
            # Celery checks isEnabledFor(INFO) once, when it builds a task's strategy and
            # tracer; not quiet, the loggers follow the worker's level.
            level = logging.getLogger(name).level
            assert level == (logging.WARNING if quiet else logging.NOTSET), name
    finally:
        for name, (level, filters) in zip(names, saved, strict=True):
            logging.getLogger(name).setLevel(level)
            logging.getLogger(name).filters[:] = filters


def _job_line_as_logger_info_writes_it(
    envelope: dict[str, Any],
    task_id: str | None,
    started: float | None,
    sent: float | None,
    now: float,
    monotonic: float,
) -> None:
    """The job line as a plain ``Logger.info`` call writes it (the reference)."""
    error = envelope.get("error") or {}
    fields: dict[str, Any] = {
        "job_id": envelope.get("job_id"),
        "kind": envelope.get("kind"),
        "status": envelope.get("status"),
        "code": error.get("code"),
        "engine_ms": envelope.get("elapsed_ms"),
        "task_ms": None if started is None else round((monotonic - started) * 1000, 3),
        "end_to_end_ms": None if sent is None else round((now - sent) * 1000, 3),
        "warnings": len(envelope.get("warnings") or ()),
        "task_id": task_id,
    }
    times = ", ".join(
        f"{name} {fields[key]:.1f} ms"
        for name, key in (
            ("engine", "engine_ms"),
            ("task", "task_ms"),
            ("end-to-end", "end_to_end_ms"),
        )
        if isinstance(fields[key], int | float)
    )
    why = f" {error.get('code')}: {str(error.get('message'))[:300]}" if error else ""
    more = f", {fields['warnings']} warnings" if fields["warnings"] else ""
    logging.getLogger("apportion.jobs").info(
        "job %s %s %s%s (%s%s) task %s",
        fields["job_id"],
        fields["kind"],
        fields["status"],
        why,
        times,
        more,
        task_id,
        extra={FIELDS: fields},
    )


def _record_view(record: logging.LogRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "levelno": record.levelno,
        "msg": record.msg,
        "args": record.args,
        "message": record.getMessage(),
        "exc_info": record.exc_info,
        "stack_info": record.stack_info,
        "process": record.process,
        "processName": record.processName,
        "fields": list(getattr(record, FIELDS).items()),
    }


_NUMBERS = st.none() | st.integers(-(10**6), 10**6) | st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(
    status=st.sampled_from(["ok", "rejected", "infeasible", None]),
    error=st.none()
    | st.fixed_dictionaries({"code": st.text(max_size=20), "message": st.text(max_size=400)}),
    elapsed=_NUMBERS,
    warnings=st.lists(st.just({"path": "x", "message": "y"}), max_size=3),
    job_id=st.none() | st.text(max_size=30),
    task_id=st.none() | st.text(max_size=30),
    started=st.none() | st.floats(0, 1e6),
    sent=st.none() | st.floats(0, 1e6),
    now=st.floats(0, 1e6),
)
def test_the_job_line_is_the_record_logger_info_makes(
    status: str | None,
    error: dict[str, str] | None,
    elapsed: float | None,
    warnings: list[dict[str, str]],
    job_id: str | None,
    task_id: str | None,
    started: float | None,
    sent: float | None,
    now: float,
) -> None:
    envelope: dict[str, Any] = {"job_id": job_id, "kind": "partition", "status": status}
    envelope.update(elapsed_ms=elapsed, warnings=warnings, error=error)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("apportion.jobs")
    keep, level = Keep(), logger.level
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    clock = SimpleNamespace(monotonic=lambda: 2e6)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(observe, "time", clock)
            job_line(envelope, task_id, started, sent, now)
        _job_line_as_logger_info_writes_it(envelope, task_id, started, sent, now, 2e6)
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)

    ours, reference = records
    assert _record_view(ours) == _record_view(reference)
    # Where the line comes from, as logging's findCaller would name it: observe.py's
    # job_line, on a line of its own body.
    lines, first = inspect.getsourcelines(job_line)
    assert (ours.pathname, ours.filename, ours.module) == (
        observe.__file__,
        "observe.py",
        "observe",
    )
    assert ours.funcName == "job_line"
    assert first < ours.lineno < first + len(lines)


def test_the_job_line_goes_through_the_loggers_level_and_filters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("apportion.jobs")
    caplog.set_level(logging.WARNING, logger="apportion.jobs")
    job_line(OK, "task-1", started=None, sent=None, now=0.0)
    assert caplog.records == []

    caplog.set_level(logging.INFO, logger="apportion.jobs")
    drop_all = logging.Filter("nothing")
    logger.addFilter(drop_all)
    try:
        job_line(OK, "task-1", started=None, sent=None, now=0.0)
    finally:
        logger.removeFilter(drop_all)
    assert caplog.records == []

    job_line(OK, "task-1", started=None, sent=None, now=0.0)
    (record,) = caplog.records
    assert record.getMessage().startswith("job example-partition-1 partition ok (engine ")
