"""Job metrics a worker serves: jobs by kind and status, engine and end-to-end latency.

Off unless ``APPORTION_METRICS_PORT`` is set: then the worker's main process serves
``/metrics`` on that port, and every pool process records into prometheus-client's
multiprocess files (a private directory per worker, or ``PROMETHEUS_MULTIPROC_DIR``
when the operator sets one), which the main process sums at each scrape. Only
counters and histograms are recorded here, which sum correctly across the pool's
processes, including those that have exited (``--max-tasks-per-child``).

Redis-side figures (queue depth, stream length, consumer lag, dead letters) are one
value for the whole deployment, not per worker: ``apportion metrics`` serves them
(workers/metrics/redis_state.py), so adding workers never multiplies them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Seconds. The engine answers most jobs in milliseconds; a partition LP or a capped
# launch_select may take seconds, up to the queue's soft time limit.
ENGINE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# From the producer's send to the result on the stream: queueing included.
END_TO_END_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass(frozen=True)
class JobMetrics:
    jobs: Any  # Counter: apportion_jobs_total{kind, status, code}
    warnings: Any  # Counter: apportion_job_warnings_total{kind}
    engine: Any  # Histogram: apportion_job_engine_seconds{kind}
    end_to_end: Any  # Histogram: apportion_job_end_to_end_seconds{kind}

    def record(self, envelope: Mapping[str, Any], sent_at: float | None, now: float) -> None:
        kind = str(envelope.get("kind"))
        error = envelope.get("error") or {}
        self.jobs.labels(kind, str(envelope.get("status")), str(error.get("code") or "")).inc()
        elapsed_ms = envelope.get("elapsed_ms")
        if isinstance(elapsed_ms, int | float):
            self.engine.labels(kind).observe(elapsed_ms / 1000.0)
        warnings = envelope.get("warnings")
        if warnings:
            self.warnings.labels(kind).inc(len(warnings))
        if sent_at is not None and 0 <= now - sent_at < 86_400:
            self.end_to_end.labels(kind).observe(now - sent_at)


def define(registry: Any = None) -> JobMetrics:
    """The metric objects (in ``registry``; prometheus-client's default one if None)."""
    from prometheus_client import REGISTRY, Counter, Histogram

    registry = registry if registry is not None else REGISTRY
    return JobMetrics(
        jobs=Counter(
            "apportion_jobs",
            "Jobs answered, by kind, envelope status and error code ('' when ok).",
            ["kind", "status", "code"],
            registry=registry,
        ),
        warnings=Counter(
            "apportion_job_warnings",
            "Warnings written into envelopes (unknown fields), by kind.",
            ["kind"],
            registry=registry,
        ),
        engine=Histogram(
            "apportion_job_engine_seconds",
            "Engine time of a job (the envelope's elapsed_ms): validation, solving, answer.",
            ["kind"],
            buckets=ENGINE_BUCKETS,
            registry=registry,
        ),
        end_to_end=Histogram(
            "apportion_job_end_to_end_seconds",
            "From the producer's send (header apportion_sent_at) to the result on its stream.",
            ["kind"],
            buckets=END_TO_END_BUCKETS,
            registry=registry,
        ),
    )


PRIVATE_PREFIX = "apportion-metrics-"
_lock = threading.Lock()
_metrics: JobMetrics | None = None


def current() -> JobMetrics | None:
    """The process's job metrics, or None when metrics are off (recording costs nothing)."""
    return _metrics


def start(port: int, address: str) -> str:
    """Serve /metrics from this (the worker's main) process; return the multiprocess dir.

    Must run before the pool forks and before anything else imports prometheus_client:
    the library picks its multiprocess storage when it is first imported.
    """
    global _metrics
    with _lock:
        # An operator's own directory is theirs to wipe between runs (prometheus-client's
        # rule); by default each worker gets a fresh private one, removed at exit.
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if not directory:
            directory = tempfile.mkdtemp(prefix=PRIVATE_PREFIX)
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
        os.makedirs(directory, exist_ok=True)
        _read_multiprocess_setting()
        from prometheus_client import CollectorRegistry, multiprocess, start_http_server

        _metrics = define()
        serving = CollectorRegistry()
        multiprocess.MultiProcessCollector(serving, path=directory)
        start_http_server(port, addr=address, registry=serving)
        return directory


def _read_multiprocess_setting() -> None:
    """Make prometheus-client read PROMETHEUS_MULTIPROC_DIR again.

    The library chooses its value storage when ``prometheus_client.values`` is first
    imported, from that environment variable. In a ``celery worker`` that happens
    before any of apportion's code runs: Celery's command line loads its plugins, and
    Flower's imports prometheus_client. Re-executing the module (importlib.reload)
    makes metrics created from now on use the multiprocess files
    (tests/unit/service/test_metrics.py checks that they do).
    """
    import importlib
    import sys

    module = sys.modules.get("prometheus_client.values")
    if module is not None:
        importlib.reload(module)


def stop(directory: str | None) -> None:
    """Remove the worker's private multiprocess directory when it exits."""
    if directory and os.path.basename(directory).startswith(PRIVATE_PREFIX):
        shutil.rmtree(directory, ignore_errors=True)
