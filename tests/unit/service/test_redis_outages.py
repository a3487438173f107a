"""A Redis that is reachable but cannot serve now is an outage: retried, never answered.

OOM under maxmemory, MISCONF (persistence failing), READONLY (a replica at the master's
address after a failover), MASTERDOWN, LOADING are StoreUnavailable wherever apportion
calls Redis (workers/redis/client.py, ``is_outage``); a reply caused by the call itself
(wrong arguments, WRONGTYPE) is not, so it is never retried for ever.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest
import redis
from celery.exceptions import SoftTimeLimitExceeded

from apportion.config.settings import Settings
from apportion.contracts import Envelope
from apportion.engine import run
from apportion.errors import StoreUnavailable
from apportion.tasks.jobs import publish_or_retry
from apportion.workers.history.failure_store import FailureStore, MemoryFailureStore
from apportion.workers.policies.store import PolicyStore
from apportion.workers.redis.client import is_outage
from apportion.workers.redis.keys import Keys
from apportion.workers.results import answers
from apportion.workers.results.publisher import (
    MemoryPublisher,
    Publication,
    ResultRecord,
    StreamPublisher,
)
from apportion.workers.results.subscriber import StreamSubscriber
from apportion.workers.runtime import Runtime

OOM = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
MISCONF = redis.ResponseError(
    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist"
)
READONLY = redis.exceptions.ReadOnlyError("You can't write against a read only replica.")
MASTERDOWN = redis.exceptions.MasterDownError("Link with MASTER is down")
LOADING = redis.BusyLoadingError("Redis is loading the dataset in memory")
WRONG_ARGS = redis.ResponseError("Wrong number of args calling Redis command from script")
WRONGTYPE = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (OOM, True),
        (MISCONF, True),
        (READONLY, True),
        (MASTERDOWN, True),
        (LOADING, True),
        (redis.ResponseError("NOREPLICAS Not enough good replicas to write."), True),
        (redis.ResponseError("BUSY Redis is busy running a script."), True),
        (redis.ConnectionError("Connection refused"), True),
        (ConnectionResetError(104, "reset"), True),
        (WRONG_ARGS, False),
        (WRONGTYPE, False),
        (redis.ResponseError("BUSYGROUP Consumer Group name already exists"), False),
        (redis.DataError("Invalid input of type: 'dict'"), False),
    ],
)
def test_replies_saying_the_server_cannot_serve_now_are_outages_and_our_own_mistakes_are_not(
    error: Exception, outage: bool
) -> None:
    assert is_outage(error) is outage


def stream_publisher(client: redis.Redis) -> StreamPublisher:
    return StreamPublisher(client, Keys(), maxlen=100, dedup_ttl=60)


def envelope(job_id: str) -> Envelope:
    return Envelope(
        job_id=job_id,
        kind="partition",
        status="ok",
        result={"n": 1},
        engine_version="0.1.0",
        elapsed_ms=1.0,
    )


def replying(error: Exception) -> Any:
    def read_response(*args: object, **kwargs: object) -> object:
        raise error

    return read_response


@pytest.fixture
def server_saying(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A publisher whose connection reads ``error`` as the reply to every command."""

    def make(error: Exception) -> StreamPublisher:
        pub = stream_publisher(fakeredis.FakeRedis())
        pub.publish(envelope("job-0"))  # connected
        assert pub._connection is not None
        monkeypatch.setattr(pub._connection, "read_response", replying(error))
        return pub

    return make


@pytest.mark.parametrize("error", [OOM, MISCONF, READONLY, MASTERDOWN], ids=str)
def test_publishing_to_a_server_that_cannot_write_now_is_store_unavailable(
    server_saying: Any, error: Exception
) -> None:
    with pytest.raises(StoreUnavailable, match="could not publish result of job-1") as raised:
        server_saying(error).publish(envelope("job-1"))

    assert raised.value.__cause__ is error


def test_a_reply_caused_by_the_script_itself_is_not_taken_for_an_outage(
    server_saying: Any,
) -> None:
    with pytest.raises(redis.ResponseError, match="Wrong number of args") as raised:
        server_saying(WRONG_ARGS).publish(envelope("job-1"))

    assert not isinstance(raised.value, StoreUnavailable)


def test_a_launch_outcome_meeting_a_read_only_replica_is_retried_not_rejected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = FailureStore(fakeredis.FakeRedis(), Keys(), retention_seconds=3600, stream_maxlen=100)

    def script(**_: object) -> object:
        raise READONLY

    monkeypatch.setattr(store, "_script", script)
    rt = Runtime(settings=Settings(), publisher=MemoryPublisher(), failures=store)
    event = {
        "event_id": "e1",
        "account": "vsphere-a",
        "outcome": "failed",
        "at": datetime.now(UTC).isoformat(),
    }

    # Before: the engine took the ResponseError for its own bug and answered
    # rejected/internal_error, for good.
    with pytest.raises(StoreUnavailable, match="could not record e1"):
        run("launch_outcome", event, rt.context())


def test_counting_failures_on_a_server_failing_to_persist_is_store_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = fakeredis.FakeRedis()
    store = FailureStore(client, Keys(), retention_seconds=3600, stream_maxlen=100)
    monkeypatch.setattr(client, "pipeline", lambda **_: raising_pipeline(MISCONF))

    with pytest.raises(StoreUnavailable, match="could not read failure history"):
        store.counts(["vsphere-a"], 1.0, datetime.now(UTC))


def raising_pipeline(error: Exception) -> Any:
    def execute() -> object:
        raise error

    return SimpleNamespace(zcount=lambda *_: None, execute=execute)


def test_a_policy_store_out_of_memory_is_store_unavailable_and_a_wrong_type_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = PolicyStore(fakeredis.FakeRedis(), Keys())

    with pytest.raises(StoreUnavailable):
        store._call(lambda: (_ for _ in ()).throw(OOM))
    with pytest.raises(redis.ResponseError, match="WRONGTYPE") as raised:
        store._call(lambda: (_ for _ in ()).throw(WRONGTYPE))
    assert not isinstance(raised.value, StoreUnavailable)


# ---- the subscriber, used directly ---------------------------------------------------

STREAM = "apportion:results:partition"


def subscriber(client: fakeredis.FakeRedis) -> StreamSubscriber:
    client.xadd(STREAM, {"job_id": "j0", "kind": "partition", "status": "ok", "envelope": "{}"})
    sub = StreamSubscriber(client, [STREAM], consumer="c1", claim_idle_ms=0)
    sub.ensure_groups()
    return sub


def test_claiming_abandoned_entries_while_redis_is_away_is_store_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = fakeredis.FakeRedis()
    sub = subscriber(client)

    def xautoclaim(*_: object, **__: object) -> object:
        raise redis.ConnectionError("Connection refused")

    monkeypatch.setattr(client, "xautoclaim", xautoclaim)

    with pytest.raises(StoreUnavailable, match="Connection refused"):
        sub.claim_abandoned()


def test_acknowledging_trimmed_entries_on_a_loading_server_is_store_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = fakeredis.FakeRedis()
    sub = subscriber(client)

    def xack(*_: object) -> object:
        raise LOADING

    monkeypatch.setattr(client, "xack", xack)

    # An entry trimmed while pending comes back empty (Redis 6.2's XAUTOCLAIM, a
    # backlog read) and is acknowledged on the spot, from claim_abandoned too.
    with pytest.raises(StoreUnavailable, match="loading"):
        sub._entries(STREAM, [(b"1-0", {})])


# ---- the task: retry on an outage, answer once published ----------------------------


class Retried(Exception):
    """What the stub task's ``retry`` returns (Celery's Retry, for the test)."""


@dataclass
class StubBackend:
    stored: dict[str, Any] = field(default_factory=dict)

    def mark_as_done(self, task_id: str, result: Any, request: Any = None) -> None:
        self.stored[task_id] = result


@dataclass
class StubTask:
    backend: StubBackend = field(default_factory=StubBackend)
    request: Any = field(default_factory=lambda: SimpleNamespace(id="t-1", retries=0))
    retried: list[BaseException] = field(default_factory=list)

    def retry(self, *, exc: BaseException, **_: object) -> Exception:
        self.retried.append(exc)
        return Retried()


def runtime(publisher: Any) -> Runtime:
    return Runtime(settings=Settings(), publisher=publisher, failures=MemoryFailureStore())


def test_publishing_into_an_out_of_memory_redis_ends_in_a_task_retry(server_saying: Any) -> None:
    task = StubTask()

    with pytest.raises(Retried):
        publish_or_retry(task, runtime(server_saying(OOM)), envelope("job-1"), "fp", task.request)

    [cause] = task.retried
    assert isinstance(cause, StoreUnavailable)
    assert isinstance(cause.__cause__, redis.exceptions.OutOfMemoryError)
    assert task.backend.stored == {}


def _pool_handler(signum: int, frame: Any) -> None:
    raise SoftTimeLimitExceeded  # billiard's handler in a pool child


@pytest.fixture
def pool_child(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # As in a freshly started pool child: the pool's handler, no guard yet.
    monkeypatch.setattr(answers, "_guard_pid", 0)
    previous = signal.signal(signal.SIGUSR1, _pool_handler)
    try:
        yield
    finally:
        answers.release_soft_limit()
        signal.signal(signal.SIGUSR1, previous)


@dataclass
class SignalledAsItReturns(MemoryPublisher):
    """Publishes, then the soft time limit's signal arrives as the call returns."""

    def publish_once(
        self,
        envelope: Envelope,
        fingerprint: str,
        text: str | bytes | None = None,
        record: ResultRecord | None = None,
    ) -> Publication:
        done = super().publish_once(envelope, fingerprint, text, record)
        os.kill(os.getpid(), signal.SIGUSR1)
        return done


def test_a_soft_time_limit_arriving_as_the_answer_is_published_leaves_the_answer_stored(
    pool_child: None,
) -> None:
    task = StubTask()
    publisher = SignalledAsItReturns()

    stored = publish_or_retry(task, runtime(publisher), envelope("job-1"), "fp", task.request)

    assert stored["job_id"] == "job-1"
    assert stored["status"] == "ok"
    assert task.backend.stored == {"t-1": stored}
    assert task.retried == []
    assert [e.job_id for e in publisher.envelopes()] == ["job-1"]


def test_a_refusal_is_named_for_the_operator_through_the_wrappers_around_it() -> None:
    from kombu.exceptions import OperationalError

    from apportion.workers.redis.client import refusal

    oom = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
    wrapped = OperationalError(str(oom))
    wrapped.__cause__ = oom  # as kombu raises it: ``raise OperationalError(...) from exc``
    assert refusal(wrapped) == (
        "out of memory (used memory is over maxmemory, and the policy evicts nothing)"
    )
    assert refusal(redis.ResponseError("MISCONF Errors writing to disk")) is not None
    assert refusal(redis.ReadOnlyError("You can't write against a read only replica.")) == (
        "it is a read-only replica"
    )
    assert refusal(redis.ConnectionError("Connection refused")) is None
    assert refusal(redis.ResponseError("WRONGTYPE Operation against a key")) is None
