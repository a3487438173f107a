"""Seeding the global default from the default policy file when a worker boots."""

from __future__ import annotations

import logging

from apportion.config.settings import Settings
from apportion.engine_settings import load_default_policy
from apportion.errors import Rejected, StoreUnavailable
from apportion.workers.policies.store import PolicyVersion
from apportion.workers.redis.client import client_for

log = logging.getLogger("apportion.workers.policies")


def seed_default_policy(settings: Settings) -> PolicyVersion | None:
    """Write the default policy file as version 1 of the store's ``default`` pool, when
    the store has no default yet (of several workers booting at once, one writes it).

    Redis unreachable is logged, not fatal: until the default is seeded, jobs of pools
    without a policy get the same file's policy (the result says ``source: file``). A
    file the store refuses (unknown keys, over the size limit) stops the worker, as a
    broken default policy does.
    """
    from apportion.workers.runtime import policy_store

    policy = load_default_policy(settings.default_policy_file)
    if policy is None:
        return None
    client = client_for(settings, timeout=5.0, retries=2)
    try:
        seeded = policy_store(settings, client).seed_default([dict(m) for m in policy])
    except StoreUnavailable as exc:
        log.warning("the default policy was not seeded into the policy store: %s", exc)
        return None
    except Rejected as exc:
        raise ValueError(f"the default policy file cannot be stored: {exc.message}") from exc
    finally:
        client.close()
    if seeded is not None:
        log.info("policy store: seeded the default policy (version 1) from the default file")
    return seeded
