"""The dead-letter stream: messages a worker will not run, kept for an operator.

Two kinds of message end here, never executed and never restored in a loop:

* **undecodable** ones — not JSON, not a Celery message, a pickle or other content
  type, a task this worker does not have (workers/broker/gate.py gives the reason);
* **quarantined** ones — a message handed to workers ``APPORTION_QUARANTINE_AFTER``
  times (default 2) without an answer: each of those deliveries ended with its worker
  (or its pool child) dead. Whatever in the job does that, it stops here instead of
  taking down every worker the fleet starts. A quarantined job gets no envelope: it was
  never answered, and an operator may requeue it (after an upgrade, say) to get its one
  answer.

Each entry (``{prefix}:dead-letters``, trimmed to ``APPORTION_DEAD_LETTER_MAXLEN``
entries and ``APPORTION_DEAD_LETTER_MAX_AGE`` seconds) holds::

    queue     the Redis list it was taken from (requeue pushes it back there)
    reason    not_json, bad_properties, bad_headers, bad_body, not_a_task_call,
              content_type, unknown_task, too_large, quarantined, ...
    detail    one line for a human
    task      the task name, task_id the task id, when they could be read
    tag       the delivery tag (its delivery count is reset on requeue)
    size      the item's size in bytes
    truncated "1" when ``message`` is only the first APPORTION_DEAD_LETTER_COPY_BYTES
    message   the queue item as it was queued
    at        when it was buried (ISO 8601, UTC)

Burying and the removal of the message from kombu's unacknowledged set happen in
one MULTI/EXEC (or, for what the transport buries, in one script that also takes it
off its taking list), so a worker killed in between leaves the message in exactly one
place. ``apportion dead-letters`` lists the entries and requeues one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis

from apportion.errors import StoreUnavailable
from apportion.workers.redis.client import REDIS_ERRORS, is_outage
from apportion.workers.redis.keys import Keys, min_stream_id

FIELDS = ("queue", "reason", "detail", "task", "task_id", "tag", "size", "truncated", "at")


@dataclass(frozen=True, slots=True)
class Reason:
    """What a dead letter's ``reason`` means for requeueing it.

    ``retriable``: the message may run once something outside it changes (a limit raised,
    a task deployed, a bug fixed); requeued before then it comes straight back. Otherwise
    the message itself is malformed: the gate will give every requeue the same verdict,
    and only its producer can fix it (by sending it again, correctly).
    """

    retriable: bool
    why: str


# Every reason the gate (workers/broker/gate.py and the transport's record of a take,
# workers/broker/transport.py) buries a message for; a unit test reads both sources and
# checks that each is here. A reason not listed (a newer worker's) is requeued: this
# version cannot tell that the message could never run.
REASONS: dict[str, Reason] = {
    "not_json": Reason(False, "the queue item is not JSON"),
    "not_a_message": Reason(False, "the queue item is JSON but not a kombu message object"),
    "bad_properties": Reason(False, "the message's properties are missing or malformed"),
    "bad_headers": Reason(False, "the message's headers are missing or malformed"),
    "bad_body": Reason(False, "the message's body is not base64 of UTF-8 JSON"),
    "not_a_task_call": Reason(False, "the body is not a task call [args, kwargs, embed]"),
    "content_type": Reason(False, "the body is not JSON (the workers take no other type)"),
    "too_large": Reason(True, "runs once APPORTION_MAX_MESSAGE_BYTES is raised above its size"),
    "unknown_task": Reason(True, "runs once a worker with that task serves the queue"),
    "undecodable": Reason(True, "the gate failed on it (a bug): runs once a fixed worker does"),
    "quarantined": Reason(True, "its worker died each time: runs again, to its one answer"),
}


@dataclass(frozen=True, slots=True)
class DeadLetter:
    entry_id: str
    fields: dict[str, str]
    message: bytes

    @property
    def reason(self) -> str:
        return self.fields.get("reason", "")

    @property
    def truncated(self) -> bool:
        return self.fields.get("truncated") == "1"

    def summary(self) -> dict[str, Any]:
        """The entry as JSON data (the message as text, for `apportion dead-letters --json`)."""
        return {
            "id": self.entry_id,
            **{k: self.fields.get(k, "") for k in FIELDS},
            "message": self.message.decode("utf-8", errors="replace"),
        }


class CannotRequeue(Exception):
    """The entry is gone, only a truncated copy of its message was kept, or its reason
    says it can never run (:data:`REASONS`)."""


@dataclass(frozen=True, slots=True)
class DeadLetterPolicy:
    maxlen: int = 10_000
    max_age_seconds: int = 7 * 86_400
    copy_bytes: int = 1024 * 1024


class DeadLetters:
    def __init__(self, client: redis.Redis, keys: Keys, policy: DeadLetterPolicy) -> None:
        self._client = client
        self._keys = keys
        self.policy = policy

    @property
    def stream(self) -> str:
        return self._keys.dead_letters_stream

    def bury(
        self,
        item: str | bytes,
        *,
        queue: str,
        reason: str,
        detail: str,
        tag: str | None = None,
        task: str | None = None,
        task_id: str | None = None,
        unacked: tuple[str, str] | None = None,
        taking: str | None = None,
    ) -> str:
        """Add one entry; with ``unacked`` (hash, index) also forget the delivery there,
        with ``taking`` also drop the item from the head of that taking list (the
        transport moved it there, workers/broker/transport.py)."""
        data = item.encode("utf-8", errors="surrogatepass") if isinstance(item, str) else item
        copy = data[: self.policy.copy_bytes]
        fields: dict[str, Any] = {
            "queue": queue,
            "reason": reason,
            "detail": detail[:1000],
            "task": task or "",
            "task_id": task_id or "",
            "tag": tag or "",
            "size": len(data),
            "truncated": "1" if len(copy) < len(data) else "0",
            "at": datetime.now(UTC).isoformat(),
            "message": copy,
        }
        try:
            pipe = self._client.pipeline(transaction=True)
            pipe.xadd(self.stream, fields, maxlen=self.policy.maxlen, approximate=True)  # type: ignore[arg-type]
            pipe.xtrim(
                self.stream, minid=min_stream_id(self.policy.max_age_seconds), approximate=True
            )
            if taking is not None:
                pipe.ltrim(taking, 1, -1)
            if tag:
                pipe.delete(self._keys.delivery_count(tag))
                if unacked is not None:
                    pipe.hdel(unacked[0], tag)
                    pipe.zrem(unacked[1], tag)
            entry = pipe.execute()[0]
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(f"could not dead-letter a message: {exc}") from exc
        return entry.decode() if isinstance(entry, bytes) else str(entry)

    def newest(self, count: int = 50, reason: str | None = None) -> list[DeadLetter]:
        """The newest ``count`` entries (of ``reason`` only, if given), newest first."""
        out: list[DeadLetter] = []
        upper = "+"
        page = max(count, 100)
        while len(out) < count:
            batch: Any = self._client.xrevrange(self.stream, max=upper, min="-", count=page)
            for entry_id, fields in batch:
                letter = _letter(entry_id, fields)
                if reason is None or letter.reason == reason:
                    out.append(letter)
            if len(batch) < page:
                break
            upper = f"({_text(batch[-1][0])}"  # exclusive: the next page starts below it
        return out[:count]

    def get(self, entry_id: str) -> DeadLetter | None:
        if not _ENTRY_ID.fullmatch(entry_id):
            raise CannotRequeue(f"{entry_id!r} is not a stream entry id (like 1732540000000-0)")
        found: Any = self._client.xrange(self.stream, min=entry_id, max=entry_id)
        return _letter(*found[0]) if found else None

    def requeue(self, entry_id: str) -> DeadLetter:
        """Push the entry's message back onto its queue (at the end of the line), reset
        its delivery count and remove the entry, in one transaction."""
        letter = self.get(entry_id)
        if letter is None:
            raise CannotRequeue(f"no dead letter {entry_id} (trimmed, or already requeued)")
        reason = REASONS.get(letter.reason)
        if reason is not None and not reason.retriable:
            raise CannotRequeue(
                f"{entry_id} was dead-lettered as {letter.reason} ({reason.why}): it can "
                "never run, a worker would dead-letter it again; its producer must send it "
                "again, correctly"
            )
        if letter.truncated:
            raise CannotRequeue(
                f"only the first {len(letter.message)} of {letter.fields.get('size')} bytes of "
                f"{entry_id} were kept (APPORTION_DEAD_LETTER_COPY_BYTES): it cannot be requeued"
            )
        queue = letter.fields.get("queue", "")
        if not queue:
            raise CannotRequeue(f"{entry_id} does not say which queue it came from")
        tag = letter.fields.get("tag")
        count_key = self._keys.delivery_count(tag) if tag else ""
        # Whoever removes the entry pushes its message: two operators requeueing the same
        # entry at once push it once.
        moved = self._client.eval(
            _REQUEUE_ONCE, 3, self.stream, queue, count_key, entry_id, letter.message
        )
        if not moved:
            raise CannotRequeue(f"{entry_id} was requeued by someone else just now")
        return letter


_ENTRY_ID = re.compile(r"\d{1,20}-\d{1,20}")

# KEYS: the dead-letter stream, the queue, the delivery count ("" when none).
# ARGV: the entry id, the message. The message is pushed at the producers' end (FIFO,
# behind waiting jobs) only if this call removed the entry.
_REQUEUE_ONCE = """
if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('LPUSH', KEYS[2], ARGV[2])
if KEYS[3] ~= '' then
  redis.call('DEL', KEYS[3])
end
return 1
"""


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _letter(entry_id: Any, raw: dict[Any, Any]) -> DeadLetter:
    fields = {_text(k): _text(v) for k, v in raw.items() if _text(k) != "message"}
    message = raw.get(b"message", raw.get("message", b""))
    if isinstance(message, str):
        message = message.encode()
    return DeadLetter(_text(entry_id), fields, message)


def describe(letter: DeadLetter) -> str:
    """One line per entry for `apportion dead-letters`."""
    f = letter.fields
    who = f.get("task") or "?"
    if f.get("task_id"):
        who += f"[{f['task_id']}]"
    reason, queue, detail = f.get("reason", ""), f.get("queue", ""), f.get("detail", "")
    return f"{letter.entry_id}  {reason:<16} {queue:<10} {who} — {detail}"


__all__ = [
    "REASONS",
    "CannotRequeue",
    "DeadLetter",
    "DeadLetterPolicy",
    "DeadLetters",
    "Reason",
    "describe",
]
