"""``apportion health``: is the system able to answer jobs right now?

One pass, bounded in time: Redis answers a PING (no reconnect loops: a down Redis is
reported at once); the workers that answer Celery's ``active_queues`` broadcast
within the timeout, per queue; each queue's depth; and per result stream and consumer
group, the pending entries, the lag and the age of the oldest entry read but never
acknowledged (a stuck subscriber). Redis access goes through
:func:`apportion.workers.redis.client.client_for` and the broadcast through the
producer app, so whatever URL the settings name (Sentinel, TLS) is honoured here too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from apportion import kinds
from apportion.config.settings import Settings
from apportion.workers.deadline import DeadlineExceeded, deadline
from apportion.workers.redis.client import (
    REDIS_ERRORS,
    client_for,
    error_text,
    is_outage,
    redact_url,
    refusal,
)
from apportion.workers.redis.keys import UNACKED, Keys, queue_list

# What reading Redis can end in: an error, or no answer within the timeout.
_UNANSWERED: tuple[type[BaseException], ...] = (*REDIS_ERRORS, DeadlineExceeded)


@dataclass
class GroupHealth:
    consumers: int
    pending: int
    lag: int | None  # entries not yet delivered to the group (Redis 7+; None if unknown)
    oldest_pending_age_s: float | None


@dataclass
class StreamHealth:
    length: int
    groups: dict[str, GroupHealth] = field(default_factory=dict)
    # Entries the age cap removed before a group read them, per group, within the last
    # APPORTION_STREAM_MAX_AGE (workers/redis/trim.py).
    trimmed_unread: dict[str, int] = field(default_factory=dict)


@dataclass
class Health:
    redis_url: str
    redis_ok: bool = False
    redis_error: str | None = None
    redis_version: str | None = None
    queue_depth: dict[str, int] = field(default_factory=dict)
    unacked: int = 0
    workers: dict[str, list[str]] = field(default_factory=dict)  # queue -> worker names
    responders: list[str] = field(default_factory=list)  # every worker that answered
    streams: dict[str, StreamHealth] = field(default_factory=dict)
    dead_letters: int = 0
    problems: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    # Why the workers could not be asked (the broadcast failed), None when they were.
    workers_error: str | None = None

    @property
    def healthy(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "problems": self.problems,
            "redis": {
                "url": self.redis_url,
                "ok": self.redis_ok,
                "version": self.redis_version,
                "error": self.redis_error,
            },
            "queues": {
                q: {"depth": self.queue_depth.get(q, 0), "workers": self.workers.get(q, [])}
                for q in sorted(set(self.queue_depth) | set(self.workers))
            },
            "unacked": self.unacked,
            "streams": {
                name: {
                    "length": s.length,
                    "groups": {g: vars(h) for g, h in s.groups.items()},
                    "trimmed_unread": s.trimmed_unread,
                }
                for name, s in self.streams.items()
            },
            "dead_letters": self.dead_letters,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def entry_age_s(entry_id: str | bytes, now: float) -> float:
    """Seconds since a stream entry id's time part (``<ms>-<seq>``) was written."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return max(0.0, now - int(text.split("-", 1)[0]) / 1000.0)


def stream_health(
    client: redis.Redis, stream: str, now: float, trimmed: str | None = None
) -> StreamHealth | None:
    """Length and consumer groups of ``stream``; None when it does not exist yet.
    ``trimmed``: the key of its :meth:`Keys.trimmed_unread` counts, if wanted."""
    if not client.exists(stream):
        return None
    out = StreamHealth(length=int(client.xlen(stream)))
    if trimmed is not None:
        counts: Any = client.hgetall(trimmed)
        out.trimmed_unread = {_text(g): int(n) for g, n in counts.items()}
    for info in client.xinfo_groups(stream):
        name = _text(info["name"])
        pending = int(info["pending"])
        oldest = None
        if pending:
            summary = client.xpending(stream, name)
            if summary.get("min"):
                oldest = round(entry_age_s(summary["min"], now), 3)
        lag = info.get("lag")
        out.groups[name] = GroupHealth(
            consumers=int(info["consumers"]),
            pending=pending,
            lag=None if lag is None else int(lag),
            oldest_pending_age_s=oldest,
        )
    return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def server_version(client: redis.Redis) -> str | None:
    """The server's version, from ``HELLO`` (no arguments: the protocol stays as it is).

    Not ``INFO``: it is in ``@dangerous``, which the ACL recipes of docs/operations.md
    deny; ``HELLO`` is a connection command every user may run. A server that refuses it
    (Redis before 6) is asked for a ``PING`` instead, and its version is not reported.
    """
    try:
        reply = client.execute_command("HELLO")
    except redis.ResponseError:
        client.ping()
        return None
    if isinstance(reply, list | tuple):
        reply = dict(zip(reply[::2], reply[1::2], strict=False))
    version = reply.get(b"version", reply.get("version")) if isinstance(reply, dict) else None
    return None if version is None else _text(version)


def read_redis(health: Health, client: redis.Redis, keys: Keys, queues: Sequence[str]) -> None:
    """Everything ``health`` reads from Redis itself (raises redis-py's errors)."""
    health.redis_version = server_version(client)
    health.redis_ok = True
    for queue in queues:
        health.queue_depth[queue] = int(client.llen(queue_list(queue)))
    health.unacked = int(client.hlen(UNACKED))
    now = time.time()
    for stream in [*keys.all_results_streams(), keys.launch_failures_stream]:
        found = stream_health(client, stream, now, keys.trimmed_unread(stream))
        if found is not None:
            health.streams[stream] = found
    if client.exists(keys.dead_letters_stream):
        health.dead_letters = int(client.xlen(keys.dead_letters_stream))


def read_workers(settings: Settings, timeout: float) -> tuple[dict[str, list[str]], list[str]]:
    """(queue -> names of the workers consuming it, every worker that answered), from the
    workers answering Celery's ``active_queues`` broadcast within ``timeout``.

    Every worker is asked, with or without ``--node``: the node is one more requirement
    on top of the rest, so asking it alone would report every queue it does not consume
    as having no worker."""
    from apportion.workers.producer import producer_app

    app = producer_app(settings)
    try:
        replies = app.control.inspect(timeout=timeout).active_queues() or {}
    finally:
        app.close()
    out: dict[str, list[str]] = {}
    for worker, queues in sorted(replies.items()):
        for queue in queues or ():
            out.setdefault(str(queue.get("name")), []).append(worker)
    return out, sorted(replies)


@dataclass(frozen=True)
class Thresholds:
    max_queue_depth: int | None = None
    max_pending_age_s: float | None = None


def judge(
    health: Health,
    queues: Sequence[str],
    node: str | None,
    limits: Thresholds,
    *,
    subscribers: bool = True,
) -> None:
    """Fill ``health.problems``: everything that makes the system unable to answer.

    ``subscribers``: entries lost to a consumer group count too. Not when the check is
    narrowed to some queues (``--queue``, a worker's container health check): a
    subscriber's loss is the deployment's problem, and restarting workers for it would
    only make things worse; it is still in the report."""
    if not health.redis_ok:
        health.problems.append(f"Redis unreachable at {health.redis_url}: {health.redis_error}")
        return
    _judge_workers(health, node)
    _judge_queues(health, queues, limits)
    if subscribers:
        _judge_trimmed(health)
    _judge_pending(health, limits)


def _judge_workers(health: Health, node: str | None) -> None:
    """The workers could not be asked, or ``node`` is missing or idle."""
    if health.workers_error is not None:
        health.problems.append(f"could not ask the workers: {health.workers_error}")
    elif node is not None and node not in health.responders:
        health.problems.append(f"worker {node} did not answer")
    elif node is not None and not any(node in names for names in health.workers.values()):
        health.problems.append(f"worker {node} answered but consumes no queue")


def _judge_queues(health: Health, queues: Sequence[str], limits: Thresholds) -> None:
    """Each checked queue: consumed by some worker, and not deeper than allowed."""
    for queue in queues:
        if health.workers_error is None and not health.workers.get(queue):
            health.problems.append(f"no worker consumes queue {queue!r}")
        depth = health.queue_depth.get(queue, 0)
        if limits.max_queue_depth is not None and depth > limits.max_queue_depth:
            health.problems.append(
                f"queue {queue!r} holds {depth} jobs (more than {limits.max_queue_depth})"
            )


def _judge_trimmed(health: Health) -> None:
    """Entries a consumer group lost: trimmed before it read them."""
    for stream, found in health.streams.items():
        for group, lost in sorted(found.trimmed_unread.items()):
            health.problems.append(
                f"{stream} group {group}: {lost} entries were trimmed (older than "
                "APPORTION_STREAM_MAX_AGE) before the group read them"
            )


def _judge_pending(health: Health, limits: Thresholds) -> None:
    """Entries delivered to a group and left unacknowledged longer than allowed."""
    if limits.max_pending_age_s is None:
        return
    for stream, found in health.streams.items():
        for group, g in found.groups.items():
            age = g.oldest_pending_age_s
            if age is not None and age > limits.max_pending_age_s:
                health.problems.append(
                    f"{stream} group {group}: an entry has waited {age:.0f} s for its ack"
                )


def check(
    settings: Settings,
    *,
    queues: Sequence[str] | None = None,
    node: str | None = None,
    timeout: float = 1.0,
    thresholds: Thresholds = Thresholds(),
) -> Health:
    started = time.monotonic()
    checked = list(queues or kinds.queues())
    health = Health(redis_url=redact_url(settings.redis_url))
    client = client_for(settings, timeout=timeout, retries=0)
    try:
        # Every queue's depth is reported; only the checked ones can make it unhealthy.
        # A Redis that accepts connections and never answers (stopped, a partition)
        # would hold each of redis-py's connection retries for the timeout.
        with deadline(timeout + 0.5):
            read_redis(health, client, Keys(settings.stream_prefix), kinds.queues())
    except redis.exceptions.NoPermissionError as exc:
        health.redis_ok = True
        health.problems.append(denied(exc))
    except _UNANSWERED as exc:
        health.redis_error = error_text(exc)
        health.redis_ok = health.redis_ok and not (
            isinstance(exc, DeadlineExceeded) or is_outage(exc)
        )
    finally:
        client.close()
    if health.problems:  # a permission denied: the rest would only report it again
        return _done(health, started)
    if health.redis_ok:
        # The broadcast writes to Redis (its reply queue): a Redis that answers but
        # refuses writes (out of memory, read-only) fails it, which is reported.
        try:
            # Bounded: connecting (a TLS handshake on a busy host takes a while), then
            # the broadcast's own wait of ``timeout``.
            with deadline(timeout + max(timeout, settings.redis_connect_timeout)):
                health.workers, health.responders = read_workers(settings, timeout)
        except redis.exceptions.NoPermissionError as exc:
            health.problems.append(denied(exc))
            return _done(health, started)
        # Whatever kombu wraps it in: reported, never a traceback.
        except (Exception, DeadlineExceeded) as exc:
            why = refusal(exc)
            health.workers_error = (
                f"Redis answered but refused: {why}" if why is not None else error_text(exc)
            )
    judge(health, checked, node, thresholds, subscribers=not queues)
    return _done(health, started)


def denied(exc: Exception) -> str:
    """Reachable, but the ACL user may not read what health reads: a problem of its own,
    named, not "unreachable" (docs/operations.md has each role's ACL)."""
    return (
        f"the Redis user may not run what health reads ({error_text(exc)}); give it the "
        "worker's ACL of docs/operations.md"
    )


def _done(health: Health, started: float) -> Health:
    health.elapsed_s = time.monotonic() - started
    return health
