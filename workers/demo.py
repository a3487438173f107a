"""``apportion demo``: the real task code on a real (in-process) Celery worker, no Redis.

The worker consumes from Celery's in-memory transport and results go to the
in-memory result backend; result events go to a :class:`MemoryPublisher` that keeps
the same once-per-job rule as the Redis publisher. Everything else — task
registration, validation, engines, envelopes — is what production runs.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from rich.console import Console
from rich.table import Table

from apportion.engine import available_kinds
from config.settings import get_settings
from workers.demo_jobs import DEMO_JOBS
from workers.failure_store import MemoryFailureStore
from workers.keys import Keys
from workers.publisher import MemoryPublisher
from workers.runtime import Runtime, set_runtime


def _partition_table(result: dict[str, Any]) -> Table:
    disks = result["disks"]
    spaces = [s["space_id"] for s in disks[0]["spaces"]] if disks else []
    table = Table(title="disks × spaces (MiB)", show_lines=False)
    table.add_column("disk")
    table.add_column("size", justify="right")
    for space in spaces:
        style = "dim" if space == "unallocated" else None
        table.add_column(space, justify="right", style=style)
    for disk in disks:
        sizes = {s["space_id"]: s["size"] for s in disk["spaces"]}
        table.add_row(
            disk["disk_id"], str(disk["size"]), *[str(sizes.get(s, 0) or "·") for s in spaces]
        )
    return table


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
        console.print(f"  {error['code']}: {error['message']}")
        for detail in error.get("details", [])[:6]:
            console.print(f"    • {detail['path']}: {detail['message']}")
        return
    result = envelope["result"]
    if kind == "partition":
        console.print(_partition_table(result))
        for vg in result.get("volume_groups", []):
            pvs = ", ".join(f"{pv['disk_id']} {pv['size']}" for pv in vg["physical_volumes"])
            console.print(f"  vg {vg['id']}: physical volumes {pvs or '—'}")
    else:
        console.print_json(json.dumps(result)[:4000])


def run_demo(as_json: bool = False) -> int:
    from celery.contrib.testing.worker import start_worker

    from workers.app import create_app

    logging.getLogger("celery").setLevel(logging.WARNING)
    # The in-memory transport warns that it has no hostname; that is the point here.
    logging.getLogger("kombu").setLevel(logging.ERROR)
    settings = get_settings()
    publisher = MemoryPublisher()
    set_runtime(
        Runtime(
            settings=settings,
            publisher=publisher,
            failures=MemoryFailureStore(),
            keys=Keys(settings.stream_prefix),
        )
    )
    app = create_app(settings, broker="memory://", backend="cache+memory://")
    console = Console()
    kinds = set(available_kinds())
    jobs = [(k, t, j) for (k, t, j) in DEMO_JOBS if k in kinds]
    outputs: list[dict[str, Any]] = []
    try:
        with start_worker(
            app, pool="solo", perform_ping_check=False, loglevel="WARNING", shutdown_timeout=10
        ):
            if not as_json:
                console.print(
                    f"[bold]apportion demo[/]: an in-process Celery worker on the "
                    f"in-memory broker runs {len(jobs)} jobs through the real tasks."
                )
            pending = [(k, t, app.send_task(f"apportion.{k}", args=[j])) for (k, t, j) in jobs]
            for kind, title, async_result in pending:
                envelope: dict[str, Any] = async_result.get(timeout=120)
                outputs.append(envelope)
                if not as_json:
                    _render(console, kind, title, envelope)
            # A redelivered job (same job_id) must not publish a second event.
            kind, _, job = jobs[0]
            app.send_task(f"apportion.{kind}", args=[job]).get(timeout=120)
    finally:
        set_runtime(None)
    if as_json:
        print(json.dumps({"envelopes": outputs, "events": publisher.events}, indent=2))
        return 0
    console.rule("result events (one per job; the re-sent first job published nothing new)")
    table = Table()
    for column in ("entry", "kind", "status", "job_id"):
        table.add_column(column)
    for i, event in enumerate(publisher.events, 1):
        table.add_row(f"{i}-0", event["kind"], event["status"], event["job_id"])
    console.print(table)
    return 0
