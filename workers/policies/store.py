"""The policy store: each pool's launch policy, versioned, in Redis.

A pool names the policy its launch_select jobs get (the job's ``pool`` field). The
pool named ``default`` (:data:`DEFAULT_POOL`, reserved) holds the global default: the
policy of every pool that has none of its own. Every save is a new version (1, 2, …)
with who saved it, when and why; the newest is the pool's current policy.

Layout, one hash per pool (``Keys.policy(pool)``) plus the set of pools
(``Keys.policy_pools``):

* ``v:<n>``   — version n as JSON: version, policy, author, comment, saved_at;
* ``current`` — the newest version's JSON again, so that a worker reads the policy a
  job gets with one ``HGET`` (both the pool's and the default's in one round trip);
* ``head``    — the newest version number, ``low`` the oldest one kept.

Saving is one Lua script, atomic on the server: two administrators saving at once get
two distinct versions, and ``seed_default`` writes version 1 only when the default has
none. The newest ``max_versions`` are kept, older ones are deleted as new ones arrive
(version numbers are never reused). Every policy is validated before it is written,
exactly as the engine validates a job's inline policy (apportion.selection.stored):
what is in the store is what a job could have sent.

Errors: invalid input raises :class:`~apportion.errors.Rejected` naming the field; Redis
unreachable, or a record that is not ours, raises
:class:`~apportion.errors.StoreUnavailable` (an infrastructure error: a worker retries
the job rather than run it with another policy; docs/operations.md).
"""

from __future__ import annotations

import difflib
import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from apportion.contracts.policy import DEFAULT_POOL, check_pool
from apportion.errors import Problem, Rejected, StoreUnavailable
from apportion.limits import DEFAULT_LIMITS, Limits
from apportion.workers.policies.text import policy_yaml
from apportion.workers.redis.client import REDIS_ERRORS, is_outage
from apportion.workers.redis.keys import Keys

# The newest versions kept per pool (APPORTION_POLICY_MAX_VERSIONS).
MAX_VERSIONS = 1000
# A policy document as JSON text (APPORTION_POLICY_MAX_BYTES). A real policy is a few
# hundred bytes; the largest part is an expression (yaql_max_expression_length).
MAX_POLICY_BYTES = 64 * 1024
MAX_AUTHOR = 256
MAX_COMMENT = 1024

_SAVE = """
-- KEYS: the pool's hash, the set of pools
-- ARGV: pool, max versions, the record's JSON after its opening brace, '1' = only if absent
if ARGV[4] == '1' and redis.call('HEXISTS', KEYS[1], 'head') == 1 then
  return false
end
local head = redis.call('HINCRBY', KEYS[1], 'head', 1)
local record = '{"version":' .. head .. ',' .. ARGV[3]
redis.call('HSET', KEYS[1], 'v:' .. head, record, 'current', record)
local low = tonumber(redis.call('HGET', KEYS[1], 'low') or '1')
local keep_from = head - tonumber(ARGV[2]) + 1
while low < keep_from do
  redis.call('HDEL', KEYS[1], 'v:' .. low)
  low = low + 1
end
redis.call('HSET', KEYS[1], 'low', low)
redis.call('SADD', KEYS[2], ARGV[1])
return record
"""


@dataclass(frozen=True)
class PolicyVersion:
    pool: str  # "default" for the global default
    version: int  # 1, 2, ...
    policy: list[dict[str, Any]]  # the module stack as saved (plain JSON data, validated)
    author: str
    comment: str
    saved_at: float  # unix seconds

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "version": self.version,
            "policy": self.policy,
            "author": self.author,
            "comment": self.comment,
            "saved_at": self.saved_at,
        }


def decode(pool: str, raw: bytes | str) -> PolicyVersion:
    """A stored record as a :class:`PolicyVersion`; StoreUnavailable if it is not one."""
    try:
        data = json.loads(raw)
        return PolicyVersion(
            pool=pool,
            version=_typed(data["version"], int),
            policy=_typed(data["policy"], list),
            author=_typed(data["author"], str),
            comment=_typed(data["comment"], str),
            saved_at=float(_typed(data["saved_at"], int | float)),
        )
    except (ValueError, TypeError, KeyError) as exc:
        raise StoreUnavailable(
            f"the policy store's record of pool {pool!r} is unreadable ({exc}); "
            "save a new version of the pool's policy (apportion policy set)"
        ) from None


def _typed(value: Any, kind: Any) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"unexpected {type(value).__name__}")
    return value


def _text(value: object, path: str, limit: int, *, empty: bool) -> str:
    if not isinstance(value, str):
        raise Rejected.at(path, f"must be text, got {type(value).__name__}")
    if not value and not empty:
        raise Rejected.at(path, "must not be empty")
    if len(value) > limit:
        raise Rejected.at(
            path, f"{len(value)} characters exceed the limit of {limit}", code="too_large"
        )
    if not value.isprintable():
        raise Rejected.at(path, "must be printable text on one line (no control characters)")
    return value


class PolicyStore:
    """Versioned policies per pool (see module docstring). Thread-safe as redis-py is."""

    def __init__(
        self,
        redis: redis.Redis,
        keys: Keys | None = None,
        *,
        max_versions: int = MAX_VERSIONS,
        max_bytes: int = MAX_POLICY_BYTES,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        if max_versions < 1 or max_bytes < 1:
            raise ValueError("max_versions and max_bytes must be at least 1")
        self._redis = redis
        self._keys = keys or Keys()
        self.max_versions = max_versions
        self.max_bytes = max_bytes
        self.limits = limits
        self._save = redis.register_script(_SAVE)

    # ---- reading ---------------------------------------------------------------------

    def pools(self) -> list[str]:
        """Every pool with a policy, ``default`` included, sorted."""
        members = self._call(lambda: self._redis.smembers(self._keys.policy_pools))
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    def current(self, pool: str) -> PolicyVersion | None:
        check_pool(pool)
        raw = self._call(lambda: self._redis.hget(self._keys.policy(pool), "current"))
        return None if raw is None else decode(pool, raw)

    def effective(self, pool: str | None) -> PolicyVersion | None:
        """The policy a job of ``pool`` gets: the pool's current version, else the
        default's (``None``: the default's). One round trip."""
        if pool is None or pool == DEFAULT_POOL:
            return self.current(DEFAULT_POOL)
        check_pool(pool)

        def both() -> list[Any]:
            pipe = self._redis.pipeline(transaction=False)
            pipe.hget(self._keys.policy(pool), "current")
            pipe.hget(self._keys.policy(DEFAULT_POOL), "current")
            return list(pipe.execute())

        own, default = self._call(both)
        if own is not None:
            return decode(pool, own)
        return None if default is None else decode(DEFAULT_POOL, default)

    def version(self, pool: str, version: int) -> PolicyVersion | None:
        check_pool(pool)
        raw = self._call(lambda: self._redis.hget(self._keys.policy(pool), f"v:{int(version)}"))
        return None if raw is None else decode(pool, raw)

    def kept(self, pool: str) -> range:
        """The version numbers kept for ``pool``, oldest first (empty: no policy)."""
        check_pool(pool)
        head, low = self._call(lambda: self._redis.hmget(self._keys.policy(pool), ["head", "low"]))
        return range(0) if head is None else range(int(low or 1), int(head) + 1)

    def history(self, pool: str, limit: int | None = None) -> list[PolicyVersion]:
        """The versions kept, newest first (at most ``limit`` of them)."""
        kept = self.kept(pool)
        if limit is not None:
            kept = kept[max(0, len(kept) - limit) :]
        if not kept:
            return []
        key = self._keys.policy(pool)
        wanted = [f"v:{n}" for n in reversed(kept)]
        raws = self._call(lambda: self._redis.hmget(key, wanted))
        # A version trimmed by a save between the two reads is simply not listed.
        return [decode(pool, raw) for raw in raws if raw is not None]

    # ---- writing ---------------------------------------------------------------------

    def save(
        self, pool: str, policy: list[dict[str, Any]], *, author: str, comment: str = ""
    ) -> PolicyVersion:
        """Validate ``policy`` and write it as the pool's next version."""
        saved = self._write(pool, policy, author=author, comment=comment, only_if_absent=False)
        assert saved is not None  # only a seed can find a version there
        return saved

    def seed_default(self, policy: list[dict[str, Any]]) -> PolicyVersion | None:
        """Write ``policy`` as version 1 of the default, only if the default has no
        version (atomic: of several workers booting at once, one seeds). None if it had."""
        return self._write(
            DEFAULT_POOL,
            policy,
            author="apportion (seeded from the default policy file)",
            comment="seeded from the worker's default policy file",
            only_if_absent=True,
        )

    def _write(
        self,
        pool: str,
        policy: list[dict[str, Any]],
        *,
        author: str,
        comment: str,
        only_if_absent: bool,
    ) -> PolicyVersion | None:
        check_pool(pool)
        author = _text(author, "author", MAX_AUTHOR, empty=False)
        comment = _text(comment, "comment", MAX_COMMENT, empty=True)
        # The size first: it bounds what validation then walks. Data that is not JSON
        # (NaN, a set, nesting deeper than Python recurses) is left for validation to name.
        try:
            body = json.dumps(policy, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            size = len(body.encode())
        except (ValueError, TypeError, RecursionError):
            size = 0
        if size > self.max_bytes:
            raise Rejected(
                f"policy: {size} bytes of JSON exceed the limit of {self.max_bytes} "
                "(raise APPORTION_POLICY_MAX_BYTES)",
                [Problem("policy", f"{size} bytes exceed the limit of {self.max_bytes}")],
                code="too_large",
            )
        # Imported here: the engine's selection package (numpy and all) is needed to save,
        # not to read (`apportion policy show` starts without it).
        from apportion.selection.stored import validate_policy

        validate_policy(policy, self.limits)
        tail = json.dumps(
            {"policy": policy, "author": author, "comment": comment, "saved_at": time.time()},
            ensure_ascii=False,
            separators=(",", ":"),
        )[1:]
        record = self._call(
            lambda: self._save(
                keys=[self._keys.policy(pool), self._keys.policy_pools],
                args=[pool, self.max_versions, tail, "1" if only_if_absent else "0"],
            )
        )
        return None if record is None else decode(pool, record)

    def _call(self, read: Any) -> Any:
        try:
            return read()
        except REDIS_ERRORS as exc:
            if not is_outage(exc):
                raise
            raise StoreUnavailable(f"the policy store is unavailable: {exc}") from exc


def diff(a: PolicyVersion, b: PolicyVersion) -> str:
    """Unified diff of the YAML forms of ``a`` and ``b`` ("" when they are the same)."""
    lines = difflib.unified_diff(
        policy_yaml(a.policy).splitlines(keepends=True),
        policy_yaml(b.policy).splitlines(keepends=True),
        fromfile=f"{a.pool} v{a.version}",
        tofile=f"{b.pool} v{b.version}",
    )
    return "".join(lines)


__all__ = [
    "DEFAULT_POOL",
    "MAX_POLICY_BYTES",
    "MAX_VERSIONS",
    "PolicyStore",
    "PolicyVersion",
    "decode",
    "diff",
]
