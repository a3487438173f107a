"""What the registered job tasks look like to Celery (no broker needed)."""

from __future__ import annotations

from celery.utils.saferepr import saferepr

from apportion.config.settings import Settings
from apportion.engine import Context, run
from apportion.workers.app import create_app
from apportion.workers.observe import PREVIEW_MAX, Answer

SMALL = {
    "job_id": "6f1c2a9e-4b7d-4c1e-9a53-2f0e8d7b1c44",
    "schema": [
        {"id": "os", "type": "vg", "contains": [{"id": "root"}, {"id": "swap"}]},
        {"id": "root", "type": "lv", "min_size": 5000, "mount": "/"},
        {"id": "swap", "type": "lv", "size": 2048},
    ],
    "hardware": {"disks": [{"id": "sda", "size": 40000}]},
}


def test_what_celery_shows_of_a_result_is_a_short_preview_led_by_the_status() -> None:
    app = create_app(Settings(), broker="memory://", backend="cache+memory://")
    task = app.tasks["apportion.partition"]
    envelope = run("partition", SMALL, Context()).as_dict()

    # What Celery logs and sends in task-succeeded (Flower's result text) for the value
    # a job task returns: an Answer holding the envelope (workers/observe.py).
    shown = saferepr(Answer(envelope), task.resultrepr_maxsize)

    assert shown.startswith("OK (job 6f1c2a9e-4b7d-4c1e-9a53-2f0e8d7b1c44, ")
    assert shown.endswith("result: disks, volume_groups, partitions")
    assert len(shown) <= PREVIEW_MAX
    assert "logical_volumes" not in shown
