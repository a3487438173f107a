"""Canary: the kombu internals workers/broker/transport.py builds on are still there.

The transport subclasses kombu's Redis transport to fix seven faults (its docstring).
That needs members kombu does not promise to keep. Each is named here, so that a kombu
upgrade that renames or removes one fails with a message naming it, instead of a worker
that misbehaves under load.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import kombu
import pytest
from kombu.transport import redis as kombu_redis

# What the transport reads, overrides or calls, and why.
CHANNEL_INTERNALS = {
    "_create_client": "overridden: one sync client per connection pool",
    "_connparams": "overridden: rebuilds the pool from the info the channel opened with (fix 1)",
    "_brpop_start": "overridden: moves waiting messages into the taking list, or blocks "
    "in BLMOVE (fix 3)",
    "_brpop_sent_at": "set when the blocking take is sent: kombu's BRPOP health check (5.7) "
    "drops its connection when no reply comes in time",
    "brpop_timeout": "how long one blocking take waits",
    "_queue_cycle": "the round-robin over queues the take scripts follow",
    "_q_for_pri": "the Redis list name of a queue at a priority",
    "_get_message_priority": "a restored message goes back to its priority's list (fix 2)",
    "_tag_to_queue": "delivery tag → queue, for no-ack queues",
    "priority_steps": "the priority lists the take script looks at",
    "unacked_key": "the hash the settle script records messages in",
    "unacked_index_key": "the sorted set the settle script indexes them by",
    "global_keyprefix": "keys the take scripts touch would carry it: kombu's take instead",
    "sep": "queue names in list names",
    "conn_or_acquire": "a client for requeueing kept messages (fix 2)",
    "basic_consume": "overridden: requeues kept messages on reconnection",
    "basic_cancel": "overridden: forgets no-ack queues",
    "active_queues": "the queues the channel consumes from",
    "_brpop_read": "overridden: reads the BLMOVE reply, gates and settles the item (fix 5)",
    "_in_poll": "set while the blocking take is in flight, reset after its reply, as kombu "
    "does for BRPOP",
    "from_transport_options": "extended with the apportion_gate option (fix 5)",
    "client": "the client the gate's scripts and the dead letters use",
    "connection_errors": "what the gate re-raises so that kombu reconnects",
    "Message": "replaced by a message carrying the body the gate decoded",
    "pool": "the pool the take and ack scripts' own connection is made from",
    "_close_clients": "extended: closes the scripts' own connection",
    "maybe_refresh_binding_expiry": "overridden: a refusal by Redis (out of memory) is "
    "logged at debug, not with a traceback every second",
    "subclient": "overridden: the pub/sub client of a class whose reads never wait for a "
    "message (fix 7)",
    "_in_listen": "reset by kombu when the pub/sub connection drops, after which its next "
    "tick subscribes again (fix 7 leaves that to it)",
    "_flush_brpop_reauth": "called once a BRPOP reply is consumed, as kombu does: sends a "
    "pending streaming re-auth token on the BRPOP connection (looked up with getattr, so "
    "without this check its loss would go unnoticed)",
}
QOS_INTERNALS = {
    "append": "overridden: not written again when the pop script recorded the message",
    "ack": "overridden: also forgets the delivery count (fix 5)",
    "reject": "overridden: a requeue keeps the count only when a pool child died",
    "restore_unacked": "overridden: messages given back unstarted forget their count",
    "_remove_from_indices": "the ack and reject with a global key prefix (no scripts)",
    "restore_by_tag": "what a requeue does",
    "_delivered": "the deliveries restore_unacked gives back",
    "restore_visible": "overridden: the sweep's lock refused by Redis ends the sweep, not "
    "the worker",
}
TRANSPORT_INTERNALS = {
    "_deliver": "overridden: keeps a message whose delivery failed on a lost connection",
    "register_with_event_loop": "overridden: adds the wake-up socket (fix 4)",
    "Channel": "replaced by the fixed channel",
}


def test_kombu_is_the_version_the_transport_was_written_against() -> None:
    major, minor = (int(part) for part in kombu.__version__.split(".")[:2])
    assert (major, minor) == (5, 6) or (major, minor) == (5, 7), (
        f"kombu {kombu.__version__}: workers/broker/transport.py was checked against 5.6 and "
        "5.7; re-read kombu/transport/redis.py for the members named in this file"
    )


@pytest.mark.parametrize(("name", "why"), CHANNEL_INTERNALS.items())
def test_the_redis_channel_still_has(name: str, why: str) -> None:
    members = dict(inspect.getmembers(kombu_redis.Channel))
    # Instance attributes are set in __init__ of the channel or one of its bases.
    sources = "".join(
        inspect.getsource(cls)
        for cls in kombu_redis.Channel.__mro__
        if cls.__module__ != "builtins"
    )
    assert name in members or f"self.{name} =" in sources, (
        f"kombu.transport.redis.Channel no longer has {name!r} ({why})"
    )


@pytest.mark.parametrize(("name", "why"), QOS_INTERNALS.items())
def test_the_redis_qos_still_has(name: str, why: str) -> None:
    sources = "".join(
        inspect.getsource(cls) for cls in kombu_redis.QoS.__mro__ if cls.__module__ != "builtins"
    )
    assert hasattr(kombu_redis.QoS, name) or f"self.{name} =" in sources, (
        f"kombu.transport.redis.QoS no longer has {name!r} ({why})"
    )


# What workers/broker/requests.py's GatedRequest overrides or reads of Celery's Request.
REQUEST_INTERNALS = {
    "_context": "the task's request, which the backend's mark_as_done takes when the "
    "hard time limit's answer is stored",
    "revoked": "overridden: a job reaching a pool child",
    "on_failure": "overridden: a pool child that died running the job",
    "on_timeout": "overridden: the hard time limit's answer",
    "acknowledge": "the message is acknowledged once the hard time limit's answer is stored",
    "send_event": "the task-succeeded event for that answer",
    "message": "the kombu message, whose channel's QoS counts deliveries",
    "worker_pid": "the pool child a hard time limit found stopped (its job is requeued)",
    "reject": "requeues the job of a pool child that was stopped at its hard time limit",
}


@pytest.mark.parametrize(("name", "why"), REQUEST_INTERNALS.items())
def test_a_celery_request_still_has(name: str, why: str) -> None:
    from celery.worker.request import Request

    assert hasattr(Request, name), f"celery.worker.request.Request no longer has {name!r} ({why})"


def test_the_kombu_keys_health_and_metrics_read_are_named_as_kombu_names_them() -> None:
    from apportion.workers.redis.keys import UNACKED, queue_list

    assert kombu_redis.Channel.unacked_key == UNACKED
    channel = kombu_redis.Channel.__new__(kombu_redis.Channel)
    assert channel._q_for_pri("partition", 0) == queue_list("partition")


def test_celery_asks_a_request_whether_it_was_revoked_right_before_the_pool() -> None:
    # workers/broker/requests.py learns that a job reached a pool child from this call.
    from celery.worker.request import create_request_cls

    source = inspect.getsource(create_request_cls)
    body = source.split("def execute_using_pool", 1)[1].split("apply_async(", 1)[0]
    assert "self.revoked()" in body, (
        "celery's execute_using_pool no longer calls self.revoked() before the pool: "
        "GatedRequest.revoked no longer marks a hand-off (quarantine counting)"
    )


def test_a_kombu_message_decodes_its_body_once_into_a_cache_a_subclass_can_fill() -> None:
    # workers/broker/transport.py's Message fills _decoded_cache with the gate's decode,
    # which kombu's payload/decode() then return instead of decoding the body again.
    from kombu.message import Message

    source = inspect.getsource(Message.decode)
    assert "self._decoded_cache" in source, (
        "kombu's Message.decode no longer caches in _decoded_cache: the gate's decoded "
        "body is ignored and the main process decodes every job twice"
    )
    assert "_decoded_cache" in Message.__slots__ or "_decoded_cache" in inspect.getsource(
        Message.__init__
    )


def test_billiard_delivers_the_soft_time_limit_as_sigusr1() -> None:
    # workers/results/answers.py holds the soft limit after publishing by replacing the
    # SIGUSR1 handler of the pool child.
    import signal

    from billiard import pool

    assert pool.SIG_SOFT_TIMEOUT == signal.SIGUSR1


@pytest.mark.parametrize(("name", "why"), TRANSPORT_INTERNALS.items())
def test_the_redis_transport_still_has(name: str, why: str) -> None:
    assert hasattr(kombu_redis.Transport, name), (
        f"kombu.transport.redis.Transport no longer has {name!r} ({why})"
    )


SENTINEL_INTERNALS = {
    "_sentinel_managed_pool": "overridden: reads the list of sentinels kombu may have "
    "detached (fix 1)",
    "from_transport_options": "extended with the apportion_gate option",
    "connection_class": "each connection asks the sentinels where the master is",
}


@pytest.mark.parametrize(("name", "why"), SENTINEL_INTERNALS.items())
def test_the_sentinel_channel_still_has(name: str, why: str) -> None:
    assert hasattr(kombu_redis.SentinelChannel, name), (
        f"kombu.transport.redis.SentinelChannel no longer has {name!r} ({why})"
    )


def test_the_sentinel_transport_reads_the_sentinels_from_the_connection_info() -> None:
    # SentinelChannel._sentinel_managed_pool reads self.connection.client.alt: the list
    # the fixed channel restores for it (workers/broker/transport.py, fix 1).
    source = inspect.getsource(kombu_redis.SentinelChannel._sentinel_managed_pool)
    assert "self.connection.client.alt" in source


# What workers/prefork.py's pool overrides or reads of Celery's prefork pool.
ASYNPOOL_INTERNALS = {
    "_event_process_exit": "overridden: a child's exit is believed only when its sentinel "
    "is readable (the event may be another child's, whose descriptor number it reused)",
    "_track_child_process": "overridden: a child whose sentinel was forgotten is watched "
    "again when the pool registers with the event loop again",
    "_untrack_child_process": "forgets a child's sentinel copy (None) once its exit was seen",
    "register_with_event_loop": "calls _track_child_process for every child, after each "
    "reconnection to Redis",
}


@pytest.mark.parametrize(("name", "why"), ASYNPOOL_INTERNALS.items())
def test_celerys_async_pool_still_has(name: str, why: str) -> None:
    from celery.concurrency.asynpool import AsynPool

    assert callable(getattr(AsynPool, name, None)), (
        f"celery.concurrency.asynpool.AsynPool no longer has {name!r} ({why})"
    )


def test_celerys_async_pool_keeps_a_childs_sentinel_copy_in_sentinel_poll() -> None:
    # workers/prefork.py reads _sentinel_poll (None: forgotten; absent: Celery makes a
    # fresh os.dup of the Popen's sentinel) and the Popen's sentinel itself.
    from celery.concurrency.asynpool import AsynPool

    track = inspect.getsource(AsynPool._track_child_process)
    assert "fd = proc._sentinel_poll" in track
    assert "except AttributeError" in track
    assert "os.dup(proc._popen.sentinel)" in track
    assert "proc._sentinel_poll = None" in inspect.getsource(AsynPool._untrack_child_process)
    register = inspect.getsource(AsynPool.register_with_event_loop)
    assert "self._track_child_process(w, hub) for w in self._pool" in register


def test_celerys_prefork_pool_starts_the_pool_class_named_by_its_pool_attribute() -> None:
    # workers/prefork.py's TaskPool only replaces that attribute.
    from celery.concurrency import prefork
    from celery.concurrency.asynpool import AsynPool

    assert prefork.TaskPool.Pool is AsynPool
    assert "else self.Pool)" in inspect.getsource(prefork.TaskPool.on_start)


def test_kombu_reads_the_pubsub_client_only_through_parse_response_with_no_arguments() -> None:
    # Fix 7 (workers/broker/transport.py, _ListenPubSub) makes parse_response() read
    # without waiting; a kombu that read the pub/sub client another way, or asked for a
    # blocking read by argument, would bypass it.
    assert "c.parse_response()" in inspect.getsource(kombu_redis.Channel._receive_one)
    assert "self.subclient.parse_response()" in inspect.getsource(kombu_redis.Channel._poll_error)
    assert "client.pubsub()" in inspect.getsource(kombu_redis.Channel.subclient.func)


def test_redis_py_builds_a_plain_pubsub_the_transport_can_retype() -> None:
    # _ListenPubSub retypes what Redis.pubsub() returns (keeping the client's event
    # dispatcher) and reads with redis-py's non-blocking parse_response.
    import redis
    from redis.connection import Connection

    pubsub = redis.Redis(host="127.0.0.1", port=1).pubsub()
    assert type(pubsub) is redis.client.PubSub
    parameters = inspect.signature(redis.client.PubSub.parse_response).parameters
    assert list(parameters) == ["self", "block", "timeout"]
    assert isinstance(inspect.getattr_static(Connection, "is_connected"), property)
    assert "timeout" in inspect.signature(Connection.can_read).parameters
    assert Connection(socket_timeout=2).socket_timeout == 2


def test_a_pool_child_takes_a_tasks_arguments_from_the_body_not_from_the_request() -> None:
    # workers/broker/transport.py's MainProcessArgs leaves the job out of the request a
    # pool child unpickles: Celery's trace must read the arguments from the body.
    from celery import Celery
    from celery.app.trace import trace_task_ret

    app = Celery("canary", set_as_current=False)
    app.conf.task_ignore_result = True

    @app.task(name="canary.echo", shared=False)  # type: ignore[misc]
    def echo(job: Any) -> Any:
        return job

    body = json.dumps([[{"job_id": "from-the-body"}], {}, {}])
    request = {"id": "t-1", "task": "canary.echo", "args": [], "kwargs": {}}

    _, returned, _ = trace_task_ret(
        "canary.echo", "t-1", request, body, "application/json", "utf-8", app=app
    )

    assert "from-the-body" in returned, (
        "celery's trace no longer decodes a task's arguments from the message body in the "
        "pool child: MainProcessArgs (left out of the hand-off) would reach the task empty"
    )
