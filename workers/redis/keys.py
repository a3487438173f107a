"""Every Redis key and stream name apportion uses, in one place.

Celery's own keys (queues such as ``partition``, ``unacked``, ``celery-task-meta-*``)
are named by kombu/Celery; everything apportion writes itself is named here, and so are
those of kombu's that apportion reads (:data:`UNACKED`, :func:`queue_list`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from apportion import kinds

SUBSCRIBER_GROUP = "apportion-subscribers"

# kombu's Redis transport names these (apportion sets neither its unacked_key nor a
# global_keyprefix); tests/unit/service/test_kombu_canary.py checks they still match.
# The hash of messages taken by a worker and not yet acknowledged, by delivery tag.
UNACKED = "unacked"


def queue_list(queue: str) -> str:
    """The list a queue's waiting messages are on (kombu: the queue's own name for the
    default priority; other priorities have lists of their own, not counted here)."""
    return queue


def min_stream_id(max_age_seconds: float, now: float | None = None) -> str:
    """The stream id below which entries are older than ``max_age_seconds`` (XTRIM MINID):
    stream ids start with their entry's time in milliseconds."""
    now = time.time() if now is None else now
    return f"{max(0, int((now - max_age_seconds) * 1000))}-0"


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str = "apportion"

    def results_stream(self, kind: str) -> str:
        """One stream per job kind, so a subscriber reads only the kinds it cares about."""
        return f"{self.prefix}:results:{kind}"

    def progress_stream(self, kind: str) -> str:
        """Progress of long jobs (heal_org), beside the result stream: that one keeps its
        one entry per job_id, which answer-waiters and subscribers count on."""
        return f"{self.prefix}:progress:{kind}"

    def all_results_streams(self) -> list[str]:
        return [self.results_stream(k) for k in kinds.names()]

    def trimmed_unread(self, stream: str) -> str:
        """Hash of entries of ``stream`` removed by its age cap before a consumer group
        read them, per group (workers/redis/trim.py); health fails while it has any."""
        return f"{self.prefix}:trimmed-unread:{stream}"

    def published_marker(self, kind: str, job_id: str) -> str:
        """Set once a job's result event is on its stream; makes publishing idempotent."""
        return f"{self.prefix}:published:{kind}:{job_id}"

    @property
    def launch_failures_stream(self) -> str:
        return f"{self.prefix}:launch-failures"

    def failure_history(self, account: str) -> str:
        """Sorted set of one account's failure event ids, scored by failure time."""
        return f"{self.prefix}:failures:{account}"

    def failure_event_marker(self, event_id: str) -> str:
        """Set once a launch-outcome event id has been recorded (idempotency)."""
        return f"{self.prefix}:outcome:{event_id}"

    @property
    def dead_letters_stream(self) -> str:
        """Messages a worker will not run: undecodable, or quarantined (workers/broker/)."""
        return f"{self.prefix}:dead-letters"

    @property
    def delivery_count_prefix(self) -> str:
        """Prefix of :meth:`delivery_count` (the transport's Lua script appends the tag)."""
        return f"{self.prefix}:deliveries:"

    def delivery_count(self, delivery_tag: str) -> str:
        """How many times a message was handed to a worker without an answer (quarantine)."""
        return f"{self.delivery_count_prefix}{delivery_tag}"

    @property
    def takers(self) -> str:
        """Sorted set of every worker's taking lists (:meth:`taking`), scored by when
        their worker last said it is alive (workers/broker/transport.py)."""
        return f"{self.prefix}:takers"

    @property
    def taking_prefix(self) -> str:
        return f"{self.prefix}:taking:"

    def taking(self, token: str, source: str) -> str:
        """The list a worker's channel moves items of queue list ``source`` into as it
        takes them (BLMOVE), until they are recorded as unacknowledged. ``token`` names
        the channel's current connection; it holds no ``:``, so the source (whatever
        it holds) is everything after it."""
        return f"{self.taking_prefix}{token}:{source}"

    def taking_source(self, taking: str) -> str | None:
        """The queue list a taking list (:meth:`taking`) receives from."""
        if not taking.startswith(self.taking_prefix):
            return None
        _token, sep, source = taking[len(self.taking_prefix) :].partition(":")
        return source if sep else None

    def policy(self, pool: str) -> str:
        """Hash of one pool's policy versions (workers/policies/store.py): ``head``,
        ``low``, ``current`` and ``v:<n>`` per version kept. The pool name comes last, so
        no pool name (``:`` is allowed in one) can name another pool's key."""
        return f"{self.prefix}:policy:{pool}"

    @property
    def policy_pools(self) -> str:
        """Set of the pools that have a policy in the store."""
        return f"{self.prefix}:policy-pools"

    def recent_jobs(self, kind: str) -> str:
        """List of the newest jobs of ``kind`` as sent (workers/studio/recent.py)."""
        return f"{self.prefix}:recent-jobs:{kind}"
