"""Mixed jobs of every kind, built from examples/, for fault tests and the soak.

Each job gets a distinct idempotency key (``job_id``; ``event_id`` for a
launch_outcome, which is what its result event carries as ``job_id``), so a test can
check that every job's result event appears exactly once on its stream.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# The layout a provisioning service sends most: a vg on one disk with a growing root and
# a fixed swap. The worker benchmark's job (bench/bench_worker.py) and the closed-form
# LP's worked example (tests/unit/partition/test_one_disk.py).
SMALL_PARTITION: dict[str, Any] = {
    "schema": [
        {"id": "os", "type": "vg", "contains": [{"id": "root"}, {"id": "swap"}]},
        {"id": "root", "type": "lv", "min_size": 5000, "mount": "/"},
        {"id": "swap", "type": "lv", "size": 2048},
    ],
    "hardware": {"ram": 1024, "disks": [{"id": "sda", "size": 40000}]},
}

# variant → (kind, example file). launch_select runs both with the job's own policy and
# without one (the worker's default policy from config/default_policy.yaml).
VARIANTS: dict[str, tuple[str, str]] = {
    "partition": ("partition", "partition.json"),
    "auto_attach": ("auto_attach", "auto_attach.json"),
    "guest_host_attach": ("guest_host_attach", "guest_host_attach.json"),
    "launch_select_default_policy": ("launch_select", "launch_select.candidates.json"),
    "launch_select_policy": ("launch_select", "launch_select.json"),
    "launch_outcome": ("launch_outcome", "launch_outcome.json"),
    "heal_org": ("heal_org", "heal_org.json"),
}
ACCOUNTS = ("vsphere-a", "vsphere-b", "ec2")


@dataclass(frozen=True, slots=True)
class Job:
    variant: str
    kind: str
    key: str  # the job_id its result event carries
    payload: dict[str, Any]

    @property
    def task_name(self) -> str:
        return f"apportion.{self.kind}"


def _example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return data


def make_job(variant: str, tag: str, i: int, now: datetime | None = None) -> Job:
    kind, example = VARIANTS[variant]
    payload = _example(example)
    if kind == "launch_outcome":
        key = f"{tag}-{variant}-{i}"
        payload.update(
            event_id=key,
            job_id=f"{tag}-launch-{i}",
            account=ACCOUNTS[i % len(ACCOUNTS)],
            outcome="failed" if i % 2 else "succeeded",
            at=(now or datetime.now(UTC)).isoformat(),
        )
    else:
        key = f"{tag}-{variant}-{i}"
        payload["job_id"] = key
    return Job(variant=variant, kind=kind, key=key, payload=payload)


def mixed_jobs(n: int, tag: str, weights: Mapping[str, int] | None = None) -> list[Job]:
    """``n`` jobs cycling through the variants (each ``weights[v]`` times per round)."""
    weights = weights or dict.fromkeys(VARIANTS, 1)
    cycle = itertools.cycle([v for v, w in weights.items() for _ in range(w)])
    now = datetime.now(UTC)
    return [make_job(next(cycle), tag, i, now) for i in range(n)]


def event_counts(
    client: redis.Redis, kinds: Iterable[str], prefix: str = "apportion"
) -> Counter[str]:
    """job_id → number of result events on the kinds' streams."""
    counts: Counter[str] = Counter()
    for kind in set(kinds):
        for _, fields in client.xrange(f"{prefix}:results:{kind}"):
            counts[fields[b"job_id"].decode()] += 1
    return counts


def stored_results(client: redis.Redis, task_ids: list[str]) -> dict[str, dict[str, Any] | None]:
    """task id → its Celery result-backend record (None when absent)."""
    out: dict[str, dict[str, Any] | None] = {}
    for start in range(0, len(task_ids), 500):
        chunk = task_ids[start : start + 500]
        values = client.mget([f"celery-task-meta-{t}" for t in chunk])
        for task_id, raw in zip(chunk, values, strict=True):
            out[task_id] = json.loads(raw) if raw else None
    return out


def queued_and_unacked(client: redis.Redis) -> tuple[int, int]:
    """Messages waiting in the apportion queues, and delivered but unacknowledged ones."""
    queued = sum(client.llen(q) for q in ("attach", "launch", "partition", "events"))
    return queued, int(client.hlen("unacked"))


def unacked_task_ids(client: redis.Redis) -> set[str]:
    """Task ids of the messages in kombu's ``unacked`` hash (delivered, not yet acked)."""
    out = set()
    for raw in client.hvals("unacked"):
        message = json.loads(raw)[0]
        out.add(message["headers"]["id"])
    return out


def settled(client: redis.Redis, kinds: Iterable[str], quiet: float = 1.0) -> bool:
    """Nothing queued or unacknowledged, and no new result event for ``quiet`` seconds.

    Checked twice: a message between BRPOP and its ``unacked`` record is in neither.
    """
    streams = [f"apportion:results:{k}" for k in set(kinds)]
    before = sum(int(client.xlen(s)) for s in streams)
    if queued_and_unacked(client) != (0, 0):
        return False
    time.sleep(quiet)
    after = sum(int(client.xlen(s)) for s in streams)
    return queued_and_unacked(client) == (0, 0) and after == before


def never_received(task_ids: Iterable[str], worker_log: str) -> bool:
    """No worker ever logged receiving these tasks (they vanished between BRPOP and ack)."""
    return all(f"[{task_id}] received" not in worker_log for task_id in task_ids)


def entry_envelope(client: redis.Redis, fields: Mapping[bytes, bytes]) -> dict[str, Any]:
    """The envelope of one result-stream entry, as a subscriber reads it: the entry's own
    ``envelope``, or a big one from the result record its ``envelope_key`` names."""
    if b"envelope" in fields:
        envelope: dict[str, Any] = json.loads(fields[b"envelope"])
        return envelope
    stored = client.get(fields[b"envelope_key"].decode())
    assert stored is not None, f"the record {fields[b'envelope_key']!r} is gone"
    meta: dict[str, Any] = json.loads(stored)
    assert meta["status"] == "SUCCESS", meta
    big: dict[str, Any] = meta["result"]
    return big
