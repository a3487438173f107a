"""What the worker's main process hands a pool child: the job's body, not the job twice."""

from __future__ import annotations

import base64
import json
import pickle
from typing import Any

from apportion.workers.broker.gate import Deliver, GateRules, inspect
from apportion.workers.broker.transport import MainProcessArgs, Message
from tests.support.hostile_stream import call, item

JOB = {"job_id": "j-1", "schema": [], "hardware": {"disks": [{"id": "sda", "size": 100}]}}


class _Channel:
    """What kombu's message reads of its channel, and the gate's decode of the body."""

    def __init__(self, tag: str, decoded: list[Any]) -> None:
        self.gate_decoded = (tag, decoded)

    def decode_body(self, body: str, encoding: str | None) -> bytes:
        assert encoding == "base64"
        return base64.b64decode(body)


def _delivered() -> Message:
    raw, _ = item(call(JOB), task="apportion.partition", queue="partition", headers={})
    verdict = inspect(raw, GateRules(tasks={"apportion.partition": [90.0, 60.0]}))
    assert isinstance(verdict, Deliver)
    assert verdict.call is not None
    tag = verdict.message["properties"]["delivery_tag"]
    return Message(verdict.message, channel=_Channel(tag, verdict.call))


def test_the_main_process_holds_the_whole_job_the_gate_decoded() -> None:
    args, kwargs, _ = _delivered().payload

    assert isinstance(args, MainProcessArgs)
    assert args == [JOB]
    assert kwargs == {}


def test_the_request_a_pool_child_unpickles_leaves_the_job_to_the_body() -> None:
    message = _delivered()
    args, kwargs, _ = message.payload
    # What Celery's request holds and pickles to the child with the body.
    request = {"id": "t-1", "task": "apportion.partition", "args": args, "kwargs": kwargs}

    handed = pickle.loads(pickle.dumps((request, message.body)))

    assert handed[0]["args"] == []
    assert json.loads(handed[1]) == [[JOB], {}, {}]
