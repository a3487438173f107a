"""Settings from the environment (``APPORTION_*``), validated at start-up.

Nested values use ``__``: ``APPORTION_LIMITS__MAX_POOLS=20000``,
``APPORTION_TIME_LIMITS__PARTITION__HARD=120``. A setting that would make the
worker unsafe (a visibility timeout not longer than the longest hard time limit,
which would let Redis redeliver a job that is still running) is refused here, at
boot, rather than discovered in production. So is an ``APPORTION_*`` variable that
names no setting (EngineSettings' check, apportion/setting_names.py): a field added here
is named in setting_names.SERVICE_SETTINGS too, for ``apportion solve`` to know it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from apportion import kinds
from apportion.engine_settings import EngineSettings


class TimeLimit(BaseModel):
    """Soft limit raises inside the task (we answer ``rejected``); hard limit kills the child."""

    model_config = ConfigDict(frozen=True)

    soft: float = Field(gt=0)
    hard: float = Field(gt=0)

    @model_validator(mode="after")
    def _soft_before_hard(self) -> TimeLimit:
        if self.soft >= self.hard:
            raise ValueError(f"soft time limit {self.soft} must be below hard limit {self.hard}")
        return self


class TimeLimitOverride(BaseModel):
    """An operator's limits for one queue; what is left out keeps each kind's default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    soft: float | None = Field(None, gt=0)
    hard: float | None = Field(None, gt=0)


# The shortest reply timeout Settings.reply_timeout derives from a soft limit: a local
# Redis answers in well under a millisecond, but a loaded host can hold a reply back for
# a few hundred, and a timeout is a dropped connection and a reconnection.
MIN_REPLY_TIMEOUT = 0.5

# The URL schemes every connection (broker, result backend, apportion's own clients)
# understands, and for which the worker's transport puts the gate in front of the pool.
# A worker on any other broker would hand jobs to Celery ungated: refused at start-up.
URL_SCHEMES = ("redis", "rediss", "sentinel")


class Settings(EngineSettings):
    """Everything a worker reads: the engine's settings and the service's own."""

    # redis://[user:password@]host:port/db, rediss://… (TLS; ssl_cert_reqs, ssl_ca_certs,
    # ssl_certfile, ssl_keyfile in the query), or Sentinel:
    # sentinel://h1:26379/0;sentinel://h2:26379 with sentinel_master (the database on the
    # first URL: every client reads it there).
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description=(
            "The Redis every part uses: broker, result backend, result streams, stores. "
            "`redis://[user:password@]host:port/db`, `rediss://…` (TLS: `ssl_cert_reqs`, "
            "`ssl_ca_certs`, `ssl_certfile`, `ssl_keyfile` in the query) or "
            "`sentinel://h1:26379/0;sentinel://h2:26379` with `APPORTION_SENTINEL_MASTER`"
        ),
    )
    # Broker and result backend default to redis_url; split them when operators want to.
    broker_url: str | None = Field(
        None,
        description="The broker only, to split it from `APPORTION_REDIS_URL`. Unset: the Redis URL",
    )
    result_backend: str | None = Field(
        None,
        description=(
            "The Celery result backend only, to split it from `APPORTION_REDIS_URL`. Unset: the "
            "Redis URL"
        ),
    )
    # With sentinel:// URLs: the master's name, as the sentinels monitor it.
    sentinel_master: str | None = Field(
        None,
        min_length=1,
        description=(
            "With `sentinel://` URLs: the name of the master the sentinels monitor "
            "(docs/operations.md, Sentinel)"
        ),
    )
    # The sentinels' own password (their requirepass), if they have one. A password in
    # the URL (sentinel://:secret@h1:26379) is the master's and its replicas'.
    sentinel_password: SecretStr | None = Field(
        None,
        description=(
            "The sentinels' own password, when they have one (a password in the URL is the "
            "master's and its replicas')"
        ),
    )

    # Every Redis connection (broker, result backend, apportion's own clients): seconds to
    # connect, seconds to wait for any one reply, and TCP keepalive and PING health checks
    # that find a connection a partition killed silently. A reply timeout shorter than
    # every soft time limit makes a wait on Redis an outage (retried), never a job's time
    # (workers/job_clock.py). Keepalive: first probe after this many idle seconds, then
    # every third of it, the connection dropped after 3 unanswered (Linux options).
    redis_socket_timeout: float = Field(
        10.0,
        gt=0,
        le=300,
        description=(
            "Seconds any Redis connection (broker, result backend, apportion's own) waits for "
            "one reply; lowered to half the shortest soft time limit when above it "
            "(docs/operations.md, Redis on a bad day)"
        ),
    )
    redis_connect_timeout: float = Field(
        5.0, gt=0, le=300, description="Seconds to open a Redis connection"
    )
    # Also how long the worker's blocking pop may go unanswered before its connection is
    # taken for dead (kombu: the pop's 1 s plus this, checked every this many seconds):
    # 4 finds a connection a partition froze within 9 s, so the worker says so within
    # the 15 s an operator expects; a PING costs a connection well under a millisecond.
    redis_health_check_interval: int = Field(
        4,
        ge=0,
        le=3600,
        description=(
            "Seconds a Redis connection may sit idle before it is checked with a PING on its "
            "next use (0: never); a worker's blocking pop unanswered this long past its own "
            "timeout drops its connection"
        ),
    )
    redis_keepalive_seconds: int = Field(
        10,
        ge=3,
        le=7200,
        description=(
            "TCP keepalive on every Redis connection: the first probe after this many idle "
            "seconds, then every third of it; 3 unanswered drop the connection"
        ),
    )

    # Seconds Redis waits for an ack before redelivering a message to another worker.
    visibility_timeout: int = Field(
        3600,
        gt=0,
        description=(
            "Seconds before a job taken but not acknowledged is given to another worker; must "
            "exceed every hard time limit"
        ),
    )
    # How often workers sweep for messages whose visibility timeout has passed (kombu).
    unacked_restore_interval: int = Field(
        10,
        gt=0,
        description=(
            "Seconds between a worker's sweeps for jobs whose visibility timeout has passed"
        ),
    )
    # Per queue: APPORTION_TIME_LIMITS__PARTITION__HARD=120. Defaults come from the job
    # kinds on the queue (apportion.kinds); an unknown queue name is refused at start-up.
    time_limits: dict[str, TimeLimitOverride] = Field(
        default_factory=dict,
        description=(
            "Soft and hard time limits per queue, in seconds: "
            "`APPORTION_TIME_LIMITS__<QUEUE>__SOFT` and `__HARD`; set for a queue, they apply to "
            "every kind on it. A job past its soft limit is answered `rejected`/`time_limit`"
        ),
    )
    result_expires: int = Field(
        86_400,
        gt=0,
        description=(
            "Seconds a job's answer stays in the result backend (`celery-task-meta-<task id>`)"
        ),
    )

    stream_prefix: str = Field(
        "apportion",
        min_length=1,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="Prefix of every key apportion writes (`apportion:results:<kind>` …)",
    )
    stream_maxlen: int = Field(
        100_000,
        gt=0,
        description="Approximate cap of each stream, in entries (`MAXLEN ~`)",
    )
    # Streams are trimmed by age too (MINID): an entry older than this is dropped even
    # when the stream holds fewer than stream_maxlen (the result backend keeps results
    # for result_expires; a day by default for both).
    stream_max_age: int = Field(
        86_400,
        gt=0,
        description=(
            "Seconds a stream entry is kept (results, launch failures); must exceed the "
            "visibility timeout"
        ),
    )
    # How long "this job's result was already published" is remembered (idempotency window).
    # Must cover the longest possible redelivery delay; a day is far beyond it.
    dedup_ttl: int = Field(
        86_400,
        gt=0,
        description=(
            "Seconds a job_id is remembered as answered (and its content, for "
            "`duplicate_job_id`); must exceed the visibility timeout"
        ),
    )

    # heal_org reports its progress between consumers; the worker publishes one event
    # every so many (docs/contract.md, "Progress of a long job").
    heal_progress_every: int = Field(
        100,
        ge=0,
        description=(
            "A heal_org job publishes a progress event every this many consumers "
            "(`apportion:progress:heal_org`); 0: none"
        ),
    )

    publish_retries: int = Field(
        5,
        ge=0,
        description=(
            "Task retries, with backoff, when the answer cannot be published (Redis down); after "
            "them the job is requeued, never dropped"
        ),
    )
    publish_backoff_max: int = Field(
        60,
        gt=0,
        description="The longest wait between those retries, in seconds",
    )

    # Failure history: how long launch failures are kept (must cover every
    # failure_penalty window_hours; a longer window is clamped to this).
    failure_retention_hours: float = Field(
        24.0,
        gt=0,
        le=24 * 365,
        description=(
            "Hours launch failures are kept; longer `failure_penalty` windows are clamped to it, "
            "and an older failure is answered `recorded: false`"
        ),
    )
    # The newest failures kept per account (older ones are dropped first): an account
    # failing without end cannot grow its set without bound. failure_penalty saturates
    # long before (it counts failures in a window).
    failure_history_max_per_account: int = Field(
        10_000,
        gt=0,
        description="The newest launch failures kept per account",
    )
    # Launcher hook for launch_select, a name from workers/launch/launcher.py LAUNCHERS:
    # "none" (selection only) or "simulated" (demo and benchmarks: each account fails
    # with its rate from simulated_failure_rates). Checked when the worker boots.
    launcher: str = Field(
        "none",
        description=(
            "`none`: selection only. `simulated`: the worker attempts each launch, records "
            "failures and reselects (demo, benchmarks)"
        ),
    )
    simulated_failure_rates: dict[str, float] = Field(
        default_factory=dict,
        description=(
            'With the simulated launcher: the failure rate per account, as JSON (`{"vsphere-a": '
            "0.7}`)"
        ),
    )
    launch_attempts: int = Field(
        3,
        ge=1,
        le=20,
        description="Launch attempts per job, with a launcher",
    )
    # The newest launch_select jobs kept for the policy studio to offer (0: none kept),
    # each at most recent_job_max_bytes of JSON (workers/studio/recent.py).
    recent_jobs: int = Field(
        20,
        ge=0,
        le=1000,
        description="The newest launch_select jobs kept for the policy studio to offer (0: none)",
    )
    recent_job_max_bytes: int = Field(
        1024 * 1024,
        gt=0,
        description="The largest of those jobs kept, as JSON bytes",
    )
    # The policy studio (workers/studio/): the largest job it accepts as an upload, the
    # computed deployables it keeps in memory (their JSON's size in all; a larger one
    # alone), uploads' text kept on disk to compute again, and how long a client has to
    # send a request's headers, then its body, before the connection is closed.
    studio_max_upload_bytes: int = Field(
        8 * 1024 * 1024,
        gt=0,
        description="The largest job the studio accepts as an upload, in bytes",
    )
    studio_loaded_bytes: int = Field(
        8 * 1024 * 1024,
        gt=0,
        description=(
            "The computed deployables the studio keeps in memory, by the size of their JSON "
            "in all (a larger one is kept alone); the least recently used go first"
        ),
    )
    studio_uploads_kept: int = Field(
        32,
        ge=1,
        le=10_000,
        description="Uploads whose text the studio keeps on disk, to compute again when picked",
    )
    studio_header_timeout: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="Seconds a studio client has to send a request's headers before it is closed",
    )
    studio_body_timeout: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Seconds a studio client has to send a request's body (then 408 and closed)",
    )

    # The policy store (workers/policies/): the newest versions kept per pool (older ones
    # are deleted as new ones are saved) and the largest policy accepted, as JSON.
    policy_max_versions: int = Field(
        1000,
        ge=1,
        le=100_000,
        description="Policy store: the newest versions kept per pool",
    )
    policy_max_bytes: int = Field(
        64 * 1024,
        ge=1024,
        le=16 * 1024 * 1024,
        description="Policy store: the largest policy accepted, as JSON bytes",
    )

    # The gate in front of the pool (workers/broker/gate.py) and the dead letters.
    # A queue item as queued (base64 body and headers). Larger items are dead-lettered
    # without being decoded. Default: a job of limits.max_payload_bytes, in base64,
    # plus 1 MiB of headers.
    max_message_bytes: int | None = Field(
        None,
        gt=0,
        description=(
            "The largest queue item decoded, as queued (base64 body and headers); larger ones are "
            "dead-lettered undecoded. Unset: `APPORTION_LIMITS__MAX_PAYLOAD_BYTES` × 4/3 + 1 MiB "
            "(43.7 MiB)"
        ),
    )
    # Deliveries of one message that ended without an answer (its worker died) before
    # the next delivery is quarantined to the dead-letter stream instead of being run.
    quarantine_after: int = Field(
        2,
        ge=1,
        le=100,
        description=(
            "Deliveries without an answer (the worker died each time) before a message is "
            "quarantined to the dead letters"
        ),
    )
    # The furthest ETA (countdown) a message may ask for: a worker holds ETA messages in
    # memory until they are due. Must be below the visibility timeout; by default 600 s
    # or half the visibility timeout, whichever is shorter.
    max_eta_seconds: int | None = Field(
        None,
        gt=0,
        description=(
            "The furthest ETA a message keeps (a worker holds ETA messages in memory); must be "
            "below the visibility timeout. Unset: 600, or half the visibility timeout if shorter"
        ),
    )
    dead_letter_maxlen: int = Field(
        10_000,
        gt=0,
        description="Approximate cap of the dead-letter stream, in entries",
    )
    dead_letter_max_age: int = Field(
        7 * 86_400,
        gt=0,
        description="Seconds a dead letter is kept",
    )
    # The copy of a dead-lettered message kept for inspection and requeueing.
    dead_letter_copy_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Bytes of each dead-lettered item kept (a truncated one cannot be requeued)",
    )

    # Observability. A worker serves its job metrics (jobs by kind and status, engine and
    # end-to-end latency) on this port when it is set (workers/metrics/jobs.py).
    metrics_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description=(
            "A worker serves its job metrics on this port (docs/operations.md). Unset: no metrics "
            "server"
        ),
    )
    metrics_address: str = Field(
        "127.0.0.1",
        description="The address the metrics server binds (`0.0.0.0` to be scraped from elsewhere)",
    )
    # Worker logs: "text" (Celery's format) or "json" (one object per line). Read by
    # workers/logs.py before the settings are validated; listed here so that it is
    # documented, checked and known.
    log_format: Literal["text", "json"] = Field(
        "text",
        description="`text` (Celery's format) or `json` (one JSON object per log record)",
    )
    # Also keep Celery's own "received"/"succeeded" lines per task at INFO (off: one line
    # per job, workers/logs.py). For tooling that reads stock Celery's log lines.
    log_celery_task_lines: bool = Field(
        False,
        description="Also keep Celery's own `received`/`succeeded` lines per task at INFO",
    )

    @model_validator(mode="after")
    def _supported_urls(self) -> Settings:
        for name, url in (
            ("APPORTION_REDIS_URL", self.redis_url),
            ("APPORTION_BROKER_URL", self.broker_url),
            ("APPORTION_RESULT_BACKEND", self.result_backend),
        ):
            if url is None:
                continue
            schemes = {url_scheme(part) for part in url.split(";")}
            if not schemes <= set(URL_SCHEMES) or len(schemes) != 1:
                raise ValueError(
                    f"{name} must be a redis://, rediss:// or sentinel:// URL (several "
                    f"sentinels: sentinel://h1:26379;sentinel://h2:26379), not "
                    f"{sorted(schemes)}"
                )
            if schemes == {"rediss"} and "ssl_cert_reqs=" not in url:
                # Without it kombu connects with certificate checks off (CERT_NONE).
                raise ValueError(
                    f"{name}: a rediss:// URL must say how the server's certificate is "
                    "checked: ?ssl_cert_reqs=required&ssl_ca_certs=/path/to/ca.pem "
                    "(docs/operations.md, TLS)"
                )
            if schemes == {"sentinel"} and self.sentinel_master is None:
                raise ValueError(
                    f"{name} names sentinels: set APPORTION_SENTINEL_MASTER to the name "
                    "of the master they monitor"
                )
            if schemes == {"sentinel"}:
                _one_sentinel_database(name, url)
            _ports_and_databases_readable(name, url)
        return self

    @property
    def sentinel_secret(self) -> str | None:
        return self.sentinel_password.get_secret_value() if self.sentinel_password else None

    @property
    def broker(self) -> str:
        return self.broker_url or self.redis_url

    @property
    def backend(self) -> str:
        return self.result_backend or self.redis_url

    def time_limit(self, kind: kinds.JobKind) -> TimeLimit:
        """A kind's limits: its own, with what the operator set for its queue in their place.

        Operators set limits per queue (workers serve queues); a kind declares its own
        defaults, so two kinds sharing a queue keep theirs until the operator sets one.
        """
        override = self.time_limits.get(kind.queue)
        return TimeLimit(
            soft=override.soft if override and override.soft is not None else kind.soft_time_limit,
            hard=override.hard if override and override.hard is not None else kind.time_limit,
        )

    @property
    def longest_hard_limit(self) -> float:
        return max(self.time_limit(kind).hard for kind in kinds.REGISTRY.values())

    @model_validator(mode="after")
    def _kinds_and_their_queues(self) -> Settings:
        kinds.load_modules(self.kind_modules)  # no-op if EngineSettings' validator ran first
        unknown = sorted(set(self.time_limits) - set(kinds.queues()))
        if unknown:
            raise ValueError(
                f"APPORTION_TIME_LIMITS names unknown queue(s) {unknown}; "
                f"queues are {list(kinds.queues())}"
            )
        for kind in kinds.REGISTRY.values():
            self.time_limit(kind)  # soft below hard, after the override
        return self

    @property
    def shortest_soft_limit(self) -> float:
        return min(self.time_limit(kind).soft for kind in kinds.REGISTRY.values())

    @property
    def reply_timeout(self) -> float:
        """Seconds every Redis connection waits for one reply: APPORTION_REDIS_SOCKET_TIMEOUT,
        lowered to half the shortest soft time limit (never below :data:`MIN_REPLY_TIMEOUT`).

        A wait on Redis inside a job must end, and be retried, well before the job's soft
        limit, or the limit lands in it (workers/job_clock.py). Lowering rather than
        refusing keeps short limits working (tests and small deployments set them alone),
        and the worker logs the value it uses.
        """
        return min(self.redis_socket_timeout, max(MIN_REPLY_TIMEOUT, self.shortest_soft_limit / 2))

    def keepalive_options(self) -> dict[int, int]:
        """TCP keepalive options for redis-py and kombu (empty where the OS lacks them)."""
        import socket

        idle = self.redis_keepalive_seconds
        names = {"TCP_KEEPIDLE": idle, "TCP_KEEPINTVL": max(1, idle // 3), "TCP_KEEPCNT": 3}
        return {getattr(socket, n): v for n, v in names.items() if hasattr(socket, n)}

    @property
    def message_limit(self) -> int:
        """The largest queue item the gate decodes (see max_message_bytes)."""
        if self.max_message_bytes is not None:
            return self.max_message_bytes
        return -(-self.limits.max_payload_bytes * 4 // 3) + 1024 * 1024

    @property
    def eta_limit(self) -> int:
        """The furthest ETA the gate lets a message keep (see max_eta_seconds)."""
        if self.max_eta_seconds is not None:
            return self.max_eta_seconds
        return max(1, min(600, self.visibility_timeout // 2))

    @model_validator(mode="after")
    def _eta_within_visibility(self) -> Settings:
        # A message held for its ETA is unacknowledged in Redis the whole time: past the
        # visibility timeout another worker would take it too.
        if self.max_eta_seconds is not None and self.max_eta_seconds >= self.visibility_timeout:
            raise ValueError(
                f"APPORTION_MAX_ETA_SECONDS={self.max_eta_seconds} must be below "
                f"APPORTION_VISIBILITY_TIMEOUT={self.visibility_timeout}"
            )
        return self

    @model_validator(mode="after")
    def _visibility_outlasts_every_task(self) -> Settings:
        longest = self.longest_hard_limit
        if self.visibility_timeout <= longest:
            raise ValueError(
                f"APPORTION_VISIBILITY_TIMEOUT={self.visibility_timeout} must be longer than the "
                f"longest hard time limit ({longest:g} s), or Redis would redeliver running jobs"
            )
        return self

    @model_validator(mode="after")
    def _idempotency_outlasts_redelivery(self) -> Settings:
        # A job is redelivered up to a visibility timeout after its worker died, perhaps
        # after it had published: its "already published" marker (and a launch outcome's
        # "already recorded" marker, kept as long as the failure history) must still be
        # there, or the redelivered job publishes (or records) a second time.
        vt = self.visibility_timeout
        if self.dedup_ttl <= vt:
            raise ValueError(
                f"APPORTION_DEDUP_TTL={self.dedup_ttl} must be longer than "
                f"APPORTION_VISIBILITY_TIMEOUT={vt}, or a redelivered job could publish twice"
            )
        if self.failure_retention_hours * 3600 <= vt:
            raise ValueError(
                f"APPORTION_FAILURE_RETENTION_HOURS={self.failure_retention_hours:g} must be "
                f"longer than APPORTION_VISIBILITY_TIMEOUT={vt} s, or a redelivered launch "
                "outcome could be recorded twice"
            )
        # The redelivered job that finds its marker answers with the event the stream
        # holds (workers/results/answers.py). Trimmed by age before then, the event is
        # gone while the marker lives, and the job answers with a fresh envelope: for
        # launch_select, whose dice may differ, another answer than the one on the
        # stream. (Trimming by count, APPORTION_STREAM_MAXLEN, has no time to compare:
        # docs/operations.md says how to size it.)
        if self.stream_max_age <= vt:
            raise ValueError(
                f"APPORTION_STREAM_MAX_AGE={self.stream_max_age} must be longer than "
                f"APPORTION_VISIBILITY_TIMEOUT={vt}, or a redelivered job could find its "
                "event trimmed and answer differently from the stream"
            )
        return self


def url_scheme(url: str) -> str:
    try:
        return urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return ""


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process-wide settings, read once from the environment."""
    return Settings()


def _ports_and_databases_readable(name: str, url: str) -> None:
    """Refuse what would fail only when a client first connects, or be read differently
    by each client: a port that is no number from 1 to 65535, and a ``db`` query option
    (redis-py and Celery's result backend take ``?db=N`` over the URL's path; kombu's
    ``Connection`` refuses it with a TypeError, so the worker would not start). The URL
    is not repeated: it may hold a password.
    """
    for part in url.split(";"):
        parts = urlsplit(part.strip())
        try:
            port = parts.port  # urllib checks the port when it is read
        except ValueError:
            port = 0
        if port is not None and not 0 < port <= 65535:
            raise ValueError(f"{name}: a port must be a number from 1 to 65535")
        if "db" in parse_qs(parts.query):
            raise ValueError(
                f"{name}: write the database as the URL's path (redis://host:6379/2), "
                "not as ?db=, which Celery's transport does not take"
            )


def _one_sentinel_database(name: str, url: str) -> None:
    """Refuse a Sentinel list whose database is not a number, or is named differently
    after the first URL.

    kombu, Celery's result backend and apportion's own client
    (workers/redis/client.py) all take the database from the first URL of the list, so
    a number written on another one only (``…;sentinel://h3:26379/2``) would be ignored:
    the keys would land in the first URL's database. The values are not repeated in
    the message: a password with an unescaped ``/`` would show up as a "database".
    """
    databases = [urlsplit(part).path.strip("/") for part in url.split(";")]
    if not all(db.isdigit() for db in databases if db):
        raise ValueError(f"{name}: a sentinel URL's database must be a number (…/0)")
    first = int(databases[0] or 0)
    if any(db and int(db) != first for db in databases[1:]):
        raise ValueError(
            f"{name}: the database is read from the first sentinel URL ({first}); a later "
            "URL names another one: write it on the first URL"
        )
