"""A short record of the newest launch_select jobs, for the studio to offer.

The result stream carries each job's envelope (its answer), not the job: the studio
cannot tune a policy against an answer. So the worker also keeps the newest
``recent_jobs`` launch_select jobs as sent (``{prefix}:recent-jobs:launch_select``, a
list: ``LPUSH`` + ``LTRIM`` + ``EXPIRE`` in one pipeline), each at most
``recent_job_max_bytes`` of JSON (a larger job is simply not kept). It expires with
the result streams' age limit, and ``APPORTION_RECENT_JOBS=0`` turns it off.

Best effort: keeping a job must never fail or delay its answer, so an unreachable
Redis is logged and the job is not kept.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import redis

from apportion.errors import StoreUnavailable
from apportion.workers.redis.client import TRANSIENT_ERRORS
from apportion.workers.redis.keys import Keys

log = logging.getLogger("apportion.studio.recent")
# Redis down, or the key holding something else: the job is not kept.
_NOT_KEPT: tuple[type[Exception], ...] = (*TRANSIENT_ERRORS, redis.ResponseError)
KIND = "launch_select"


class RecentJobs:
    def __init__(
        self, client: redis.Redis, keys: Keys, *, keep: int, max_bytes: int, ttl_seconds: int
    ) -> None:
        self._client = client
        self._key = keys.recent_jobs(KIND)
        self.keep = keep
        self.max_bytes = max_bytes
        self._ttl = ttl_seconds

    def remember(self, job: Any) -> bool:
        """Keep ``job`` (JSON data) as the newest; False when it is not kept."""
        if self.keep <= 0 or not isinstance(job, dict):
            return False
        try:
            text = orjson.dumps(job)
        except (TypeError, orjson.JSONEncodeError):
            return False
        if len(text) > self.max_bytes:
            return False
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.lpush(self._key, text)
            pipe.ltrim(self._key, 0, self.keep - 1)
            pipe.expire(self._key, self._ttl)
            pipe.execute()
        except _NOT_KEPT as exc:
            log.warning("the recent launch_select jobs record was not updated: %s", exc)
            return False
        return True

    def jobs(self) -> list[Any]:
        """The jobs kept, newest first (unreadable entries skipped).

        Raises StoreUnavailable when Redis does not answer.
        """
        try:
            kept = self._client.lrange(self._key, 0, max(self.keep - 1, 0))
        except _NOT_KEPT as exc:
            raise StoreUnavailable(f"the recent launch_select jobs are unavailable: {exc}") from exc
        out = []
        for raw in kept:
            try:
                out.append(orjson.loads(raw))
            except orjson.JSONDecodeError:
                continue
        return out
