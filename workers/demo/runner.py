"""``apportion demo``: the real task code on a real (in-process) Celery worker, no Redis.

The worker consumes from Celery's in-memory transport and results go to the
in-memory result backend; result events go to a :class:`MemoryPublisher` and launch
failures to a :class:`MemoryFailureStore`, both keeping the same once-per-id rules as
their Redis twins. Everything else — task registration, validation, engines, the
launcher hook, envelopes — is what production runs.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from apportion import kinds
from apportion.config.settings import get_settings
from apportion.explain import explain
from apportion.workers.demo.jobs import (
    DYNAMICS_PENALTY,
    FLAKY_ACCOUNT,
    FLAKY_RATE,
    dynamics_job,
)
from apportion.workers.history.failure_store import MemoryFailureStore
from apportion.workers.launch.launcher import SimulatedLauncher
from apportion.workers.redis.keys import Keys
from apportion.workers.results.publisher import MemoryPublisher
from apportion.workers.runtime import Runtime, set_runtime

DYNAMICS_LAUNCHES = 15


def _render(console: Console, kind: str, title: str, envelope: dict[str, Any]) -> None:
    status = envelope["status"]
    colour = {"ok": "green", "infeasible": "yellow", "rejected": "red"}[status]
    console.rule(f"[bold]{kind}[/] · {title}")
    console.print(
        f"job [cyan]{envelope['job_id']}[/] → [{colour}]{status}[/] "
        f"in {envelope['elapsed_ms']:.1f} ms"
    )
    if status != "ok":
        error = envelope["error"]
        console.print(f"  {error['code']}: {escape(error['message'])}")
        for detail in error.get("details", [])[:6]:
            console.print(f"    • {detail['path']}: {escape(detail['message'])}")
        return
    explain(envelope, None, console)


def demo_jobs() -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, title, job) for every registered kind that names demo jobs."""
    return [
        (kind.name, title, job)
        for kind in kinds.REGISTRY.values()
        if kind.demo_jobs is not None
        for (_, title, job) in kinds.load(kind.demo_jobs)
    ]


def _dynamics(app: Any, console: Console | None) -> list[dict[str, Any]]:
    """Successive launches while one account keeps failing: its probability shrinks."""
    rows = []
    for n in range(1, DYNAMICS_LAUNCHES + 1):
        envelope = app.send_task("apportion.launch_select", args=[dynamics_job(n)]).get(
            timeout=120, interval=0.01
        )
        result = envelope["result"]
        first_try = result["attempts"][0]["probabilities"]
        rows.append(
            {
                "launch": n,
                "p_flaky": first_try.get(FLAKY_ACCOUNT, 0.0),
                "failures_seen": (result["attempts"][0]["failures"] or {}).get(FLAKY_ACCOUNT, 0),
                "attempts": result.get("attempts", []),
            }
        )
    if console is not None:
        console.rule(
            f"failure-penalty dynamics: {FLAKY_ACCOUNT} fails {FLAKY_RATE:.0%} of its launches, "
            f"each failure fines it {DYNAMICS_PENALTY} points"
        )
        table = Table()
        for column in (
            "launch",
            f"{FLAKY_ACCOUNT} failures in 6 h",
            f"P({FLAKY_ACCOUNT}) at the roll",
            "attempts",
        ):
            table.add_column(column)
        for row in rows:
            attempts = " → ".join(
                f"{a['account']} {'✓' if a['ok'] else '✗'}" for a in row["attempts"]
            )
            table.add_row(
                str(row["launch"]), str(row["failures_seen"]), f"{row['p_flaky']:.1%}", attempts
            )
        console.print(table)
    return rows


def run_demo(as_json: bool = False) -> int:
    from celery.contrib.testing.worker import start_worker

    logging.getLogger("celery").setLevel(logging.WARNING)
    # The in-memory transport warns that it has no hostname; that is the point here.
    logging.getLogger("kombu").setLevel(logging.ERROR)
    publisher = MemoryPublisher()
    history = MemoryFailureStore()
    app = _demo_app(publisher, history)
    console = None if as_json else Console()
    jobs = demo_jobs()
    dynamics: list[dict[str, Any]] = []
    try:
        with start_worker(
            app, pool="solo", perform_ping_check=False, loglevel="WARNING", shutdown_timeout=10
        ):
            outputs = _run_jobs(app, jobs, console, history)
            if any(kind == "launch_select" for kind, _, _ in jobs):
                dynamics = _dynamics(app, console)
    finally:
        set_runtime(None)
    if console is None:
        print(
            json.dumps(
                {
                    "envelopes": outputs,
                    "events": publisher.events,
                    "dynamics": dynamics,
                    "launch_failures": history.stream,
                },
                indent=2,
            )
        )
        return 0
    _print_events(console, publisher, history)
    return 0


def _demo_app(publisher: MemoryPublisher, history: MemoryFailureStore) -> Any:
    """The production app and runtime on the in-memory broker and stores."""
    from apportion.workers.app import create_app

    settings = get_settings()
    set_runtime(
        Runtime(
            settings=settings,
            publisher=publisher,
            failures=history,
            keys=Keys(settings.stream_prefix),
            launcher=SimulatedLauncher({FLAKY_ACCOUNT: FLAKY_RATE}),
        )
    )
    app = create_app(settings, broker="memory://", backend="cache+memory://")
    # The in-memory transport polls its queues; the default 1 s makes a demo crawl.
    app.conf.broker_transport_options = {"polling_interval": 0.005}
    # With one message prefetched (production's setting for long queues) the in-process
    # worker takes each further queued job only at the event loop's next 1 s tick, so
    # the demo's batch took ~25 s; taking the whole batch at once runs it in well
    # under a second. Only the demo's in-memory worker does this.
    app.conf.worker_prefetch_multiplier = 64
    return app


def _run_jobs(
    app: Any,
    jobs: list[tuple[str, str, dict[str, Any]]],
    console: Console | None,
    history: MemoryFailureStore,
) -> list[dict[str, Any]]:
    """Every demo job through the real tasks, then some again: redelivered work (same
    job_id / event_id) must not publish a second event."""
    if console is not None:
        kinds_run = {kind for kind, _, _ in jobs}
        console.print(
            f"[bold]apportion demo[/]: an in-process Celery worker on the in-memory "
            f"broker runs {len(jobs)} jobs of {len(kinds_run)} kinds "
            "through the real tasks."
        )
    outputs: list[dict[str, Any]] = []
    pending = [(k, t, app.send_task(f"apportion.{k}", args=[j])) for (k, t, j) in jobs]
    for kind, title, async_result in pending:
        envelope: dict[str, Any] = async_result.get(timeout=120, interval=0.01)
        outputs.append(envelope)
        if console is not None:
            _render(console, kind, title, envelope)
    for kind, _, job in (jobs[0], *[j for j in jobs if j[0] == "launch_outcome"]):
        again = app.send_task(f"apportion.{kind}", args=[job]).get(timeout=120, interval=0.01)
        outputs.append(again)
        if console is not None and kind == "launch_outcome":
            # The event's one answer comes back (one answer per event_id), so what shows
            # that it was recorded once is the failure history itself.
            event_id = job["event_id"]
            times = sum(1 for entry in history.stream if entry["event_id"] == event_id)
            console.print(
                f"  sent again: same answer (recorded={again['result']['recorded']}); "
                f"in the failure history: {times} time{'s' if times != 1 else ''}"
            )
    return outputs


def _print_events(
    console: Console, publisher: MemoryPublisher, history: MemoryFailureStore
) -> None:
    console.rule("result events (one per job; the re-sent jobs published nothing new)")
    table = Table()
    for column in ("entry", "kind", "status", "job_id"):
        table.add_column(column)
    for i, event in enumerate(publisher.events, 1):
        table.add_row(f"{i}-0", event["kind"], event["status"], event["job_id"])
    console.print(table)
    console.print(f"launch-failures stream: {len(history.stream)} entries")
