"""The fixes the fault tests led to, each shown directly (fast: no worker).

test_faults_redis_restart.py finds these faults only when a restart happens to hit the
wrong moment; here each fix is exercised deterministically.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection
from kombu.asynchronous import Hub
from pydantic import ValidationError

from apportion.config.celeryconfig import PRODUCER_RETRY_POLICY, broker_transport, celery_config
from apportion.config.settings import Settings
from apportion.workers.broker import transport
from apportion.workers.broker.transport import UNDELIVERED, Channel
from apportion.workers.redis.keys import Keys
from apportion.workers.results.subscriber import StreamSubscriber
from tests.support.processes import RedisServer, wait_until

pytestmark = [pytest.mark.redis]


@pytest.fixture
def broker(redis_server: RedisServer) -> Iterator[Connection]:
    url = f"redis://127.0.0.1:{redis_server.port}/5"
    redis_server.client().execute_command("SELECT", 5)
    with Connection(url, transport=broker_transport(url)) as conn:
        conn.default_channel.client.flushdb()
        yield conn


def test_a_channel_still_reaches_redis_after_kombu_detached_its_connection_info(
    broker: Connection,
) -> None:
    channel = broker.default_channel
    assert isinstance(channel, Channel)
    transport = channel.connection
    client, transport.client = transport.client, None  # what kombu's collect() leaves
    try:
        channel._disconnect_pools()
        # kombu's own channel raises AttributeError('...hostname') here, and the worker
        # stops consuming for good ("Unrecoverable error").
        assert channel.pool.connection_kwargs["port"] == broker.port
        assert channel.client.ping()
    finally:
        transport.client = client


def test_a_message_read_as_the_connection_died_is_put_back_on_its_queue(
    broker: Connection,
) -> None:
    payload = {
        "body": "e30=",
        "headers": {"id": "lost-1", "task": "apportion.partition"},
        "properties": {"delivery_info": {"routing_key": "partition"}},
    }
    UNDELIVERED.keep(payload, "partition")

    channel = broker.channel()
    channel.basic_consume("partition", False, lambda m: None, "t")
    raw = channel.client.rpop("partition")
    channel.close()

    assert json.loads(raw)["headers"]["id"] == "lost-1"


def test_idempotency_windows_must_outlast_the_visibility_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APPORTION_VISIBILITY_TIMEOUT", "7200")
    monkeypatch.setenv("APPORTION_DEDUP_TTL", "3600")
    with pytest.raises(ValidationError, match="APPORTION_DEDUP_TTL=3600 must be longer"):
        Settings()

    monkeypatch.setenv("APPORTION_DEDUP_TTL", "86400")
    monkeypatch.setenv("APPORTION_FAILURE_RETENTION_HOURS", "1")
    with pytest.raises(ValidationError, match="APPORTION_FAILURE_RETENTION_HOURS=1 must be"):
        Settings()


def test_the_configuration_keeps_jobs_through_a_redis_restart() -> None:
    conf = celery_config(Settings())
    options = conf["broker_transport_options"]
    window = sum(
        min(
            PRODUCER_RETRY_POLICY["interval_start"] + i * PRODUCER_RETRY_POLICY["interval_step"],
            PRODUCER_RETRY_POLICY["interval_max"],
        )
        for i in range(int(PRODUCER_RETRY_POLICY["max_retries"]))
    )

    assert conf["worker_cancel_long_running_tasks_on_connection_loss"] is False
    assert conf["result_backend_always_retry"] is True
    assert conf["broker_transport"] == "apportion.workers.broker.transport:Transport"
    assert broker_transport("sentinel://h:26379;sentinel://h2:26379") == (
        "apportion.workers.broker.transport:SentinelTransport"
    )
    assert broker_transport("memory://") is None  # the embedded demo only
    assert broker_transport("rediss://h:6380/0") == "apportion.workers.broker.transport:Transport"
    assert options["unacked_mutex_expire"] <= 30
    assert options["socket_timeout"] > 0
    assert 10 <= window <= 30  # a producer rides out a restart, then gets an error
    assert conf["task_publish_retry_policy"] == PRODUCER_RETRY_POLICY
    assert conf["result_backend_transport_options"]["retry_policy"] == PRODUCER_RETRY_POLICY


def test_entries_trimmed_while_pending_are_acknowledged_not_delivered_empty(
    redis_server: RedisServer,
) -> None:
    client = redis_server.client()
    client.execute_command("SELECT", 6)
    client.flushdb()
    stream = "apportion:results:partition"
    for i in range(5):
        client.xadd(stream, {"job_id": f"j{i}", "kind": "partition", "envelope": "{}"})
    crashed = StreamSubscriber(client, [stream], consumer="a")
    crashed.ensure_groups()
    crashed.read(count=3, block_ms=None)  # then died without acknowledging
    client.xtrim(stream, maxlen=0)  # MAXLEN trimming removes the entries it held
    client.xadd(stream, {"job_id": "new", "kind": "partition", "envelope": "{}"})

    restarted = StreamSubscriber(client, [stream], consumer="a")
    seen = [e.job_id for e in restarted.read(count=10, block_ms=None)]

    # redis-py returns a trimmed pending entry as {}: it used to come out as an event
    # with no job_id, and stay pending forever.
    assert seen == ["new"]
    assert client.xpending(stream, "apportion-subscribers")["pending"] == 1


def test_a_message_taken_off_its_queue_is_on_the_server_at_every_step(
    broker: Connection,
) -> None:
    # The message as a Celery producer queues it (kombu assigns the delivery tag).
    raw = {
        "body": "W1tdLCB7fSwge31d",
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"id": "atomic-1", "task": "apportion.partition", "args": []},
        "properties": {
            "delivery_tag": "tag-atomic-1",
            "delivery_info": {"exchange": "", "routing_key": "partition"},
            "body_encoding": "base64",
        },
    }
    queued = json.dumps(raw)
    channel = broker.channel()
    assert isinstance(channel, Channel)
    seen: list[str] = []
    channel.basic_consume("partition", False, lambda m: seen.append(m.delivery_tag), "t")
    client = channel.client
    client.lpush("partition", queued)

    source, taking, item = channel.move_to_taking(["partition"]) or ("", "", b"")

    # Moved in one step on the server, and its list registered: a worker SIGKILLed
    # right after the move leaves the message where a live worker puts it back.
    assert (source, item) == ("partition", queued.encode())
    assert client.llen("partition") == 0
    assert client.lrange(taking, 0, -1) == [queued.encode()]
    assert client.zscore(Keys().takers, taking) is not None
    assert channel.move_to_taking(["partition"]) is None

    assert channel._take(source, taking, item)
    # Settled: out of the taking list and in ``unacked`` byte for byte, in one step.
    assert seen == ["tag-atomic-1"]
    assert client.llen(taking) == 0
    assert client.zscore("unacked_index", "tag-atomic-1") is not None
    assert json.loads(client.hget("unacked", "tag-atomic-1")) == [raw, "", "partition"]

    channel.qos.restore_by_tag("tag-atomic-1", client)  # what restore_visible does
    restored = json.loads(client.rpop("partition"))
    # The same message (its [] still a list), marked as redelivered by kombu.
    assert restored["body"] == raw["body"]
    assert restored["headers"] == {**raw["headers"], "redelivered": True}
    assert restored["properties"]["delivery_info"]["redelivered"] is True
    channel.close()


def test_the_taking_list_of_a_worker_that_stopped_saying_it_is_alive_goes_back_on_its_queue(
    broker: Connection,
) -> None:
    dead = broker.channel()
    assert isinstance(dead, Channel)
    client = dead.client
    client.lpush("partition", _queued("old-1", "partition"), _queued("old-2", "partition"))
    first = dead.move_to_taking(["partition"])
    second = dead.move_to_taking(["partition"])
    assert first is not None
    assert second is not None
    assert first[1] == second[1]
    taking = first[1]
    # Its worker died before settling either: nothing refreshes its entry any more.
    client.zadd(Keys().takers, {taking: time.time() - dead.gate.taker_ttl - 1})

    live = broker.channel()
    assert isinstance(live, Channel)
    live.basic_consume("partition", False, lambda m: None, "t")
    transport._REAPED_AT[0] = 0.0  # the process's last look, long ago
    live.keep_taking()

    # Back at the consuming end, oldest first, as kombu restores; still watched (a take
    # sent on the dead connection may reach Redis late), until forgotten.
    assert client.llen(taking) == 0
    assert [json.loads(i)["headers"]["id"] for i in client.lrange("partition", 0, -1)] == [
        "old-2",
        "old-1",
    ]
    assert client.zscore(Keys().takers, taking) is not None
    client.zadd(Keys().takers, {taking: time.time() - dead.gate.taker_forget - 1})
    transport._REAPED_AT[0] = 0.0  # the process's last look, long ago
    live.keep_taking()
    assert client.zscore(Keys().takers, taking) is None
    live.close()


def _queued(tag: str, queue: str) -> str:
    return json.dumps(
        {
            "body": "W1tdLCB7fSwge31d",  # [[], {}, {}]
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {"id": tag, "task": "apportion.partition"},
            "properties": {
                "delivery_tag": tag,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "body_encoding": "base64",
            },
        }
    )


def test_waiting_messages_are_taken_atomically_but_never_for_queues_without_acks(
    broker: Connection,
) -> None:
    seen: list[str] = []
    tasks = broker.channel()
    assert isinstance(tasks, Channel)
    client = tasks.client
    tasks.basic_consume("partition", False, lambda m: seen.append(m.delivery_tag), "t1")
    client.lpush("partition", _queued("task-1", "partition"))
    tasks._brpop_start()  # a message is waiting: taken by the script, delivered at once
    assert seen == ["task-1"]
    assert client.hexists("unacked", "task-1")
    tasks.close()

    replies = broker.channel()
    assert isinstance(replies, Channel)
    replies.basic_consume("reply.x", True, lambda m: seen.append(m.delivery_tag), "t2")
    client.lpush("reply.x", _queued("reply-1", "reply.x"))
    # What kombu's poller does before a BRPOP: pin the channel's client to a connection.
    replies.client.connection = replies.client.connection_pool.get_connection()
    replies._brpop_start()  # no acks on this queue: kombu's own BRPOP, nothing recorded
    assert replies._in_poll, "the reply queue was not left to kombu's BRPOP"
    replies._brpop_read()
    assert seen == ["task-1", "reply-1"]
    assert not client.hexists("unacked", "reply-1")
    replies.close()


def test_a_message_the_pop_script_recorded_is_not_written_again_on_delivery(
    broker: Connection,
) -> None:
    seen: list[str] = []
    tasks = broker.channel()
    assert isinstance(tasks, Channel)
    client = tasks.client
    tasks.basic_consume("partition", False, lambda m: seen.append(m.delivery_tag), "t1")
    queued = _queued("once-1", "partition")
    client.lpush("partition", queued)
    assert tasks.move_to_taking(["nothing-here"]) is None  # its list is registered
    client.config_resetstat()

    tasks._brpop_start()

    assert seen == ["once-1"]
    calls = {k.removeprefix("cmdstat_"): v["calls"] for k, v in client.info("commandstats").items()}
    # One LMOVE took it, one transaction recorded it (one HSET: kombu's own
    # MULTI/ZADD/HSET did not follow), and no script saw the message.
    assert calls.get("lmove") == 1
    assert calls.get("hset") == 1
    assert calls.get("exec") == 1
    assert "evalsha" not in calls
    assert json.loads(client.hget("unacked", "once-1"))[0] == json.loads(queued)
    tasks.qos.ack("once-1")  # kombu still knows the delivery: the ack clears it
    assert not client.hexists("unacked", "once-1")
    assert client.zscore("unacked_index", "once-1") is None
    tasks.close()


def test_a_message_taken_by_the_pop_script_ends_the_event_loops_wait_at_once(
    broker: Connection,
) -> None:
    # The pool sends delivered jobs to its children from a tick callback of its own;
    # when that ran before the transport's, a job taken in this tick waited for the
    # next one, and with no BRPOP in flight the loop slept a second first (fix 4).
    hub = Hub()
    broker.register_with_event_loop(hub)
    seen: list[str] = []
    channel = broker.channel()
    assert isinstance(channel, Channel)
    channel.basic_consume("partition", False, lambda m: seen.append(m.delivery_tag), "t")
    assert hub.poller.poll(0) in (None, [])  # nothing to do: the loop would wait

    channel.client.lpush("partition", _queued("task-1", "partition"))
    channel._brpop_start()

    assert seen == ["task-1"]
    ready = hub.poller.poll(0)
    assert ready  # the next poll returns at once, so the next tick comes now
    [(fd, _)] = ready
    callback, args = hub.readers[fd]
    callback(*args)  # the loop drains it...
    assert hub.poller.poll(0) in (None, [])  # ...and waits again when idle: no busy loop
    channel.close()
    hub.close()


@pytest.mark.parametrize("step", ["dead-letter write", "record"])
def test_a_taken_item_goes_back_on_its_queue_when_redis_goes_during_its_gate_step(
    broker: Connection, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    # Burying an item (the gate refused it) or recording it as unacknowledged needs
    # Redis; when the connection dies then, the item is still in the taking list, and
    # goes back on its queue as soon as the worker reaches Redis again.
    channel = broker.channel()
    assert isinstance(channel, Channel)
    if step == "dead-letter write":
        item = json.dumps({"body": "not base64!", "headers": {}, "properties": {}})
        monkeypatch.setattr(channel, "_bury_taken", _connection_lost)
    else:
        item = _queued("unrecorded-1", "partition")
        monkeypatch.setattr(channel, "_settle", _connection_lost)
    channel.client.lpush("partition", item)
    found = channel.move_to_taking(["partition"])
    assert found is not None

    with pytest.raises(redis.ConnectionError):
        channel._take(*found)
    monkeypatch.undo()
    assert channel.client.llen("partition") == 0
    channel._restore_abandoned()  # what the next take does first, on a new connection

    assert channel.client.lrange("partition", 0, -1) == [item.encode()]
    channel.close()


def _connection_lost(*args: object, **kwargs: object) -> bool:
    raise redis.ConnectionError("Connection closed by server.")


def test_a_message_put_back_from_a_taking_list_keeps_its_delivery_count(
    broker: Connection,
) -> None:
    # Handed out twice already, each time its worker died (quarantine_after is 2). A
    # third take is lost with its connection; the message goes back on its queue, and
    # the take after that counts as its third delivery: quarantined, not run again.
    channel = broker.channel()
    assert isinstance(channel, Channel)
    seen: list[str] = []
    channel.basic_consume("partition", False, lambda m: seen.append(m.delivery_tag), "t")
    client = channel.client
    client.set(Keys().delivery_count("thrice-1"), 2)
    client.lpush("partition", _queued("thrice-1", "partition"))
    assert channel.move_to_taking(["partition"]) is not None
    channel._abandon()  # the take's reply was lost
    channel._restore_abandoned()
    assert client.llen("partition") == 1
    assert client.get(Keys().delivery_count("thrice-1")) == b"2"

    found = channel.move_to_taking(["partition"])
    assert found is not None
    assert not channel._take(*found)

    assert seen == []
    [(_, fields)] = client.xrange(Keys().dead_letters_stream)
    assert fields[b"reason"] == b"quarantined"
    assert fields[b"tag"] == b"thrice-1"
    assert fields[b"queue"] == b"partition"
    assert not client.hexists("unacked", "thrice-1")
    assert client.llen(found[1]) == 0
    channel.close()


def test_an_acknowledgement_that_cannot_reach_redis_is_sent_again_and_frees_its_slot(
    broker: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Celery only logs an acknowledgement that raised, and a partition that heals without
    # a reset never makes the consumer reconnect: a delivery whose end was lost would
    # hold its prefetch slot for good, and with every slot held the worker takes nothing.
    channel = broker.channel()
    assert isinstance(channel, Channel)
    channel.basic_qos(0, 1, False)
    channel.basic_consume("partition", False, lambda m: None, "t")
    channel.client.lpush("partition", _queued("cut-1", "partition"))
    channel._brpop_start()
    assert not channel.qos.can_consume()  # the one slot holds cut-1
    run = channel.scripts.run

    def timed_out(*args: object) -> None:
        raise redis.TimeoutError("Timeout reading from socket")

    monkeypatch.setattr(channel.scripts, "run", timed_out)
    channel.qos.ack("cut-1")  # raises nothing: kept, and tried again

    assert channel.client.hexists("unacked", "cut-1")
    assert not channel.qos.can_consume()
    monkeypatch.setattr(channel.scripts, "run", run)  # Redis answers again

    def retried() -> bool:
        channel.qos.retry_refused()  # what the transport's timer calls every second
        return bool(channel.qos.can_consume())

    wait_until(retried, 10, what="the acknowledgement tried again")
    assert not channel.client.hexists("unacked", "cut-1")
    assert channel.client.zscore("unacked_index", "cut-1") is None
    channel.close()
