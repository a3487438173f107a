"""A hostile producer's stream of queue items, with what each must come to.

Used by the hostile soak (bench/hostile_soak.py, ≥ 10,000 items) and its CI-sized
version (tests/integration/test_hostile_soak.py). Every item is a raw queue item as
a producer in any language would LPUSH it, of one of three categories:

* ``valid`` — a real job of every kind; its answer must equal the in-process engine's
  (computed here once per job template);
* ``answered`` — decodable, but hostile: deep nesting, huge strings and arrays, lone
  surrogates, 400-digit numbers, NaN, wrong types, duplicate keys, the wrong number of
  arguments, a reused job_id with other content, a producer's time limit. Each must get
  an answer (usually ``rejected``, with ``code`` when one is expected) in the result
  backend under its task id, the same envelope as on the result stream;
* ``dead`` — not a message this worker can run: not JSON, a JSON array, properties
  null or missing, headers a string, a body that is an object, not base64, or not
  ``[args, kwargs, embed]``, a pickle or YAML content type, an unknown task. Each must
  end on the dead-letter stream, never executed.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apportion import kinds

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUEUE = {name: kinds.get(name).queue for name in kinds.names()}


def _example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return data


def templates() -> dict[str, dict[str, Any]]:
    """One deterministic job per kind (launch_select seeded, with its own failures)."""
    launch = _example("launch_select.json")
    launch.update(seed=7, failures={})
    return {
        "partition": _example("partition.json"),
        "auto_attach": _example("auto_attach.json"),
        "guest_host_attach": _example("guest_host_attach.json"),
        "heal_org": _example("heal_org.json"),
        "launch_select": launch,
    }


@dataclass(frozen=True, slots=True)
class Sent:
    category: str  # valid | answered | dead
    variant: str
    kind: str
    queue: str
    item: bytes
    task_id: str | None  # the producer's task id (the backend's key), if it has one
    job_id: str | None  # what its stream event carries, if it has one
    code: str | None = None  # the error code an `answered` item must get, if known
    template: str | None = None  # for `valid`: the kind whose in-process answer it must equal
    pair: str | None = None  # reused job_id: both items of a pair share this


def item(
    body: bytes | str | dict[str, Any] | None,
    *,
    task: str,
    queue: str,
    task_id: Any = None,
    content_type: str = "application/json",
    headers: dict[str, Any] | None = None,
) -> tuple[bytes, str]:
    """A protocol-2 queue item; returns (item, task id)."""
    tid = str(uuid.uuid4()) if task_id is None else task_id
    if isinstance(body, bytes):
        body = base64.b64encode(body).decode()
    message = {
        "body": body,
        "content-encoding": "utf-8",
        "content-type": content_type,
        "headers": {
            "lang": "py",
            "task": task,
            "id": tid,
            "argsrepr": "(…)",
            "kwargsrepr": "{}",
            **(headers or {}),
        },
        "properties": {
            "correlation_id": tid,
            "delivery_info": {"exchange": "apportion", "routing_key": queue},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }
    return json.dumps(message).encode(), tid


def call(*args: Any, text: str | None = None) -> bytes:
    """A body: ``[args, {}, embed]`` as JSON (``text`` to send exact JSON instead)."""
    if text is not None:
        return text.encode("utf-8", "surrogatepass")
    return json.dumps([list(args), {}, {}], allow_nan=True).encode()


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@dataclass
class HostileStream:
    """Generates items; ``tag`` keeps job ids of different runs apart."""

    rng: random.Random
    tag: str
    jobs: dict[str, dict[str, Any]] = field(default_factory=templates)
    n: int = 0

    def _id(self, what: str) -> str:
        self.n += 1
        return f"{self.tag}-{what}-{self.n}"

    def _job(self, kind: str) -> tuple[dict[str, Any], str]:
        job = copy.deepcopy(self.jobs[kind])
        job_id = self._id(kind)
        job["job_id"] = job_id
        return job, job_id

    def _answered(
        self, variant: str, kind: str, job: dict[str, Any], job_id: str | None, code: str | None
    ) -> Sent:
        raw, tid = item(call(job), task=f"apportion.{kind}", queue=QUEUE[kind])
        return Sent("answered", variant, kind, QUEUE[kind], raw, tid, job_id, code)

    # ---- valid ----------------------------------------------------------------------

    def valid(self) -> Sent:
        kind = self.rng.choice([*self.jobs, "launch_outcome"])
        if kind == "launch_outcome":
            event_id = self._id("event")
            event = {
                "event_id": event_id,
                "account": f"{self.tag}-acct-{self.rng.randrange(50)}",
                "outcome": self.rng.choice(["failed", "succeeded"]),
                "at": (datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
            }
            raw, tid = item(call(event), task="apportion.launch_outcome", queue="events")
            return Sent("valid", "launch_outcome", kind, "events", raw, tid, event_id)
        job, job_id = self._job(kind)
        raw, tid = item(call(job), task=f"apportion.{kind}", queue=QUEUE[kind])
        return Sent("valid", kind, kind, QUEUE[kind], raw, tid, job_id, template=kind)

    # ---- decodable, hostile ----------------------------------------------------------

    def _deep(self) -> Sent:
        job, job_id = self._job("partition")
        job["hardware"]["extra"] = nested(self.rng.choice([70, 600, 900]))
        return self._answered("deep nesting", "partition", job, job_id, "too_deep")

    def _huge_string(self) -> Sent:
        job, job_id = self._job("auto_attach")
        job["pools"][0]["attributes"] = {"note": "x" * 70_000}
        return self._answered("huge string", "auto_attach", job, job_id, "too_large")

    def _huge_array(self) -> Sent:
        job, job_id = self._job("partition")
        job["schema"] = [{"id": f"s{i}", "type": "partition", "size": 1} for i in range(5000)]
        return self._answered("huge array", "partition", job, job_id, None)

    def _surrogate(self) -> Sent:
        job, _ = self._job("partition")
        job["job_id"] = f"bad-\ud800-{self.n}"
        raw, tid = item(call(job), task="apportion.partition", queue="partition")
        # Answered under its task id (the job's own id is not printable text).
        return Sent("answered", "surrogate job_id", "partition", "partition", raw, tid, tid)

    def _huge_number(self) -> Sent:
        job, job_id = self._job("partition")
        job["hardware"]["disks"][0]["size"] = 10**400
        return self._answered("400-digit number", "partition", job, job_id, "number_out_of_range")

    def _nan(self) -> Sent:
        job, job_id = self._job("launch_select")
        job["failures"] = {"vsphere-a": float("nan")}
        return self._answered("NaN", "launch_select", job, job_id, "number_out_of_range")

    def _wrong_type(self) -> Sent:
        job, job_id = self._job("guest_host_attach")
        job["pools"] = "all of them"
        return self._answered("wrong type", "guest_host_attach", job, job_id, None)

    def _duplicate_key(self) -> Sent:
        job, job_id = self._job("partition")
        text = json.dumps([[job], {}, {}]).replace('"hardware": {', '"hardware": {"ram": 1, ', 1)
        raw, tid = item(call(text=text), task="apportion.partition", queue="partition")
        return Sent(
            "answered", "duplicate key", "partition", "partition", raw, tid, job_id, "duplicate_key"
        )

    def _two_jobs(self) -> Sent:
        job, _ = self._job("partition")
        raw, tid = item(call(job, job), task="apportion.partition", queue="partition")
        return Sent(
            "answered", "two jobs", "partition", "partition", raw, tid, tid, "invalid_message"
        )

    def _tiny_time_limit(self) -> Sent:
        job, job_id = self._job("partition")
        raw, tid = item(
            call(job),
            task="apportion.partition",
            queue="partition",
            headers={"timelimit": [0.002, 0.001]},
        )
        return Sent(
            "valid",
            "producer time limit",
            "partition",
            "partition",
            raw,
            tid,
            job_id,
            template="partition",
        )

    def reused_pair(self) -> list[Sent]:
        """Two jobs under one job_id, different content: one answer on the stream, the
        other submission rejected duplicate_job_id (which one depends on timing)."""
        job, job_id = self._job("partition")
        other = copy.deepcopy(job)
        other["hardware"]["ram"] = 4096
        out = []
        for payload in (job, other):
            raw, tid = item(call(payload), task="apportion.partition", queue="partition")
            out.append(
                Sent(
                    "answered",
                    "reused job_id",
                    "partition",
                    "partition",
                    raw,
                    tid,
                    job_id,
                    pair=job_id,
                )
            )
        return out

    def answered(self) -> Sent:
        make: Callable[[], Sent] = self.rng.choice(
            [
                self._deep,
                self._huge_string,
                self._huge_array,
                self._surrogate,
                self._huge_number,
                self._nan,
                self._wrong_type,
                self._duplicate_key,
                self._two_jobs,
                self._tiny_time_limit,
            ]
        )
        return make()

    # ---- not decodable ---------------------------------------------------------------

    def dead(self) -> Sent:
        job, _ = self._job("partition")
        body = call(job)
        variant = self.rng.choice(
            [
                "not JSON",
                "JSON array",
                "properties null",
                "no properties",
                "headers a string",
                "body an object",
                "body not base64",
                "not a call",
                "pickle",
                "yaml",
                "unknown task",
                "garbage body",
            ]
        )
        task_id: str | None = None
        if variant == "not JSON":
            raw = b"\x00\xff" + self.rng.randbytes(self.rng.randrange(1, 200))
        elif variant == "JSON array":
            raw = json.dumps([1, "two", None]).encode()
        else:
            task, content_type = "apportion.partition", "application/json"
            if variant == "pickle":
                content_type, body = "application/x-python-serialize", b"\x80\x04N."
            elif variant == "yaml":
                content_type, body = "application/x-yaml", b"- a\n- b\n"
            elif variant == "unknown task":
                task = self.rng.choice(["apportion.horoscope", "celery.chord_unlock", "os.system"])
            elif variant == "garbage body":
                body = self.rng.randbytes(self.rng.randrange(1, 500))
            elif variant == "not a call":
                body = json.dumps({"job": job}).encode()
            raw, task_id = item(body, task=task, queue="partition", content_type=content_type)
            message = json.loads(raw)
            if variant == "properties null":
                message["properties"] = None
            elif variant == "no properties":
                del message["properties"]
            elif variant == "headers a string":
                message["headers"] = "x"
                task_id = None
            elif variant == "body an object":
                message["body"] = {"args": [job]}
            elif variant == "body not base64":
                message["body"] = "%%% not base64 %%%"
            raw = json.dumps(message).encode()
        return Sent("dead", variant, "partition", "partition", raw, task_id, None)

    def mix(self, count: int, *, valid: float = 0.4, answered: float = 0.35) -> Iterator[Sent]:
        """``count`` items (about; a reused pair counts as two), shuffled categories."""
        made = 0
        while made < count:
            roll = self.rng.random()
            if roll < valid:
                batch = [self.valid()]
            elif roll < valid + answered:
                batch = self.reused_pair() if self.rng.random() < 0.08 else [self.answered()]
            else:
                batch = [self.dead()]
            made += len(batch)
            yield from batch


def expected_results() -> dict[str, dict[str, Any]]:
    """kind → the ``result`` the engine gives its template, in-process (the reference)."""
    from apportion.engine import Context, run

    out = {}
    for kind, job in templates().items():
        envelope = run(kind, job, Context())
        assert envelope.status == "ok", (kind, envelope.error)
        out[kind] = envelope.as_dict()["result"]
    return out


@dataclass
class Verdict:
    """What the worker made of a stream of items (see :func:`judge`)."""

    sent: dict[str, int] = field(default_factory=dict)
    unanswered: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    disagreeing: list[str] = field(default_factory=list)
    not_dead_lettered: list[str] = field(default_factory=list)
    executed_dead: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.unanswered
            or self.wrong
            or self.disagreeing
            or self.not_dead_lettered
            or self.executed_dead
        )

    def summary(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            **{
                name: {"count": len(values), "first": values[:5]}
                for name, values in (
                    ("unanswered", self.unanswered),
                    ("wrong", self.wrong),
                    ("stream_and_backend_disagree", self.disagreeing),
                    ("not_dead_lettered", self.not_dead_lettered),
                    ("dead_but_executed", self.executed_dead),
                )
            },
        }


def stream_events(client: Any, prefix: str = "apportion") -> dict[str, list[dict[str, Any]]]:
    """job_id → the envelopes of its result events, over every kind's stream."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in QUEUE:
        for _, fields in client.xrange(f"{prefix}:results:{kind}"):
            out.setdefault(fields[b"job_id"].decode(), []).append(json.loads(fields[b"envelope"]))
    return out


def backend_results(client: Any, task_ids: list[str]) -> dict[str, dict[str, Any] | None]:
    out: dict[str, dict[str, Any] | None] = {}
    for start in range(0, len(task_ids), 500):
        chunk = task_ids[start : start + 500]
        for task_id, raw in zip(
            chunk, client.mget([f"celery-task-meta-{t}" for t in chunk]), strict=True
        ):
            out[task_id] = json.loads(raw) if raw else None
    return out


def all_settled(client: Any, sent: list[Sent]) -> bool:
    """Every item answered or dead-lettered, nothing queued or unacknowledged."""
    if any(client.llen(q) for q in set(QUEUE.values())) or client.hlen("unacked"):
        return False
    expected_dead = sum(1 for s in sent if s.category == "dead")
    if client.xlen("apportion:dead-letters") < expected_dead:
        return False
    ids = [s.task_id for s in sent if s.category != "dead" and s.task_id]
    return all(v is not None for v in backend_results(client, ids).values())


def judge(client: Any, sent: list[Sent], expected: dict[str, dict[str, Any]]) -> Verdict:
    verdict = Verdict()
    for s in sent:
        verdict.sent[s.category] = verdict.sent.get(s.category, 0) + 1
    events = stream_events(client)
    answers = backend_results(client, [s.task_id for s in sent if s.task_id])
    letters = [fields for _, fields in client.xrange("apportion:dead-letters")]
    buried_ids = {f[b"task_id"].decode() for f in letters}
    pairs: dict[str, list[dict[str, Any]]] = {}
    for s in sent:
        label = f"{s.variant}:{s.task_id}"
        if s.category == "dead":
            if s.task_id and s.task_id not in buried_ids:
                verdict.not_dead_lettered.append(label)
            if s.task_id and answers.get(s.task_id) is not None:
                verdict.executed_dead.append(label)
            continue
        meta = answers.get(s.task_id or "")
        if meta is None or meta.get("status") != "SUCCESS":
            verdict.unanswered.append(label)
            continue
        envelope = meta["result"]
        if s.pair is not None:
            pairs.setdefault(s.pair, []).append(envelope)
            continue
        on_stream = events.get(s.job_id or "", [])
        if on_stream != [envelope]:
            verdict.disagreeing.append(label)
        if s.category == "valid" and not _correct(s, envelope, expected):
            verdict.wrong.append(label)
        code = (envelope.get("error") or {}).get("code")
        if s.category == "answered" and s.code is not None and code != s.code:
            verdict.wrong.append(f"{label} -> {envelope['status']} {code}")
    for job_id, envelopes in pairs.items():
        codes = sorted((e.get("error") or {}).get("code") or e["status"] for e in envelopes)
        on_stream = events.get(job_id, [])
        if codes != ["duplicate_job_id", "ok"] or len(on_stream) != 1:
            verdict.wrong.append(f"reused {job_id}: {codes}, {len(on_stream)} on the stream")
    dead = sum(1 for s in sent if s.category == "dead")
    if len(letters) < dead:
        verdict.not_dead_lettered.append(f"{len(letters)} dead letters for {dead} items")
    return verdict


def _correct(s: Sent, envelope: dict[str, Any], expected: dict[str, dict[str, Any]]) -> bool:
    if envelope["status"] != "ok":
        return False
    if s.kind == "launch_outcome":
        return bool(envelope["result"]["recorded"]) and envelope["job_id"] == s.job_id
    return s.template is not None and envelope["result"] == expected[s.template]
