"""What the registered job tasks look like to Celery (no broker needed)."""

from __future__ import annotations

from celery.utils.saferepr import saferepr

from apportion.config.settings import Settings
from apportion.engine import Context, run
from apportion.workers.app import create_app

SMALL = {
    "job_id": "6f1c2a9e-4b7d-4c1e-9a53-2f0e8d7b1c44",
    "schema": [
        {"id": "os", "type": "vg", "contains": [{"id": "root"}, {"id": "swap"}]},
        {"id": "root", "type": "lv", "min_size": 5000, "mount": "/"},
        {"id": "swap", "type": "lv", "size": 2048},
    ],
    "hardware": {"disks": [{"id": "sda", "size": 40000}]},
}


def test_the_success_log_shows_a_uuid_job_id_kind_and_status_and_not_the_whole_result() -> None:
    app = create_app(Settings(), broker="memory://", backend="cache+memory://")
    task = app.tasks["apportion.partition"]
    envelope = run("partition", SMALL, Context()).as_dict()

    # What Celery logs and sends in task-succeeded for a return value.
    shown = saferepr(envelope, task.resultrepr_maxsize)

    assert shown.startswith(
        "{'job_id': '6f1c2a9e-4b7d-4c1e-9a53-2f0e8d7b1c44', 'kind': 'partition', 'status': 'ok'"
    )
    assert len(shown) < 130
    assert "logical_volumes" not in shown
