"""Progress events of long jobs (heal_org) on ``{prefix}:progress:{kind}``.

The engine reports after each consumer (``Context.progress``); :meth:`ProgressEvents.reporter`
turns every ``every``-th report into one stream entry: ``job_id``, ``kind``, ``status``
``progress``, ``consumers_done``, ``consumers_total``. The last consumer is not
reported: the job's answer on its result stream says it.

Progress is for watching, never part of the answer: an event that cannot be published
(Redis away) is logged and the job goes on without further progress events, rather
than being retried for them. A job run again (redelivered, retried) reports again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis
from redis.typing import EncodableT, FieldT

from apportion.workers.redis.client import REDIS_ERRORS
from apportion.workers.redis.keys import Keys

log = logging.getLogger("apportion.progress")

Reporter = Callable[[int, int], None]


class ProgressEvents:
    """Appends progress events to the kinds' progress streams (capped, ``MAXLEN ~``)."""

    def __init__(self, client: redis.Redis, keys: Keys, *, maxlen: int) -> None:
        self._client = client
        self._keys = keys
        self._maxlen = maxlen

    def reporter(self, kind: str, job_id: str, every: int) -> Reporter | None:
        """What the engine is given for one job: publishes every ``every`` consumers
        (None when ``every`` is 0: no events)."""
        if every <= 0:
            return None
        stream = self._keys.progress_stream(kind)
        failed = False

        def report(done: int, total: int) -> None:
            nonlocal failed
            if failed or done % every or done >= total:
                return
            fields: dict[FieldT, EncodableT] = {
                "job_id": job_id,
                "kind": kind,
                "status": "progress",
                "consumers_done": done,
                "consumers_total": total,
            }
            try:
                self._client.xadd(stream, fields, maxlen=self._maxlen, approximate=True)
            except REDIS_ERRORS as exc:
                failed = True
                log.warning("progress of %s not published (%s); no more for this job", job_id, exc)

        return report
