"""End-to-end worker throughput: real partition jobs through apportion against a no-op
on stock Celery, and how apportion scales out.

    .venv/bin/python bench/bench_worker.py anchor [--jobs 300] [--rounds 11] [--flower]
    .venv/bin/python bench/bench_worker.py scale [--jobs 300] [--rounds 5]
    .venv/bin/python bench/bench_worker.py commands [--jobs 300]
    .venv/bin/python bench/bench_worker.py messages [--jobs 50]
    .venv/bin/python bench/bench_worker.py profile [--jobs 2000]
    .venv/bin/python bench/bench_worker.py ablate [--jobs 300] [--rounds 5] [--flower]

``--big`` (scale): the 1,000-host flat launch_select job (bench_placement.py) instead.
``--disks N`` (any mode): the small job on N disks (1 by default, answered in closed
form; more go through HiGHS).

One dedicated redis-server on a free port. **anchor**: two workers on it, started as
operators start them: ``apportion worker -c 2 -Q partition`` (the production
configuration, CLI defaults, mingle and gossip on) on db 0, and ``celery -A
bench.stock_app worker -c 2 -Q stock`` (plain Celery: stock Redis transport and result
backend, JSON, acks_late, prefetch 1; bench/stock_app.py) on db 1. A round sends N jobs
(the same small partition job to both) from one producer and times until every one has
stored SUCCESS in its result backend (both backends PUBLISH each stored state on the
key's channel; the client listens instead of polling). Rounds come in pairs, one per
side back to back, the order alternating; the verdict is the median of the per-pair
ratios apportion jobs/s ÷ stock jobs/s, with their spread. ``--flower`` runs the
apportion rounds with task events switched on by remote control, as a running Flower
does (it broadcasts ``enable_events`` every 5 s).

**scale**: apportion alone, rounds interleaved over the layouts 1, 2 and 4 worker
processes on one node and two nodes of 1 process each (two ``apportion worker``
processes, different ``-n``), with Redis's own CPU per job and its busy share.

**ablate**: apportion as it is, apportion without each piece written over a library
internal (``PIECES``, bench/ablate_site/sitecustomize.py: each replaced by the public
API it stands in for), and stock Celery's no-op, each on its own db, in round-robin
rounds: what each piece buys, in one run.

**commands**: Redis commands per job (INFO commandstats after CONFIG RESETSTAT),
producer and worker apart, for both sides. **messages**: Redis CPU a message costs by
its size (the LPUSH and the take scripts), no worker.

**profile**: apportion's worker alone, its pool children timing chosen steps of each
job in thread CPU (``bench/profile_site/sitecustomize.py``, loaded through
``PYTHONPATH``; the steps are ``PROFILE_STEPS`` below): where a job's CPU goes inside
the worker, caches as cold as a busy worker leaves them. A loop of the engine alone runs
the same steps ~3 times faster, so profile here before cutting.

CPU per job is read from /proc: each worker's main process and pool children,
redis-server and this client (producer plus result listener).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apportion.config.settings import Settings  # noqa: E402
from apportion.workers.producer import JobSender, producer_app  # noqa: E402
from tests.support.jobs import SMALL_PARTITION  # noqa: E402
from tests.support.processes import RedisServer, free_port, wait_until  # noqa: E402

_CHANNELS = "celery-task-meta-*"
_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


@dataclass
class Node:
    """One worker process (``apportion worker`` or ``celery worker``) and its log."""

    argv: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=ROOT,
                env={**os.environ, **self.env},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = self.proc
        wait_until(
            lambda: b" ready." in self.log.read_bytes() or proc.poll() is not None,
            120,
            what=f"{self.argv[:4]} ready",
        )
        if proc.poll() is not None:
            raise RuntimeError(self.log.read_text()[-3000:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def cpu(self) -> dict[str, float]:
        assert self.proc is not None
        main = self.proc.pid
        return {"main": _cpu_seconds(main), "pool": sum(map(_cpu_seconds, _children(main)))}


def apportion_node(
    url: str, workdir: Path, name: str, concurrency: int, env: dict[str, str] | None = None
) -> Node:
    # Exactly what operators run (docs/operations.md, Procfile), nothing added.
    argv = [sys.executable, "-m", "apportion.cli", "worker", "-Q", KIND_QUEUE[1]]
    argv += ["-c", str(concurrency), "-n", f"{name}@%h"]
    return Node(argv, {"APPORTION_REDIS_URL": url, **(env or {})}, workdir / f"{name}.log")


def stock_node(url: str, workdir: Path, concurrency: int) -> Node:
    argv = [sys.executable, "-m", "celery", "-A", "bench.stock_app", "worker", "-Q", "stock"]
    argv += ["-c", str(concurrency), "-n", "stock@%h", "--loglevel", "INFO"]
    return Node(argv, {"BENCH_STOCK_REDIS_URL": url}, workdir / "stock.log")


@dataclass(frozen=True)
class Side:
    """What one round sends and who runs it."""

    name: str
    send: Callable[[dict[str, Any]], str]  # job -> task id
    nodes: Sequence[Node]


@dataclass(frozen=True)
class Round:
    rate: float
    cpu: dict[str, float]  # ms per job: main, pool, redis, client
    redis_busy: float  # share of one CPU redis-server used during the round

    @property
    def cpu_total(self) -> float:
        return sum(self.cpu.values())


def _snapshot(nodes: Sequence[Node], redis_pid: int) -> dict[str, float]:
    out = {"main": 0.0, "pool": 0.0}
    for node in nodes:
        for k, v in node.cpu().items():
            out[k] += v
    times = os.times()
    out["redis"] = _cpu_seconds(redis_pid)
    out["client"] = times.user + times.system
    return out


def drain(events: Any, ids: list[str], timeout: float = 600) -> None:
    """Wait until every task has stored SUCCESS."""
    prefix = len("celery-task-meta-")
    pending = set(ids)
    deadline = time.monotonic() + timeout
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} results missing")
        message = events.get_message(timeout=1.0)
        if message is None or message["type"] != "pmessage":
            continue
        if b'"SUCCESS"' in message["data"]:
            pending.discard(message["channel"][prefix:].decode())


def small_job(disks: int) -> dict[str, Any]:
    """SMALL_PARTITION on ``disks`` disks of the same size (its vg may use any of them):
    with more than one the LP goes to HiGHS, where one disk is answered in closed form."""
    if disks == 1:
        return SMALL_PARTITION
    hardware = {**SMALL_PARTITION["hardware"]}
    hardware["disks"] = [{"id": f"sd{chr(97 + d)}", "size": 40000} for d in range(disks)]
    return {**SMALL_PARTITION, "hardware": hardware}


# The task and queue apportion's side sends to (``--big``: launch_select on launch).
KIND_QUEUE = ("apportion.partition", "partition")
# What every round sends (``--disks``, ``--big``).
JOB: dict[str, Any] = SMALL_PARTITION


def one_round(client: Any, redis_pid: int, side: Side, n: int, tag: str) -> Round:
    jobs = [{**JOB, "job_id": f"{tag}-{i}"} for i in range(n)]
    events = client.pubsub(ignore_subscribe_messages=True)
    events.psubscribe(_CHANNELS)
    try:
        before = _snapshot(side.nodes, redis_pid)
        started = time.perf_counter()
        ids = [side.send(job) for job in jobs]
        drain(events, ids)
        elapsed = time.perf_counter() - started
        after = _snapshot(side.nodes, redis_pid)
    finally:
        events.close()
    cpu = {k: (after[k] - before[k]) * 1000 / n for k in after}
    return Round(n / elapsed, cpu, (after["redis"] - before["redis"]) / elapsed)


def _spread(values: Sequence[float]) -> str:
    ordered = sorted(values)
    return f"median {statistics.median(ordered):.2f} (min {ordered[0]:.2f}, max {ordered[-1]:.2f})"


def _cpu_line(rounds: list[Round]) -> str:
    keys = ("main", "pool", "redis", "client")
    parts = [f"{k} {statistics.median(r.cpu[k] for r in rounds):.2f}" for k in keys]
    total = statistics.median(r.cpu_total for r in rounds)
    return f"{total:.2f} ms/job ({', '.join(parts)})"


@dataclass
class Bench:
    workdir: Path
    server: RedisServer
    nodes: list[Node] = field(default_factory=list)
    held: ExitStack = field(default_factory=ExitStack)  # producers held for the run

    @property
    def redis_pid(self) -> int:
        assert self.server.proc is not None
        return self.server.proc.pid

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.server.port}/{db}"

    def started(self, node: Node) -> Node:
        node.start()
        self.nodes.append(node)
        return node

    def close(self) -> None:
        self.held.close()
        for node in self.nodes:
            node.stop()
        self.server.stop()


def _sides(bench: Bench) -> tuple[Side, Side, Any, Any]:
    from bench.stock_app import app as stock_template

    settings = Settings(redis_url=bench.url(0))
    ours = producer_app(settings)
    stock = type(stock_template)("stock", set_as_current=False)
    stock.conf.update(stock_template.conf.changes)
    stock.conf.update(broker_url=bench.url(1), result_backend=bench.url(1))

    # As `apportion submit` sends (workers/producer.py), one producer held for the run.
    sender = bench.held.enter_context(JobSender(ours))

    def send_ours(job: dict[str, Any]) -> str:
        return str(sender.send(KIND_QUEUE[0], job).id)

    def send_stock(job: dict[str, Any]) -> str:
        return str(stock.send_task("stock.noop", args=[job], queue="stock").id)

    a = Side("apportion", send_ours, [])
    s = Side("stock", send_stock, [])
    return a, s, ours, stock


def run_anchor(args: argparse.Namespace, bench: Bench) -> None:
    a_side, s_side, ours, _stock = _sides(bench)
    a_node = bench.started(apportion_node(bench.url(0), bench.workdir, "partition", 2))
    s_node = bench.started(stock_node(bench.url(1), bench.workdir, 2))
    a_side = Side(a_side.name, a_side.send, [a_node])
    s_side = Side(s_side.name, s_side.send, [s_node])
    client = bench.server.client()
    if args.flower:
        # What Flower does on start and every 5 s after (flower/events.py).
        ours.control.enable_events()
    for side in (a_side, s_side):
        one_round(client, bench.redis_pid, side, args.warmup, f"warm-{side.name}")
    results: dict[str, list[Round]] = {"apportion": [], "stock": []}
    for r in range(args.rounds):
        order = (a_side, s_side) if r % 2 == 0 else (s_side, a_side)
        for side in order:
            if args.flower and side is a_side:
                ours.control.enable_events()
            results[side.name].append(
                one_round(client, bench.redis_pid, side, args.jobs, f"{side.name}{r}")
            )
        a, s = results["apportion"][-1], results["stock"][-1]
        print(
            f"pair {r + 1:2}: stock no-op {s.rate:6.1f} jobs/s {s.cpu_total:5.2f} ms CPU/job   "
            f"apportion partition {a.rate:6.1f} jobs/s {a.cpu_total:5.2f} ms CPU/job   "
            f"ratio {a.rate / s.rate:.2f}   load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    a_rounds, s_rounds = results["apportion"], results["stock"]
    pairs = [a.rate / s.rate for a, s in zip(a_rounds, s_rounds, strict=True)]
    print(f"CPU stock no-op:           {_cpu_line(s_rounds)}")
    print(f"CPU apportion partition:   {_cpu_line(a_rounds)}")
    print(f"stock no-op jobs/s:        {_spread([r.rate for r in s_rounds])}")
    print(f"apportion partition jobs/s: {_spread([r.rate for r in a_rounds])}")
    print(
        f"verdict: pair ratio apportion/stock {_spread(pairs)} over {len(pairs)} pairs "
        f"(target ≥ 1.0){' with task events on (Flower attached)' if args.flower else ''}; "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )


def _commandstats(client: Any) -> dict[str, int]:
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def _counted(client: Any, action: Callable[[], None]) -> dict[str, int]:
    client.config_resetstat()
    action()
    counts = _commandstats(client)
    # The reads of this very count are not the job's.
    counts["info"] = counts.get("info", 1) - 1
    return {k: v for k, v in counts.items() if v}


def _per_job(counts: dict[str, int], n: int) -> str:
    total = sum(counts.values()) / n
    parts = ", ".join(f"{k} {v / n:.2f}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{total:.2f} a job: {parts}"


def run_commands(args: argparse.Namespace, bench: Bench) -> None:
    a_side, s_side, _ours, _stock = _sides(bench)
    a_node = bench.started(apportion_node(bench.url(0), bench.workdir, "partition", 2))
    s_node = bench.started(stock_node(bench.url(1), bench.workdir, 2))
    client = bench.server.client()
    n = args.jobs
    for side, node in ((a_side, a_node), (s_side, s_node)):
        side = Side(side.name, side.send, [node])
        one_round(client, bench.redis_pid, side, args.warmup, f"warm-{side.name}")
        # Everything a round costs Redis (producer, worker, the listener's PSUBSCRIBE),
        # with the other side's worker idle (its BRPOP wake-ups are in the count).
        total = _counted(client, lambda s=side: one_round(client, bench.redis_pid, s, n, "c"))
        # The producer alone: send while the worker is stopped (SIGSTOP), then let it go.
        assert node.proc is not None
        os.killpg(node.proc.pid, signal.SIGSTOP)
        ids: list[str] = []
        try:
            producer = _counted(
                client,
                lambda s=side, out=ids: out.extend(s.send({**JOB}) for _ in range(n)),
            )
        finally:
            os.killpg(node.proc.pid, signal.SIGCONT)
        events = client.pubsub(ignore_subscribe_messages=True)
        events.psubscribe(_CHANNELS)
        drain(events, ids)
        events.close()
        worker = {k: total.get(k, 0) - producer.get(k, 0) for k in total}
        worker = {k: v for k, v in worker.items() if v > 0}
        print(f"{side.name} producer: {_per_job(producer, n)}")
        print(f"{side.name} worker:   {_per_job(worker, n)}")


def run_messages(args: argparse.Namespace, bench: Bench) -> None:
    """Redis CPU a message costs by size: the producer's LPUSH and the worker's take (the
    move script, then the record script given the tag the gate read in Python)."""
    import base64
    import uuid

    from apportion.workers.app import allow_tasks, create_app

    app = create_app(Settings(redis_url=bench.url(0)))
    allow_tasks(app)
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        client = channel.client
        channel.basic_consume("partition", False, lambda message: None, "bench")
        for size in (1_000, 64_000, 640_000):
            job = {"job_id": "j", "pad": "x" * size}
            body = base64.b64encode(json.dumps([[job], {}, {}]).encode()).decode()
            items = []
            for _ in range(args.jobs):
                tag = str(uuid.uuid4())
                message = {
                    "body": body,
                    "content-encoding": "utf-8",
                    "content-type": "application/json",
                    "headers": {"task": "apportion.partition", "id": tag, "argsrepr": "{}"},
                    "properties": {
                        "delivery_tag": tag,
                        "delivery_info": {"exchange": "", "routing_key": "partition"},
                        "body_encoding": "base64",
                    },
                }
                items.append(json.dumps(message))
            client.config_resetstat()
            for item in items:
                client.lpush("partition", item)
            for _ in items:
                found = channel.move_to_taking(["partition"])
                assert found is not None
                channel._take(*found)
            stats = client.info("commandstats")
            client.delete("unacked", "unacked_index")
            per_job = sum(v["usec"] for k, v in stats.items() if k != "cmdstat_info") / len(items)
            print(
                f"message {len(items[0]) / 1000:.0f} KB: Redis {per_job:.0f} µs a job "
                f"(LPUSH {stats['cmdstat_lpush']['usec_per_call']:.0f} µs, "
                f"take scripts {stats['cmdstat_evalsha']['usec_per_call']:.0f} µs a call)"
            )


# The steps `profile` times in the pool children (module:attribute; nested steps include
# the ones inside them).
PROFILE_STEPS = (
    "apportion.tasks.jobs:run",
    "apportion.engine:validate",
    "apportion.unknown_fields:find",
    "apportion.partition.schema:parse",
    "apportion.partition.dynamic:resolve",
    "apportion.partition.model:build",
    "apportion.partition.feasibility:diagnose",
    "apportion.partition.lp:solve",
    "apportion.partition.highs:load",
    "apportion.partition.highs:run",
    "apportion.partition.integer:solve",
    "apportion.partition.convert:to_result",
    "apportion.tasks.jobs:fingerprint",
    "apportion.workers.runtime:Runtime.context",
    "apportion.tasks.jobs:publish_or_retry",
    "apportion.tasks.jobs:bounded",
    "apportion.tasks.jobs:success_record",
    "apportion.tasks.jobs:settle_recorded",
    "celery.app.trace:saferepr",
    "apportion.workers.observe:preview",
    "apportion.workers.observe:job_line",
    "apportion.workers.observe:sent_at",
    "apportion.tasks.jobs:can_record",
    "celery.utils.dispatch.signal:Signal.send",
    "logging:Logger.info",
    "logging:Logger.findCaller",
    "logging:Logger.makeRecord",
    "logging:Logger.handle",
    "celery.utils.log:ColorFormatter.format",
)


def run_profile(args: argparse.Namespace, bench: Bench) -> None:
    a_side, _s, _ours, _stock = _sides(bench)
    out = bench.workdir / "profile"
    out.mkdir()
    env = {
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "bench" / "profile_site"), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        "BENCH_PROFILE_DIR": str(out),
        "BENCH_PROFILE_STEPS": ",".join(PROFILE_STEPS),
    }
    node = bench.started(apportion_node(bench.url(0), bench.workdir, "profile", 2, env))
    side = Side("apportion", a_side.send, [node])
    client = bench.server.client()
    got = one_round(client, bench.redis_pid, side, args.jobs, "profile")
    print(
        f"{args.jobs} jobs: {got.rate:.1f} jobs/s, {got.cpu_total:.2f} ms CPU/job "
        f"({', '.join(f'{k} {v:.2f}' for k, v in got.cpu.items())}), "
        f"load {os.getloadavg()[0]:.1f}"
    )
    node.stop()  # the children write their sums as they exit
    for path in sorted(out.glob("child-*.json")):
        report = json.loads(path.read_text())
        print(f"pool child {report['pid']}: {report['jobs']} jobs, µs of thread CPU a job")
        print(f"  {report['cycle_us']:8.1f}  the whole job (one job's start to the next's)")
        for step, us in sorted(report["steps_us"].items(), key=lambda kv: -kv[1]):
            print(f"  {us:8.1f}  {step}")


LAYOUTS = {
    "1 node × 1": (1,),
    "1 node × 2": (2,),
    "1 node × 4": (4,),
    "2 nodes × 1": (1, 1),
    "2 nodes × 2": (2, 2),
}


def run_scale(args: argparse.Namespace, bench: Bench) -> None:
    a_side, _s, _ours, _stock = _sides(bench)
    client = bench.server.client()
    results: dict[str, list[Round]] = {k: [] for k in LAYOUTS}
    for r in range(args.rounds):
        names = list(LAYOUTS) if r % 2 == 0 else list(reversed(LAYOUTS))
        for layout in names:
            nodes = [
                apportion_node(bench.url(0), bench.workdir, f"scale{i}", c)
                for i, c in enumerate(LAYOUTS[layout])
            ]
            for node in nodes:
                node.start()
            try:
                side = Side(layout, a_side.send, nodes)
                one_round(client, bench.redis_pid, side, args.warmup, f"warm{r}")
                results[layout].append(
                    one_round(client, bench.redis_pid, side, args.jobs, f"s{r}-{layout}")
                )
            finally:
                for node in nodes:
                    node.stop()
            got = results[layout][-1]
            print(
                f"round {r + 1} {layout}: {got.rate:6.1f} jobs/s, {got.cpu_total:.2f} ms CPU/job, "
                f"redis {got.cpu['redis']:.3f} ms/job ({got.redis_busy:.0%} of a CPU), "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    for layout, rounds in results.items():
        print(
            f"{layout}: jobs/s {_spread([r.rate for r in rounds])}; CPU {_cpu_line(rounds)}; "
            f"redis busy {statistics.median(r.redis_busy for r in rounds):.0%} of a CPU"
        )


# bench/ablate_site/sitecustomize.py: each piece written over a library internal,
# replaced by the public API it stands in for.
PIECES = ("direct", "publisher", "record", "events")


def _apportion_side(bench: Bench, db: int, name: str, node: Node) -> tuple[Side, Any]:
    app = producer_app(Settings(redis_url=bench.url(db)))
    sender = bench.held.enter_context(JobSender(app))

    def send(job: dict[str, Any]) -> str:
        return str(sender.send("apportion.partition", job).id)

    return Side(name, send, [node]), app


def run_ablate(args: argparse.Namespace, bench: Bench) -> None:
    """apportion, apportion without each piece, and stock Celery's no-op, round-robin."""
    _a, stock_side, _ours, _stock = _sides(bench)
    site = str(ROOT / "bench" / "ablate_site")
    sides: list[Side] = []
    apps: list[Any] = []
    for db, piece in enumerate(("", *PIECES), start=2):
        env = {"PYTHONPATH": site, "BENCH_WITHOUT": piece} if piece else {}
        name = f"without-{piece}" if piece else "apportion"
        node = bench.started(apportion_node(bench.url(db), bench.workdir, name, 2, env))
        side, app = _apportion_side(bench, db, name, node)
        sides.append(side)
        apps.append(app)
    s_node = bench.started(stock_node(bench.url(1), bench.workdir, 2))
    sides.append(Side("stock", stock_side.send, [s_node]))
    client = bench.server.client()
    for side in sides:
        one_round(client, bench.redis_pid, side, args.warmup, f"warm-{side.name}")
    results: dict[str, list[Round]] = {side.name: [] for side in sides}
    for r in range(args.rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            if args.flower:
                for app in apps:  # what Flower does on start and every 5 s after
                    app.control.enable_events()
            results[side.name].append(
                one_round(client, bench.redis_pid, side, args.jobs, f"{side.name}{r}")
            )
        print(
            f"round {r + 1}: "
            + "  ".join(f"{k} {v[-1].rate:.0f}" for k, v in results.items())
            + f"  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    full = results["apportion"]
    for name, rounds in results.items():
        pairs = [a.rate / b.rate for a, b in zip(full, rounds, strict=True)]
        print(
            f"{name:18} jobs/s {_spread([r.rate for r in rounds])}; CPU {_cpu_line(rounds)}; "
            f"apportion/this per round {_spread(pairs)}"
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "what",
        choices=("anchor", "scale", "commands", "messages", "profile", "ablate"),
        nargs="?",
        default="anchor",
    )
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--flower", action="store_true", help="anchor: task events on")
    parser.add_argument("--disks", type=int, default=1, help="the job's disks (1: closed form)")
    parser.add_argument(
        "--big", action="store_true", help="scale: the 1,000-host flat launch_select job"
    )
    args = parser.parse_args()
    global JOB, KIND_QUEUE
    JOB = small_job(args.disks)
    if args.big:
        from bench.bench_placement import SIMPLE, numa_cloud

        JOB = {"providers": numa_cloud(1000), "request": SIMPLE, "policy": None}
        KIND_QUEUE = ("apportion.launch_select", "launch")

    workdir = Path(tempfile.mkdtemp(prefix="apportion-bench-"))
    server = RedisServer(port=free_port(), workdir=workdir)
    server.start()
    bench = Bench(workdir, server)
    try:
        modes = {
            "anchor": run_anchor,
            "scale": run_scale,
            "commands": run_commands,
            "messages": run_messages,
            "profile": run_profile,
            "ablate": run_ablate,
        }
        modes[args.what](args, bench)
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
