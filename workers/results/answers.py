"""One answer per job: the envelope on the result stream and in the result backend agree.

The task publishes an envelope on the stream (once per job_id) and returns one for
Celery to store in the result backend. Left alone, the two would differ: a redelivered
job would return a freshly computed envelope while the stream keeps the first one
(launch_select's dice may differ), a second job reusing a job_id would be dropped from
the stream but stored as if answered, and a soft time limit firing after the event was
published would turn the backend's record into a FAILURE next to an ``ok`` event. Here:

* :func:`settle` publishes and returns what the backend must store: the envelope just
  published; for a job_id already answered, the envelope the stream holds when the job
  is the same (same :func:`fingerprint`), or a ``rejected``/``duplicate_job_id``
  envelope of its own when it is a different job (its producer reads it by task id; the
  stream keeps exactly one event per job_id); an envelope that is a
  ``duplicate_job_id`` rejection already (a launch_outcome, see
  workers/history/failure_store.py) is never published, for the same reason;
* :func:`bounded` replaces an envelope larger than ``APPORTION_LIMITS__MAX_ENVELOPE_BYTES``
  by a ``rejected``/``result_too_large`` one before anything is stored (launch_select
  stays under it by truncating its candidates; this is the bound for everything else);
* :func:`hold_soft_limit` makes a soft time limit that fires once publishing has begun
  harmless until the task has returned and Celery has stored the result.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import threading
from typing import Any

import orjson

from apportion.codec import encode
from apportion.contracts import Envelope, ErrorInfo
from apportion.limits import Limits, env_name
from apportion.workers.job_clock import engine_done
from apportion.workers.results.publisher import ResultPublisher, ResultRecord

log = logging.getLogger("apportion.answers")


def envelope_json(envelope: Envelope) -> bytes:
    """The envelope as compact JSON, made once for the stream entry and the size bound."""
    return encode(envelope.as_dict())


def fingerprint(job: Any, *, finite: bool = False) -> str:
    """A digest of the job's content (key order ignored), kept next to its job_id.

    The digest of the job's compact JSON with sorted keys, as ``json.dumps`` writes it
    (markers written by earlier versions hold the same digests). orjson writes the same
    bytes ten times faster, with two exceptions: a float in exponent form (``1e+16``
    against ``1e16``) and NaN or an infinity (``null``, where ``json.dumps`` writes
    ``NaN``/``Infinity``). So orjson's text is used unless :func:`_as_json_dumps_writes`
    finds it may hold either; values orjson refuses (integers over 64 bits, keys that
    are not strings, lone surrogates) go the slow way too.
    tests/unit/service/test_answers.py compares both ways on generated JSON.

    ``finite``: the caller knows ``job`` holds no NaN and no infinity (orjson decoded
    it: fast_json.take_finite), so a ``null`` in orjson's text is a ``None``.
    """
    try:
        text = orjson.dumps(job, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError included
        text = b""
    if not text or not _as_json_dumps_writes(text, job, finite):
        text = _json_dumps_text(job)
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def _as_json_dumps_writes(text: bytes, job: Any, finite: bool = False) -> bool:
    """Whether orjson's ``text`` of ``job`` is what ``json.dumps`` writes (sorted, compact).

    Without a digit followed by ``e``/``E`` (anywhere, even inside a string) no float is
    in exponent form in orjson's text; without ``0.0000`` none is one that ``json.dumps``
    writes in exponent form and orjson does not (``1e-05`` against ``0.00001``); and both
    write a float's shortest digits the same way. A ``null``
    is ``None`` or a NaN or an infinity: the text decoded again equals the job only when
    every one of them was ``None`` (a NaN or an infinity comes back as ``None``, unequal).
    """
    zeros = text.translate(_DIGITS_AS_ZERO)
    if b"0e" in zeros or b"0E" in zeros or b"0.0000" in zeros:
        return False
    if finite or b"null" not in zeros:
        return True
    try:
        return bool(orjson.loads(text) == job)
    except orjson.JSONDecodeError:
        return False


# What orjson writes natively but json.dumps refuses or writes otherwise (dataclasses,
# dates, subclasses such as an IntEnum) makes orjson raise: the slow way. (UUIDs and
# plain enums, which no JSON message carries, get digests of their own.)
_ORJSON_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0000000000")


def maybe_float_or_nan(text: bytes) -> bool:
    """Whether ``text`` holds a digit followed by ``.``, ``e`` or ``E``, or a ``null``.

    The regular expression ``[0-9][.eE]|null`` says the same; its search tries both
    branches at every byte, several times the cost of one pass turning every digit into
    ``0`` and four substring searches (once per job, in the pool child).
    """
    zeros = text.translate(_DIGITS_AS_ZERO)
    return b"0." in zeros or b"0e" in zeros or b"0E" in zeros or b"null" in zeros


def _json_dumps_text(job: Any) -> bytes:
    try:
        text = json.dumps(job, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # not JSON data (a Python caller's)
        text = f"<{type(job).__name__}>"
    return text.encode("utf-8", "surrogatepass")


def bounded(envelope: Envelope, limits: Limits) -> tuple[Envelope, bytes]:
    """``envelope`` and its JSON, or a ``result_too_large`` rejection if it is over the limit."""
    text = envelope_json(envelope)
    if len(text) <= limits.max_envelope_bytes:
        return envelope, text
    log.warning(
        "job %s (%s): a %d-byte result envelope replaced by result_too_large",
        envelope.job_id,
        envelope.kind,
        len(text),
    )
    replacement = Envelope.rejected(
        envelope.job_id,
        envelope.kind,
        ErrorInfo(
            code="result_too_large",
            message=f"the result envelope would be {len(text)} bytes, over the limit of "
            f"{limits.max_envelope_bytes} bytes; ask for a smaller result or raise "
            f"{env_name('max_envelope_bytes')}",
        ),
        elapsed_ms=envelope.elapsed_ms,
    )
    return replacement, envelope_json(replacement)


def duplicate_job_id(envelope: Envelope, dedup_ttl: int) -> Envelope:
    """The answer to a job that reuses the job_id of a different, already answered job."""
    return Envelope.rejected(
        envelope.job_id,
        envelope.kind,
        ErrorInfo(
            code="duplicate_job_id",
            message=f"job_id {envelope.job_id!r} was already answered for a job with "
            "different content; give each job its own job_id (a job_id is remembered for "
            f"APPORTION_DEDUP_TTL={dedup_ttl} s)",
        ),
        elapsed_ms=envelope.elapsed_ms,
    )


def settle(
    publisher: ResultPublisher,
    envelope: Envelope,
    fingerprint: str,
    text: bytes | None = None,
    *,
    dedup_ttl: int = 86_400,
) -> Envelope:
    """Publish ``envelope`` once; return the envelope the result backend must store."""
    return settle_recorded(publisher, envelope, fingerprint, text, dedup_ttl=dedup_ttl)[0]


def settle_recorded(
    publisher: ResultPublisher,
    envelope: Envelope,
    fingerprint: str,
    text: bytes | None = None,
    *,
    dedup_ttl: int = 86_400,
    record: ResultRecord | None = None,
) -> tuple[Envelope, bool]:
    """:func:`settle`, storing ``record`` (the envelope as the task's result) with the
    event when it goes out now; True when it did, and the caller stores nothing more."""
    if envelope.error is not None and envelope.error.code == "duplicate_job_id":
        # Decided before publishing (a launch_outcome whose event_id the failure history
        # holds for other content): the job_id's one event is the other content's.
        return envelope, False
    done = publisher.publish_once(envelope, fingerprint, text, record)
    if done.new:
        return envelope, done.recorded
    if not done.same_content:
        log.info("job_id %s (%s) reused by a different job", envelope.job_id, envelope.kind)
        return duplicate_job_id(envelope, dedup_ttl), False
    if done.entry_id:
        published = publisher.published_envelope(envelope.kind, done.entry_id)
        if published is not None:
            return Envelope.from_dict(published), False
    # The event was trimmed away (older than the stream keeps): the job is the same and
    # engines are deterministic, so this envelope is its answer.
    return envelope, False


# ---- the soft time limit after publishing ------------------------------------------

# Whether a soft time limit is held now (in this process's main thread), and the
# handler this module put in front of the pool's, with the pool's behind it.
_holding = False
_guard: Any = None
_guard_pid = 0  # the process _guard was installed in (a forked child installs its own)
# (the handler to put back on release,) when hold_soft_limit replaced a non-Python one.
_replaced: tuple[Any] | None = None


def _too_late(signum: int, frame: Any) -> None:
    log.warning("soft time limit reached while or after publishing the answer; ignored")


class _Guard:
    """SIGUSR1's handler while a pool child runs jobs: the pool's own (billiard's,
    raising SoftTimeLimitExceeded), except while a soft time limit is held.

    Installed once per process, at its first hold, and then switched by a flag: swapping
    (or even reading) the handler around every job costs system calls and the signal
    module's conversion of handlers to enums, per job. billiard installs its handler
    once, as a pool child starts, before any job."""

    __slots__ = ("pool",)

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def __call__(self, signum: int, frame: Any) -> None:
        if _holding:
            _too_late(signum, frame)
        else:
            self.pool(signum, frame)


def hold_soft_limit() -> None:
    """From now until the task's result is stored, a soft time limit does not raise.

    Celery delivers the soft limit as SIGUSR1 to the pool child (billiard); once the
    answer is on the stream, raising would only turn the backend's record into a
    FAILURE. :func:`release_soft_limit` (at ``task_postrun``, after Celery stored the
    result) lets the pool's handler answer again. Outside a pool child's main thread:
    no-op. Where SIGUSR1 has no Python handler (not a pool child), one that only logs
    replaces it while held.
    """
    global _holding, _guard, _guard_pid, _replaced
    engine_done()  # what follows is Redis's time (workers/job_clock.py)
    if _holding or threading.current_thread() is not threading.main_thread():
        return
    if _guard_pid != os.getpid():
        current = signal.getsignal(signal.SIGUSR1)
        if callable(current):
            _guard, _guard_pid = _Guard(current), os.getpid()
            signal.signal(signal.SIGUSR1, _guard)
        else:  # SIG_DFL, SIG_IGN or None: nothing to put in front of
            _replaced = (signal.signal(signal.SIGUSR1, _too_late),)
    _holding = True


def release_soft_limit(**_: Any) -> None:
    global _holding, _replaced
    _holding = False
    if _replaced is not None:
        previous, _replaced = _replaced[0], None
        if previous is not None:
            signal.signal(signal.SIGUSR1, previous)


__all__ = [
    "bounded",
    "duplicate_job_id",
    "envelope_json",
    "fingerprint",
    "hold_soft_limit",
    "maybe_float_or_nan",
    "release_soft_limit",
    "settle",
    "settle_recorded",
]
