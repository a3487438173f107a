"""Issue 13, items 3-6 and 9, through a real worker and Redis: every hostile job gets one
clear answer, the same on the result stream and in the result backend.

The worker runs tests/support/fault_app.py (the production app; faults off unless a
test's environment switches one on).
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from celery.result import AsyncResult

from apportion.config.settings import Settings
from apportion.workers.app import create_app
from apportion.workers.redis.keys import Keys
from tests.conftest import load_example
from tests.integration.conftest import worker_env
from tests.support.jobs import entry_envelope
from tests.support.processes import RedisServer, Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]

KEYS = Keys()
FAULT_APP = "tests.support.fault_app"


def stream_envelopes(client: redis.Redis, kind: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for _, fields in client.xrange(KEYS.results_stream(kind)):
        out.setdefault(fields[b"job_id"].decode(), []).append(entry_envelope(client, fields))
    return out


def one_truth(client: redis.Redis, producer: Celery, task_id: str, kind: str) -> dict[str, Any]:
    """The envelope stored for ``task_id``, checked against the stream's one event."""
    result = AsyncResult(task_id, app=producer)
    envelope: dict[str, Any] = result.get(timeout=60)
    assert result.state == "SUCCESS"
    [on_stream] = stream_envelopes(client, kind)[envelope["job_id"]]
    assert on_stream == envelope
    return envelope


@pytest.fixture(scope="module")
def url(redis_server: RedisServer) -> str:
    url = f"redis://127.0.0.1:{redis_server.port}/8"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture(scope="module")
def producer(url: str) -> Iterator[Celery]:
    app = create_app(Settings(redis_url=url))
    yield app
    app.close()


@pytest.fixture
def client(url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(url, socket_timeout=5)
    yield c
    c.close()


@pytest.fixture(scope="module")
def worker(url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    log = tmp_path_factory.mktemp("answered") / "worker.log"
    w = Worker(env=worker_env(url), logfile=log, app_module=FAULT_APP)
    w.start()
    yield w
    w.stop()


def partition(job_id: str, **changes: Any) -> dict[str, Any]:
    return {**load_example("partition.json"), "job_id": job_id, **changes}


# ---- item 3: ids and producer headers --------------------------------------------------


def test_a_job_id_with_a_lone_surrogate_is_answered_under_the_task_id_saying_why(
    worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    sent = producer.send_task("apportion.partition", args=[partition("bad-\ud800-id")])

    envelope = one_truth(client, producer, sent.id, "partition")

    assert envelope["job_id"] == sent.id
    assert envelope["status"] == "rejected"
    assert envelope["error"]["details"][0]["path"] == "job_id"
    assert worker.alive


@pytest.mark.parametrize("limits", [(0.002, 0.001), (10**9, 10**9)])
def test_a_producers_time_limit_header_is_not_obeyed(
    worker: Worker, producer: Celery, client: redis.Redis, limits: tuple[float, float]
) -> None:
    hard, soft = limits
    job_id = f"timelimit-{uuid.uuid4()}"
    sent = producer.send_task(
        "apportion.partition", args=[partition(job_id)], time_limit=hard, soft_time_limit=soft
    )

    # 2 ms would have killed the pool child and lost the answer.
    assert one_truth(client, producer, sent.id, "partition")["status"] == "ok"
    assert f"producer time limit [{hard}, {soft}] ignored" in worker.log_text()


def raw_message(body: bytes, task_id: Any, tag: str | None = None) -> str:
    return json.dumps(
        {
            "body": base64.b64encode(body).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {"lang": "js", "task": "apportion.partition", "id": task_id},
            "properties": {
                "delivery_info": {"exchange": "apportion", "routing_key": "partition"},
                "body_encoding": "base64",
                "delivery_tag": tag or str(uuid.uuid4()),
            },
        }
    )


def test_a_message_with_a_null_task_id_is_run_and_answered(
    worker: Worker, client: redis.Redis
) -> None:
    job_id = f"null-id-{uuid.uuid4()}"
    body = json.dumps([[partition(job_id)], {}, {}]).encode()
    client.lpush("partition", raw_message(body, None))

    wait_until(lambda: job_id in stream_envelopes(client, "partition"), 60, what="the answer")
    [envelope] = stream_envelopes(client, "partition")[job_id]
    assert envelope["status"] == "ok"
    assert "task id 'None' replaced by" in worker.log_text()


# ---- item 4 and the hard time limit: one truth -----------------------------------------


@pytest.fixture
def alone(redis_server: RedisServer) -> Iterator[tuple[str, Celery, redis.Redis]]:
    """A database of its own: the module's worker must not take these tests' jobs."""
    url = f"redis://127.0.0.1:{redis_server.port}/10"
    client = redis.Redis.from_url(url, socket_timeout=5)
    client.flushdb()
    app = create_app(Settings(redis_url=url))
    yield url, app, client
    app.close()
    client.close()


def slow_worker(url: str, log: Path, **env: str) -> Worker:
    limits = {
        "APPORTION_TIME_LIMITS__PARTITION__SOFT": "1",
        "APPORTION_TIME_LIMITS__PARTITION__HARD": "3",
    }
    return Worker(
        env=worker_env(url, **limits, **env),
        logfile=log,
        app_module=FAULT_APP,
        queues="partition",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("slow_store", "what"),
    [("2", "the soft time limit"), ("5", "the hard time limit, which kills the child")],
)
def test_a_time_limit_reached_after_the_event_was_published_leaves_stream_and_backend_agreeing(
    alone: tuple[str, Celery, redis.Redis], tmp_path: Path, slow_store: str, what: str
) -> None:
    url, producer, client = alone
    # The pool child publishes the event, then takes `slow_store` seconds to store the
    # result in the backend: the time limit falls in between.
    w = slow_worker(url, tmp_path / "w.log", APPORTION_TEST_SLOW_STORE=slow_store)
    w.start()
    try:
        job_id = f"late-limit-{uuid.uuid4()}"
        sent = producer.send_task("apportion.partition", args=[partition(job_id)])
        envelope = one_truth(client, producer, sent.id, "partition")
        assert w.alive
    finally:
        w.stop()

    assert envelope["status"] == "ok", what


@pytest.mark.slow
def test_a_job_longer_than_the_operators_limit_is_answered_time_limit_whatever_the_producer_asks(
    alone: tuple[str, Celery, redis.Redis], tmp_path: Path
) -> None:
    url, producer, client = alone
    w = slow_worker(url, tmp_path / "w.log", APPORTION_TEST_SLOW_SOLVE="2")
    w.start()
    try:
        sent = producer.send_task(
            "apportion.partition",
            args=[partition(f"long-{uuid.uuid4()}")],
            time_limit=10**6,
            soft_time_limit=10**6,
        )
        envelope = one_truth(client, producer, sent.id, "partition")
    finally:
        w.stop()

    assert envelope["error"]["code"] == "time_limit"
    assert "APPORTION_TIME_LIMITS__PARTITION__SOFT" in envelope["error"]["message"]


# ---- item 5: numbers and ids the engines cannot handle ---------------------------------

HUGE = 10**400


def _gha(**host: Any) -> dict[str, Any]:
    job = load_example("guest_host_attach.json")
    job["host"].update(host)
    return job


def _derived(product: str) -> dict[str, Any]:
    job = load_example("guest_host_attach.json")
    job["pools"][0]["derived_product_id"] = product
    return job


def _partition_with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    job = copy.deepcopy(load_example("partition.json"))
    node = job
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return job


def _launch_failures() -> dict[str, Any]:
    job = load_example("launch_select.json")
    job["failures"] = {"vsphere-a": HUGE}
    return job


ITEM_5 = [
    (
        "partition",
        _partition_with(("hardware", "disks", 0, "size"), HUGE),
        "hardware.disks[0].size",
    ),
    ("partition", _partition_with(("schema", 1, "min_size"), HUGE), "schema[1].min_size"),
    ("partition", _partition_with(("schema", 3, "max_size"), HUGE), "schema[3].max_size"),
    ("partition", _partition_with(("schema", 1, "weight"), HUGE), "schema[1].weight"),
    ("partition", _partition_with(("schema", 2, "size"), "yaql=" + "9" * 400), "schema[2].size"),
    (
        "partition",
        _partition_with(("schema", 2, "size"), "yaql=$.ram * " + "9" * 400),
        "schema[2].size",
    ),
    ("launch_select", _launch_failures(), "failures.vsphere-a"),
    ("guest_host_attach", _gha(uuid="h" * 256), "host.uuid"),
    ("guest_host_attach", _derived("sku-\ud800"), "pools[0].derived_product_id"),
]


@pytest.mark.parametrize(("kind", "job", "path"), ITEM_5)
def test_numbers_and_ids_the_engines_cannot_handle_are_rejected_with_their_path(
    worker: Worker, producer: Celery, client: redis.Redis, kind: str, job: dict[str, Any], path: str
) -> None:
    job = {**job, "job_id": f"item5-{uuid.uuid4()}"}
    sent = producer.send_task(f"apportion.{kind}", args=[job])

    envelope = one_truth(client, producer, sent.id, kind)

    assert envelope["status"] == "rejected"
    assert envelope["error"]["code"] != "internal_error"
    assert envelope["error"]["details"][0]["path"] == path


# ---- item 6: a reused job_id -------------------------------------------------------------


def test_a_reused_job_id_gets_its_own_rejection_and_the_stream_keeps_one_event(
    worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    job_id = f"reused-{uuid.uuid4()}"
    first = producer.send_task("apportion.partition", args=[partition(job_id)])
    assert first.get(timeout=60)["status"] == "ok"
    other = partition(job_id, hardware={"ram": 4096, "disks": [{"id": "sda", "size": 500}]})

    second = producer.send_task("apportion.partition", args=[other]).get(timeout=60)
    again = producer.send_task("apportion.partition", args=[partition(job_id)]).get(timeout=60)

    assert second["status"] == "rejected"
    assert second["error"]["code"] == "duplicate_job_id"
    assert second["job_id"] == job_id
    # The same content again: the same answer again, exactly the one on the stream.
    assert again == first.get(timeout=1)
    assert [e["status"] for e in stream_envelopes(client, "partition")[job_id]] == ["ok"]


def test_the_same_job_with_its_keys_in_another_order_is_the_same_job(
    worker: Worker, producer: Celery
) -> None:
    job = partition(f"reordered-{uuid.uuid4()}")
    reordered = dict(reversed(list(job.items())))

    first = producer.send_task("apportion.partition", args=[job]).get(timeout=60)
    second = producer.send_task("apportion.partition", args=[reordered]).get(timeout=60)

    assert second == first


# ---- item 9: duplicate keys ----------------------------------------------------------------


def _push_with_hardware_member(client: redis.Redis, job_id: str, member: str) -> str:
    """Queue a partition job whose ``hardware`` object starts with ``member``, written
    into the text (what no JSON encoder would send); the message's task id."""
    text = json.dumps([[partition(job_id)], {}, {}])
    text = text.replace('"hardware": {', '"hardware": {' + member + ", ", 1)
    task_id = str(uuid.uuid4())
    client.lpush("partition", raw_message(text.encode(), task_id))
    return task_id


def test_a_job_with_a_duplicate_key_is_rejected_with_the_keys_path(
    worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    job_id = f"dupkey-{uuid.uuid4()}"
    task_id = _push_with_hardware_member(client, job_id, '"ram": 65536')

    envelope = one_truth(client, producer, task_id, "partition")

    assert envelope["job_id"] == job_id
    assert envelope["error"]["code"] == "duplicate_key"
    assert envelope["error"]["details"][0]["path"] == "hardware.ram"


def test_a_job_sent_as_a_json_string_is_rejected_as_no_object_not_decoded_again(
    worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    job = partition(f"as-text-{uuid.uuid4()}")
    sent = producer.send_task("apportion.partition", args=[json.dumps(job)])

    envelope = one_truth(client, producer, sent.id, "partition")

    assert envelope["job_id"] == sent.id
    assert envelope["status"] == "rejected"
    assert envelope["error"]["code"] == "invalid_job"
    assert envelope["error"]["message"] == "$: a partition job must be a JSON object, got str"


def test_an_integer_of_5000_digits_is_answered_out_of_range_with_its_path(
    worker: Worker, producer: Celery, client: redis.Redis
) -> None:
    job_id = f"long-int-{uuid.uuid4()}"
    task_id = _push_with_hardware_member(client, job_id, '"memory": ' + "9" * 5000)

    envelope = one_truth(client, producer, task_id, "partition")

    assert envelope["job_id"] == job_id
    assert envelope["error"]["code"] == "number_out_of_range"
    assert envelope["error"]["details"][0]["path"] == "hardware.memory"
    assert "5000 digits" in envelope["error"]["message"]


# ---- item 7: the failure history ------------------------------------------------------------


def test_the_failure_history_is_capped_per_account_refuses_future_events_and_says_when_too_old(
    alone: tuple[str, Celery, redis.Redis], tmp_path: Path
) -> None:
    url, producer, client = alone
    w = Worker(
        env=worker_env(url, APPORTION_FAILURE_HISTORY_MAX_PER_ACCOUNT="5"),
        logfile=tmp_path / "w.log",
        app_module=FAULT_APP,
        queues="events",
    )
    now = datetime.now(UTC)
    account = f"flaky-{uuid.uuid4().hex[:8]}"

    def outcome(n: str, at: datetime) -> dict[str, Any]:
        return {
            "event_id": f"{account}-{n}",
            "account": account,
            "outcome": "failed",
            "at": at.isoformat(),
        }

    w.start()
    try:
        sent = [
            producer.send_task(
                "apportion.launch_outcome", args=[outcome(str(i), now - timedelta(minutes=i))]
            )
            for i in range(12)
        ]
        assert all(r.get(timeout=60)["result"]["recorded"] for r in sent)
        future = producer.send_task(
            "apportion.launch_outcome", args=[outcome("future", now + timedelta(days=1))]
        )
        old = producer.send_task(
            "apportion.launch_outcome", args=[outcome("old", now - timedelta(hours=25))]
        )
        future_envelope = one_truth(client, producer, future.id, "launch_outcome")
        old_envelope = one_truth(client, producer, old.id, "launch_outcome")
    finally:
        w.stop()

    assert client.zcard(KEYS.failure_history(account)) == 5
    assert future_envelope["error"]["code"] == "in_the_future"
    assert future_envelope["error"]["details"][0]["path"] == "at"
    assert old_envelope["result"]["recorded"] is False
    assert old_envelope["result"]["skipped"] == "outside_retention"


# ---- item 8: one expression budget per job ----------------------------------------------


def expression_job(accounts: int, modules: int) -> dict[str, Any]:
    expr = "switch($.id.len() > 3 and $.weight >= 0 and $.cost >= 0 => 1, true => 1)"
    return {
        "job_id": f"expr-{uuid.uuid4()}",
        "providers": [
            {"uuid": f"h{i}", "account": f"acct-{i}", "inventories": {"VCPU": {"total": 8}}}
            for i in range(accounts)
        ],
        "request": "resources=VCPU:1",
        "policy": [{"module": "equal"}] + [{"module": "expression", "expression": expr}] * modules,
    }


def test_all_expression_modules_of_a_job_share_one_time_budget_however_many_accounts(
    alone: tuple[str, Celery, redis.Redis], tmp_path: Path
) -> None:
    url, producer, client = alone
    # Each module alone fits its own limit (1 s + 2 ms per account); ten of them are
    # several times the job's budget on any machine. Before, each module had a budget
    # of its own: the job's time grew with its modules and accounts.
    w = Worker(
        env=worker_env(url, APPORTION_LIMITS__YAQL_JOB_SECONDS="1"),
        logfile=tmp_path / "w.log",
        app_module=FAULT_APP,
        queues="launch",
    )
    w.start()
    try:
        sent = producer.send_task("apportion.launch_select", args=[expression_job(600, 10)])
        envelope = one_truth(client, producer, sent.id, "launch_select")
    finally:
        w.stop()

    assert envelope["status"] == "rejected"
    assert "APPORTION_LIMITS__YAQL_JOB_SECONDS" in envelope["error"]["message"]
    # Bounded by the one budget (the yaql child is killed at its deadline), not by six.
    assert envelope["elapsed_ms"] < 1000 + 3000


# ---- item 2: bounded results ------------------------------------------------------------


def flooding_job(hosts: int, children: int = 33, groups: int = 32) -> dict[str, Any]:
    """Each candidate allocates one VGPU per isolated group: tens of KB per candidate,
    up to the 10,000-candidate cap (the issue's 1.8 MB job answered 175-327 MB)."""
    providers: list[dict[str, Any]] = []
    for h in range(hosts):
        root = f"compute-node-{h:04d}.rack-{h % 10:02d}.datacenter-east.example.org"
        providers.append({"uuid": root, "account": f"acct-{h % 5}"})
        providers += [
            {
                "uuid": f"{root}-pgpu-{c:03d}",
                "parent_provider_uuid": root,
                "inventories": {"VGPU": {"total": 1}},
            }
            for c in range(children)
        ]
    request = "&".join(f"resources_G{i}=VGPU:1" for i in range(groups))
    return {
        "job_id": f"flood-{uuid.uuid4()}",
        "providers": providers,
        "request": request + "&group_policy=isolate",
        "policy": [{"module": "equal"}],
        "seed": 1,
    }


def test_a_job_whose_answer_would_flood_redis_is_truncated_under_the_envelope_limit(
    alone: tuple[str, Celery, redis.Redis], tmp_path: Path
) -> None:
    url, producer, client = alone
    limit = 1_000_000
    w = Worker(
        env=worker_env(url, APPORTION_LIMITS__MAX_ENVELOPE_BYTES=str(limit)),
        logfile=tmp_path / "w.log",
        app_module=FAULT_APP,
        queues="launch,partition",
    )
    w.start()
    try:
        before = int(client.info("memory")["used_memory"])
        job = flooding_job(hosts=12)
        sent = producer.send_task("apportion.launch_select", args=[job])
        envelope = one_truth(client, producer, sent.id, "launch_select")
        grown = int(client.info("memory")["used_memory"]) - before
        meta = json.loads(client.get(f"celery-task-meta-{sent.id}"))
        partition_sent = producer.send_task(
            "apportion.partition", args=[partition(f"p-{uuid.uuid4()}")]
        )
        partition_answer = one_truth(client, producer, partition_sent.id, "partition")
    finally:
        w.stop()

    extra = envelope["result"]["extra"]
    assert envelope["status"] == "ok"
    assert extra["truncated"] is True
    assert extra["valid_candidates"] == 10_000
    assert 0 < extra["returned"] == len(envelope["result"]["allocation_requests"]) < 10_000
    chosen = envelope["result"]["selection"]["chosen"]
    assert chosen < extra["returned"]  # the dice's choice is among the candidates returned
    assert len(json.dumps(envelope, separators=(",", ":"))) <= limit
    # Stored twice (stream, backend), without the job's arguments, plus the client
    # buffers that carried it: a few MB. Whole, the answer would be 54 MB, twice.
    assert grown < 8 * limit
    assert "args" not in meta
    assert "kwargs" not in meta
    assert partition_answer["status"] == "ok"


def test_any_other_answer_over_the_limit_is_rejected_result_too_large_in_both_places(
    alone: tuple[str, Celery, redis.Redis], tmp_path: Path
) -> None:
    url, producer, client = alone
    w = Worker(
        env=worker_env(url, APPORTION_LIMITS__MAX_ENVELOPE_BYTES="1100"),
        logfile=tmp_path / "w.log",
        app_module=FAULT_APP,
        queues="attach",
    )
    w.start()
    try:
        job = {**load_example("auto_attach.json"), "job_id": f"big-{uuid.uuid4()}"}
        sent = producer.send_task("apportion.auto_attach", args=[job])
        envelope = one_truth(client, producer, sent.id, "auto_attach")
    finally:
        w.stop()

    assert envelope["status"] == "rejected"
    assert envelope["error"]["code"] == "result_too_large"
    assert "APPORTION_LIMITS__MAX_ENVELOPE_BYTES" in envelope["error"]["message"]
