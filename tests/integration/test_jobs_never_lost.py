"""A job whose result cannot be published is never dropped: it waits for Redis.

Three ways a solved job used to vanish without a result event, each shown here
against real processes:

* its publish retries ran out while the results Redis was still away (the task
  failed, the message was acked, nothing was published anywhere);
* the retry message itself could not be sent, which Celery answers by dropping
  the message (``Reject(requeue=False)``);
* a producer sent the wrong arguments (two jobs, or none): the task raised
  TypeError and left no event, where any other bad job gets a ``rejected`` one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from celery.exceptions import Reject

from apportion.config.settings import Settings
from apportion.tasks.jobs import _retry
from apportion.workers.app import create_app
from apportion.workers.history.failure_store import MemoryFailureStore
from apportion.workers.redis.keys import Keys
from apportion.workers.results.publisher import MemoryPublisher
from apportion.workers.runtime import Runtime
from tests.conftest import load_example
from tests.integration.conftest import stream_job_ids, worker_env
from tests.support.processes import RedisServer, free_port, running_worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]


def partition_job(job_id: str) -> dict[str, object]:
    return {**load_example("partition.json"), "job_id": job_id}


def test_a_job_solved_while_the_results_redis_is_down_is_published_when_it_returns(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    # The broker stays up; only the Redis that holds the result streams is away, for
    # longer than the whole retry budget (1 retry after 1 s).
    results = RedisServer(port=free_port(), workdir=tmp_path / "results")
    env = worker_env(
        results.url,
        APPORTION_BROKER_URL=redis_server.url,
        APPORTION_RESULT_BACKEND=redis_server.url,
        APPORTION_PUBLISH_RETRIES="1",
        APPORTION_PUBLISH_BACKOFF_MAX="1",
    )
    producer = create_app(Settings(redis_url=redis_server.url, broker_url=redis_server.url))
    job_id = f"outage-{uuid.uuid4()}"
    try:
        with running_worker(env, tmp_path / "worker.log", queues="partition") as worker:
            producer.send_task("apportion.partition", args=[partition_job(job_id)])
            # Wait until the retry budget is spent: the task then either gave up (the
            # job was lost, as it used to be) or handed the job back to its queue.
            wait_until(
                lambda: any(
                    line in worker.log_text()
                    for line in ("the job goes back on its queue", "raised unexpected")
                ),
                60,
                what="the publish retries used up",
            )
            results.start()
            client = results.client()
            stream = Keys().results_stream("partition")
            wait_until(lambda: job_id in stream_job_ids(client, stream), 60, what="the late event")
            # Once published, the job is done: no second event, nothing left queued.
            broker = redis_server.client()
            wait_until(
                lambda: broker.llen("partition") == 0 and broker.hlen("unacked") == 0,
                30,
                what="the queue drained",
            )
            assert stream_job_ids(client, stream).count(job_id) == 1
            event = json.loads(client.xrange(stream)[-1][1][b"envelope"])
            assert event["status"] == "ok"
            assert worker.alive
    finally:
        producer.close()
        results.stop()


@pytest.fixture
def unreachable_broker_app() -> Iterator[Celery]:
    """An app whose broker refuses connections and gives up at once (no retry policy)."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    app = create_app(Settings(redis_url=dead))
    app.conf.task_publish_retry_policy = {"max_retries": 0}
    app.conf.broker_connection_timeout = 1
    yield app
    app.close()


def test_a_retry_that_cannot_be_sent_requeues_the_job_instead_of_dropping_it(
    unreachable_broker_app: Celery,
) -> None:
    task = unreachable_broker_app.tasks["apportion.partition"]
    settings = Settings(redis_url="redis://127.0.0.1:1/0")
    rt = Runtime(settings=settings, publisher=MemoryPublisher(), failures=MemoryFailureStore())
    task.push_request(id="t-1", retries=0, args=[{}], kwargs={}, called_directly=False)
    try:
        outcome = _retry(task, rt, redis.ConnectionError("down"), "publishing t-1")
    finally:
        task.pop_request()

    # Celery's own answer here is Reject(requeue=False): the message would be dropped.
    assert isinstance(outcome, Reject)
    assert outcome.requeue is True


def test_a_message_with_the_wrong_arguments_gets_a_rejected_event_naming_args(
    worker: object, producer: Celery, client: redis.Redis, keys: Keys
) -> None:
    two = producer.send_task(
        "apportion.partition", args=[partition_job("a"), partition_job("b")]
    ).get(timeout=60)
    none = producer.send_task("apportion.partition", args=[]).get(timeout=60)
    by_name = producer.send_task(
        "apportion.partition", kwargs={"job": partition_job(f"kw-{uuid.uuid4()}")}
    ).get(timeout=60)

    for envelope in (two, none):
        assert envelope["status"] == "rejected"
        assert envelope["error"]["code"] == "invalid_message"
        assert envelope["error"]["details"] == [
            {"path": "args", "message": "send args=[job] and no kwargs"}
        ]
        assert envelope["job_id"] in stream_job_ids(client, keys.results_stream("partition"))
    assert "got 2 positional and 0 keyword arguments" in two["error"]["message"]
    assert by_name["status"] == "ok"
