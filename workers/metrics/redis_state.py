"""Redis-side metrics, read at each scrape: what is waiting, and who is behind.

``apportion metrics`` serves these (one exporter for the deployment): queue depth,
jobs taken but unacknowledged, stream lengths, per consumer group the pending entries,
the lag and the age of the oldest unacknowledged entry, and the dead letters. Read
with a short timeout and no reconnect loop: a scrape while Redis is down answers
quickly with ``apportion_redis_up 0`` instead of hanging.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import redis

from apportion import kinds
from apportion.config.settings import Settings
from apportion.workers.health import stream_health
from apportion.workers.redis.client import client_for
from apportion.workers.redis.keys import UNACKED, Keys, queue_list


class RedisStateCollector:
    """A prometheus-client collector (``collect()`` yields metric families)."""

    def __init__(self, settings: Settings, *, timeout: float = 2.0) -> None:
        self._client = client_for(settings, timeout=timeout, retries=0)
        self._keys = Keys(settings.stream_prefix)

    def describe(self) -> list[Any]:
        return []  # families depend on what Redis holds; nothing to check at registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily("apportion_redis_up", "1 when Redis answered this scrape.")
        started = time.monotonic()
        try:
            families = self._read()
        except (redis.RedisError, OSError):
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families
        took = GaugeMetricFamily(
            "apportion_redis_scrape_seconds", "Time spent reading Redis for this scrape."
        )
        took.add_metric([], time.monotonic() - started)
        yield took

    def _read(self) -> list[Any]:
        from prometheus_client.core import GaugeMetricFamily

        client, keys = self._client, self._keys
        depth = GaugeMetricFamily(
            "apportion_queue_depth", "Jobs waiting on a queue (LLEN).", labels=["queue"]
        )
        for queue in kinds.queues():
            depth.add_metric([queue], int(client.llen(queue_list(queue))))
        unacked = GaugeMetricFamily(
            "apportion_jobs_unacked", "Jobs taken by a worker and not yet acknowledged."
        )
        unacked.add_metric([], int(client.hlen(UNACKED)))
        length = GaugeMetricFamily(
            "apportion_stream_length", "Entries in a stream (XLEN).", labels=["stream"]
        )
        lag = GaugeMetricFamily(
            "apportion_stream_consumer_lag",
            "Entries not yet delivered to a consumer group (Redis 7+).",
            labels=["stream", "group"],
        )
        pending = GaugeMetricFamily(
            "apportion_stream_pending",
            "Entries delivered to a consumer group and not yet acknowledged.",
            labels=["stream", "group"],
        )
        oldest = GaugeMetricFamily(
            "apportion_stream_oldest_pending_age_seconds",
            "Age of the oldest entry a consumer group has not acknowledged (0 if none).",
            labels=["stream", "group"],
        )
        trimmed = GaugeMetricFamily(
            "apportion_stream_trimmed_unread",
            "Entries the age cap removed before a consumer group read them, within the "
            "last APPORTION_STREAM_MAX_AGE (apportion health fails while any).",
            labels=["stream", "group"],
        )
        now = time.time()
        for stream in [*keys.all_results_streams(), keys.launch_failures_stream]:
            found = stream_health(client, stream, now, keys.trimmed_unread(stream))
            for group, lost in (found.trimmed_unread if found else {}).items():
                trimmed.add_metric([stream, group], lost)
            length.add_metric([stream], 0 if found is None else found.length)
            for group, g in (found.groups if found else {}).items():
                if g.lag is not None:
                    lag.add_metric([stream, group], g.lag)
                pending.add_metric([stream, group], g.pending)
                oldest.add_metric([stream, group], g.oldest_pending_age_s or 0.0)
        dead = GaugeMetricFamily(
            "apportion_dead_letters", "Messages on the dead-letter stream (never run)."
        )
        dead_stream = keys.dead_letters_stream
        dead.add_metric([], int(client.xlen(dead_stream)) if client.exists(dead_stream) else 0)
        return [depth, unacked, length, lag, pending, oldest, trimmed, dead]
