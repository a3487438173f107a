"""The Celery configuration, derived from :class:`config.settings.Settings`.

Every choice here is a reliability decision; the comments say which failure it prevents.
"""

from __future__ import annotations

from typing import Any

from kombu import Exchange, Queue
from redis.backoff import NoBackoff
from redis.retry import Retry

from apportion import kinds
from apportion.config.settings import Settings, url_scheme


def task_routes() -> dict[str, dict[str, str]]:
    """Task name → queue, from the kinds registry. Producers send by these names."""
    return {
        k.task_name: {"queue": k.queue, "routing_key": k.queue} for k in kinds.REGISTRY.values()
    }


# How long a producer's send_task (and a worker's own retry/result writes) keep trying
# while Redis is unreachable before raising: long enough to ride out a Redis restart
# (append-only file reload included), short enough that a caller is not left hanging.
# Intervals 0, 0.5, 1, 1, … s: about 20 s in all. Celery's own default gives up after
# ~0.6 s, so a send during a restart failed although Redis was back a second later.
PRODUCER_RETRY_POLICY: dict[str, float] = {
    "max_retries": 20,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 1,
}

# kombu's Redis and Sentinel transports with apportion's fixes and the gate in front of
# the pool (workers/broker/transport.py), for every scheme the settings accept.
FIXED_REDIS_TRANSPORT = "apportion.workers.broker.transport:Transport"
GATED_TRANSPORTS = {
    "redis": FIXED_REDIS_TRANSPORT,
    "rediss": FIXED_REDIS_TRANSPORT,
    "sentinel": "apportion.workers.broker.transport:SentinelTransport",
}


def broker_transport(url: str) -> str | None:
    """The gated transport for ``url``; None (kombu's own) only for ``memory://``, the
    embedded demo's in-process broker, which a worker refuses (workers/app.py)."""
    return GATED_TRANSPORTS.get(url_scheme(url))


def sentinel_options(settings: Settings) -> dict[str, Any]:
    """kombu's and Celery's Sentinel options, for the transport and the result backend
    (both ignore them for redis:// URLs)."""
    if settings.sentinel_master is None:
        return {}
    # A sentinel answers at once or not at all: no retries of its own (redis-py's default
    # retries each one three times with seconds of backoff), the next sentinel is asked.
    sentinel_kwargs: dict[str, Any] = {
        "socket_timeout": 5,
        "socket_connect_timeout": 5,
        "retry": Retry(NoBackoff(), 0),
    }
    if settings.sentinel_password is not None:
        sentinel_kwargs["password"] = settings.sentinel_secret
    return {"master_name": settings.sentinel_master, "sentinel_kwargs": sentinel_kwargs}


def connection_options(settings: Settings) -> dict[str, Any]:
    """Socket timeouts, TCP keepalive and health checks of a broker connection, as
    kombu's transport options name them (redis-py's own names)."""
    return {
        "socket_timeout": settings.reply_timeout,
        "socket_connect_timeout": settings.redis_connect_timeout,
        "socket_keepalive": True,
        "socket_keepalive_options": settings.keepalive_options(),
        "health_check_interval": settings.redis_health_check_interval,
    }


def gate_options(settings: Settings) -> dict[str, Any]:
    """The transport's own options (workers/broker/transport.py, GateOptions): the gate
    in front of the pool, quarantine and the dead-letter stream. ``tasks`` is filled in
    when a worker starts, with the tasks its app has (workers/app.py)."""
    return {
        "prefix": settings.stream_prefix,
        "limits": settings.limits.model_dump(),
        "max_message_bytes": settings.message_limit,
        "max_eta_seconds": settings.eta_limit,
        "tasks": None,
        "quarantine_after": settings.quarantine_after,
        # A delivery count must outlive the longest redelivery delay (a visibility
        # timeout), like the idempotency markers (checked in Settings).
        "count_ttl": settings.dedup_ttl,
        "dead_letter_maxlen": settings.dead_letter_maxlen,
        "dead_letter_max_age": settings.dead_letter_max_age,
        "dead_letter_copy_bytes": settings.dead_letter_copy_bytes,
    }


def celery_config(settings: Settings) -> dict[str, Any]:
    """The whole Celery configuration: one section per concern, each a reliability or
    cost decision explained where it is made."""
    return {
        **_broker(settings),
        **_results(settings),
        **_delivery(),
        **_routing(),
        **_monitoring(),
        "enable_utc": True,
        "timezone": "UTC",
    }


def _transport_options(settings: Settings) -> dict[str, Any]:
    return {
        # Redis has no real acks: an unacked message is redelivered after this long.
        # It must outlast the longest hard limit (checked in Settings).
        "visibility_timeout": settings.visibility_timeout,
        # Sweep for abandoned messages (worker SIGKILLed) often enough that a short
        # visibility timeout actually yields a prompt redelivery.
        "unacked_restore_interval": settings.unacked_restore_interval,
        "unacked_restore_throttle": 1,
        # The sweep holds a Redis lock for a few milliseconds. kombu lets it live 300 s:
        # a worker SIGKILLed while holding it would stop every redelivery for 5 minutes.
        "unacked_mutex_expire": 10,
        # A broker that vanishes without closing the TCP connection (failover, NAT or
        # firewall timeout) must not hang a publish or an ack forever: time out, and
        # let kombu's reconnection take over. Keepalive and health checks find dead
        # idle connections before a command does (the APPORTION_REDIS_SOCKET_TIMEOUT,
        # APPORTION_REDIS_CONNECT_TIMEOUT, APPORTION_REDIS_HEALTH_CHECK_INTERVAL and
        # APPORTION_REDIS_KEEPALIVE_SECONDS settings).
        **connection_options(settings),
        # Every message passes apportion's gate before kombu or Celery decode it.
        "apportion_gate": gate_options(settings),
        **sentinel_options(settings),
    }


def _broker(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.broker,
        "broker_transport": broker_transport(settings.broker),
        "broker_transport_options": _transport_options(settings),
        "visibility_timeout": settings.visibility_timeout,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # keep reconnecting; never exit on an outage
        # A reply by which Redis refuses (out of memory, read-only, MISCONF) is a
        # "channel error" to kombu, and Celery ends the worker on one unless told to
        # reconnect. The transport handles every refusal it meets itself
        # (workers/broker/transport.py, ``refused``); this is the backstop for any
        # other: the consumer reconnects with its backoff, the worker never exits.
        "broker_channel_error_retry": True,
        "task_publish_retry": True,
        "task_publish_retry_policy": dict(PRODUCER_RETRY_POLICY),
    }


def _results(settings: Settings) -> dict[str, Any]:
    return {
        "result_backend": settings.backend,
        # The Redis result backend's own pub/sub and locks read the same option;
        # retry_policy bounds its reconnection (a producer's send_task subscribes to
        # the result first, so this is what a send during an outage waits for).
        "result_backend_transport_options": {
            "visibility_timeout": settings.visibility_timeout,
            "retry_policy": dict(PRODUCER_RETRY_POLICY),
            **sentinel_options(settings),
        },
        # Storing a result while Redis restarts: wait for it instead of failing the
        # task. Without this a job whose event was already published ended as FAILURE
        # in the backend (Celery's read-before-write raised ConnectionError). Bounded:
        # ~15 retries with backoff up to 2 s, inside the task's time limits.
        "result_backend_always_retry": True,
        "result_backend_max_retries": 15,
        "result_backend_base_sleep_between_retries_ms": 100,
        "result_backend_max_sleep_between_retries_ms": 2000,
        "result_expires": settings.result_expires,
        # Celery's Redis backend waits 120 s for a reply by default, with no keepalive
        # or health check: a partition froze a worker storing a result, or a producer
        # waiting for one, for minutes.
        "redis_socket_timeout": settings.reply_timeout,
        "redis_socket_connect_timeout": settings.redis_connect_timeout,
        "redis_socket_keepalive": True,
        "redis_backend_health_check_interval": settings.redis_health_check_interval,
        # No job arguments in the result backend: with result_extended every result
        # keeps its job (a 50 MB job would stay a day in Redis next to its answer). The
        # backend stores the state and the envelope; Flower still shows each task's
        # name, state, worker, runtime and arguments, from the task events (the
        # producer's argsrepr, at most 1,024 characters), not from the backend.
        "result_extended": False,
    }


def _delivery() -> dict[str, Any]:
    return {
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
        # On a broker connection loss, let running jobs finish. Cancelling them (True)
        # loses jobs when the result backend is the same Redis: Celery records the
        # cancellation in the backend, which is down, so the terminated job is then
        # taken for a revoked one and acknowledged — never redelivered (seen in
        # tests/integration/test_faults_redis_restart.py). Finishing is safe: the
        # result event is published once per job_id, and a job whose ack could not be
        # sent is redelivered after the visibility timeout and publishes nothing new.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "worker_prefetch_multiplier": 1,
        # Celery's prefork pool, whose watch on its children's exits survives two of
        # them dying at once; without it such a worker exited on its next reconnection
        # to Redis (workers/prefork.py). Celery's CLI reads ``--pool prefork`` as this.
        "worker_pool": "apportion.workers.prefork:TaskPool",
    }


def _routing() -> dict[str, Any]:
    exchange = Exchange("apportion", type="direct")
    return {
        "task_queues": [Queue(q, exchange, routing_key=q) for q in kinds.queues()],
        "task_default_queue": "partition",
        "task_default_exchange": "apportion",
        "task_default_routing_key": "partition",
        # Per-task time limits are set on each task where it is registered (tasks/jobs.py).
        "task_routes": task_routes(),
    }


def _monitoring() -> dict[str, Any]:
    return {
        # Task events only while someone watches: a running Flower switches them on in
        # every worker by remote control (enable_events: at once, then every 5 s; a
        # worker keeps the switch across its reconnections), and `apportion worker -E`
        # keeps them on for `celery events` or a monitor that does not ask. A worker with
        # nobody watching would spend a large share of its throughput publishing three
        # events a job to nobody.
        "worker_send_task_events": False,
        # Flower lists a task from the worker's task-received event, arguments included;
        # the producer's task-sent event would only add the "sent" moment, for one more
        # PUBLISH (and its CPU) on every send.
        "task_send_sent_event": False,
        # STARTED in the result backend would cost every job one more read and write in
        # the pool child; Flower shows a running job from its task-started event, and
        # producers wait for the answer (PENDING until then), never for STARTED.
        "task_track_started": False,
        "worker_hijack_root_logger": False,
        # With task events on, buffered events are published 50 ms after the first rather
        # than on every turn of the event loop (one PUBLISH for many events;
        # workers/task_events.py).
        "worker_consumer": "apportion.workers.task_events:Consumer",
    }
