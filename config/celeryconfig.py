"""The Celery configuration, derived from :class:`config.settings.Settings`.

Every choice here is a reliability decision; the comments say which failure it prevents.
"""

from __future__ import annotations

from typing import Any

from kombu import Exchange, Queue

from config.settings import QUEUES, Settings

# Task name → queue. Producers in any language send by these names (SPEC.md §2).
TASK_QUEUES: dict[str, str] = {
    "apportion.auto_attach": "attach",
    "apportion.guest_host_attach": "attach",
    "apportion.launch_select": "launch",
    "apportion.partition": "partition",
    "apportion.launch_outcome": "events",
}

# Queues whose jobs can run long: prefetching more than one message there would let a
# busy worker sit on jobs another idle worker could run (and lose them to redelivery
# delays if it dies).
LONG_QUEUES = ("attach", "launch", "partition")


def task_time_limits(settings: Settings) -> dict[str, dict[str, float]]:
    """Per-task soft/hard limits, taken from the task's queue."""
    out = {}
    for name, queue in TASK_QUEUES.items():
        limit = settings.time_limits.for_queue(queue)  # type: ignore[arg-type]
        out[name] = {"soft_time_limit": limit.soft, "time_limit": limit.hard}
    return out


def celery_config(settings: Settings) -> dict[str, Any]:
    vt = settings.visibility_timeout
    transport_options = {
        # Redis has no real acks: an unacked message is redelivered after this long.
        # It must outlast the longest hard limit (checked in Settings).
        "visibility_timeout": vt,
        # Sweep for abandoned messages (worker SIGKILLed) often enough that a short
        # visibility timeout actually yields a prompt redelivery.
        "unacked_restore_interval": settings.unacked_restore_interval,
        "unacked_restore_throttle": 1,
    }
    exchange = Exchange("apportion", type="direct")
    return {
        "broker_url": settings.broker,
        "result_backend": settings.backend,
        "broker_transport_options": dict(transport_options),
        # The Redis result backend's own pub/sub and locks read the same option.
        "result_backend_transport_options": {"visibility_timeout": vt},
        "visibility_timeout": vt,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # keep reconnecting; never exit on an outage
        # JSON only. Pickle would let any producer run code in our workers.
        "task_serializer": "json",
        "result_serializer": "json",
        "event_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        # A job is acknowledged only after it finished; a worker that dies mid-job
        # (SIGKILL, OOM) gives it back instead of losing it.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # On a broker connection loss, tasks whose ack can no longer be sent will be
        # redelivered; cancel them instead of finishing twice.
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "worker_prefetch_multiplier": 1,
        "task_queues": [Queue(q, exchange, routing_key=q) for q in QUEUES],
        "task_default_queue": "partition",
        "task_default_exchange": "apportion",
        "task_default_routing_key": "partition",
        "task_routes": {name: {"queue": q, "routing_key": q} for name, q in TASK_QUEUES.items()},
        "task_annotations": task_time_limits(settings),
        # Flower and `celery events` need both.
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "task_track_started": True,
        "result_expires": settings.result_expires,
        # Store task name/args with the result so Flower and operators can see them.
        "result_extended": True,
        "worker_hijack_root_logger": False,
        "enable_utc": True,
        "timezone": "UTC",
    }
