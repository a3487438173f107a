"""``apportion dead-letters``: list the dead-letter stream, show or requeue one entry."""

from __future__ import annotations

import json
import sys

from apportion.config.settings import get_settings
from apportion.workers.broker.dead_letters import (
    CannotRequeue,
    DeadLetterPolicy,
    DeadLetters,
    describe,
)
from apportion.workers.redis.client import TRANSIENT_ERRORS, get_redis
from apportion.workers.redis.keys import Keys


def _store() -> DeadLetters:
    settings = get_settings()
    policy = DeadLetterPolicy(
        maxlen=settings.dead_letter_maxlen,
        max_age_seconds=settings.dead_letter_max_age,
        copy_bytes=settings.dead_letter_copy_bytes,
    )
    return DeadLetters(get_redis(settings), Keys(settings.stream_prefix), policy)


def run(
    *, count: int, reason: str | None, as_json: bool, show: str | None, requeue: str | None
) -> int:
    """Exit 0 done, 1 Redis unreachable or the entry cannot be requeued, 3 no such entry."""
    store = _store()
    try:
        if requeue is not None:
            letter = store.requeue(requeue)
            print(f"requeued {requeue} onto {letter.fields.get('queue')}")
            return 0
        if show is not None:
            found = store.get(show)  # a malformed id: CannotRequeue, exit 1
            if found is None:
                print(f"apportion dead-letters: no entry {show}", file=sys.stderr)
                return 3
            sys.stdout.write(json.dumps(found.summary(), indent=2, ensure_ascii=False) + "\n")
            return 0
        letters = store.newest(count, reason)
    except CannotRequeue as exc:
        print(f"apportion dead-letters: {exc}", file=sys.stderr)
        return 1
    except TRANSIENT_ERRORS as exc:
        print(f"apportion dead-letters: cannot reach Redis: {exc}", file=sys.stderr)
        return 1
    if as_json:
        sys.stdout.write(json.dumps([letter.summary() for letter in letters], ensure_ascii=False))
        sys.stdout.write("\n")
    else:
        for letter in letters:
            print(describe(letter))
        if not letters:
            print("no dead letters", file=sys.stderr)
    return 0
