"""heal_org: 500 consumers over 2,000 pools / 200 stacks, against the rules.js loop and
against 500 single auto_attach jobs, in one run.

Run: ``.venv/bin/python bench/bench_heal.py [--candlepin PATH] [--rounds K]
[--consumers N] [--rules R] [--before GIT_REF] [--profile] [--export FILE]``

The estate is generated from a fixed seed: bench_attach.py's 2,000 pools (1,000 in 200
stacks of 5, 1,000 single; sizes, arch, syspurpose, quantities, dates as there) over a
catalogue of 20 products, and 500 consumers each installing 1–8 of them: physical
(1–8 sockets, cores, RAM, x86_64 mostly) and a fifth guests, some with a role, addons
and a service level, one in ten holding one entitlement of a stack already.

* rules.js (with ``--candlepin``, a Candlepin clone; Node): the heal loop as the server
  runs it, consumer by consumer: bench/attach_oracle.js builds getBestPools' candidates
  and calls rules.js ``select_pools`` (its JSON parse inside, as in Candlepin's JsRunner);
  the chosen quantities raise the pools' ``consumed`` before the next consumer. The
  figure is the sum of the 500 ``select_pools`` calls (each timed once more, warm, right
  after its answer), as issue 34 counts it; every consumer's answer is compared with
  heal_org's.
* heal_org: ``apportion solve heal_org`` on a file of 2 copies of the job minus 1 copy.
* singles: ``apportion solve auto_attach`` on the 500 single jobs (each with the pools'
  ``consumed`` as heal_org left it for that consumer, so they answer the same), in files
  of 25 (the whole would be over ``max_payload_bytes``), each minus a file of one job,
  scaled to 500.

apportion's two figures alternate round by round (``--rounds``); CPU is user + system of
the ``apportion solve`` process. With ``--before REF`` the heal_org job is also measured
with the code at that git commit (as bench_attach_cli.py does), in the same rounds and
in alternating order, and the ratio is taken round by round. ``--profile`` runs the heal
once in process under pyinstrument instead.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from apportion.engine import Context, run  # noqa: E402
from apportion.limits import Limits  # noqa: E402
from bench.attach_differential import candlepin_request, rules_file  # noqa: E402
from bench.bench_attach import make_job  # noqa: E402
from bench.bench_attach_cli import _unpack  # noqa: E402

PRODUCTS = [f"prod-{i:02d}" for i in range(20)]
HOSTS = [f"host-{i}" for i in range(10)]
AT = "2026-06-01T00:00:00Z"
CHUNK = 25


def _consumer(rng: random.Random, index: int, pools: list[dict[str, Any]]) -> dict[str, Any]:
    guest = rng.random() < 0.2
    uuid = f"consumer-{index:04d}"
    facts = {
        "cpu.cpu_socket(s)": rng.choice(["1", "2", "2", "4", "8"]),
        "cpu.core(s)_per_socket": rng.choice(["2", "4", "8"]),
        "memory.memtotal": str(rng.choice([8, 16, 32, 64]) * 1024 * 1024),
        "uname.machine": "x86_64" if rng.random() < 0.9 else "ppc64le",
        "virt.is_guest": "true" if guest else "false",
    }
    if guest:
        facts["virt.uuid"] = uuid
    consumer: dict[str, Any] = {
        "uuid": uuid,
        "facts": facts,
        "installed_products": rng.sample(PRODUCTS, rng.randint(1, 8)),
    }
    entry: dict[str, Any] = {"consumer": consumer, "entitlements": []}
    if rng.random() < 0.1:
        stacked = [p for p in pools if "stacking_id" in p["product_attributes"]]
        source = copy.deepcopy(rng.choice(stacked))
        entry["entitlements"] = [{"id": f"ent-{index}", "pool": source, "quantity": 1}]
    if rng.random() < 0.4:
        consumer["role"] = rng.choice(["RHEL Server", "RHEL Workstation", "Satellite"])
    # Addons only without attached entitlements: rules.js loops forever on an addon not
    # in lower case once the consumer holds one (bench/attach.md).
    if rng.random() < 0.3 and not entry["entitlements"]:
        consumer["addons"] = rng.sample(["RHEL EUS", "RHEL ELS", "Smart Management"], 1)
    if rng.random() < 0.5:
        consumer["service_level"] = rng.choice(["Premium", "Standard"])
    if guest:
        entry["host_uuid"] = rng.choice(HOSTS)
    return entry


def make_heal_job(consumers: int = 500, seed: int = 34, rules: str = "candlepin-5.42") -> Any:
    pools = make_job(seed=seed, catalogue=PRODUCTS)["pools"]
    rng = random.Random(seed)
    return {
        "job_id": "bench-heal",
        "rules": rules,
        "at": AT,
        "pools": pools,
        "consumers": [_consumer(rng, i, pools) for i in range(consumers)],
    }


def singles(job: dict[str, Any], answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The auto_attach job of each consumer, with consumed as the heal left it for it."""
    consumed = {p["id"]: p["consumed"] for p in job["pools"]}
    out = []
    for entry, healed in zip(job["consumers"], answer["consumers"], strict=True):
        out.append(
            {
                **entry,
                "pools": [{**p, "consumed": consumed[p["id"]]} for p in job["pools"]],
                "rules": job["rules"],
                "at": job["at"],
            }
        )
        for pool_id, quantity in healed.get("pool_quantities", {}).items():
            consumed[pool_id] += quantity
    return out


# ---- rules.js ---------------------------------------------------------------------------


def rules_loop(job: dict[str, Any], rules_js: str) -> tuple[list[dict[str, int]], float, float]:
    """Each consumer's rules.js answer in turn, and the summed select_pools wall and CPU
    ms."""
    env = {**os.environ, "ORACLE_REPEAT": "1", "ORACLE_WARMUP": "0"}
    node = subprocess.Popen(
        ["node", str(HERE / "attach_oracle.js"), rules_js],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert node.stdin is not None
    assert node.stdout is not None
    pools = copy.deepcopy(job["pools"])
    by_id = {p["id"]: p for p in pools}
    answers: list[dict[str, int]] = []
    total = cpu = 0.0
    for entry in job["consumers"]:
        single = {**entry, "pools": pools, "at": job["at"]}
        node.stdin.write(json.dumps(candlepin_request(single)) + "\n")
        node.stdin.flush()
        out = json.loads(node.stdout.readline())
        if "error" in out:
            raise SystemExit(f"rules.js failed on {entry['consumer']['uuid']}: {out['error']}")
        total += out.get("select_pools_ms") or 0.0
        cpu += out.get("select_pools_cpu_ms") or 0.0
        answers.append(out["pools"])
        for pool_id, quantity in out["pools"].items():
            by_id[pool_id]["consumed"] += quantity
    node.stdin.close()
    node.wait()
    return answers, total, cpu


# ---- apportion --------------------------------------------------------------------------


def solve(kind: str, path: Path, pythonpath: str | None = None) -> tuple[float, float]:
    """Wall and CPU ms of one ``apportion solve`` process (of the code on ``pythonpath``
    when given)."""
    command = [sys.executable, "-m", "apportion.cli", "solve", kind, str(path)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # However loaded the machine, the heal must not stop early (heal_seconds).
    env = {**os.environ, "APPORTION_LIMITS__HEAL_SECONDS": "3600"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


class _Heal:
    """One tree's heal_org figures: a job's wall and CPU ms, round by round."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def measure(self, one: Path, two: Path, pythonpath: str | None) -> None:
        """The file of two copies minus the file of one: a job, without start-up."""
        w1, c1 = solve("heal_org", one, pythonpath)
        w2, c2 = solve("heal_org", two, pythonpath)
        self.wall.append(w2 - w1)
        self.cpu.append(c2 - c1)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} (min {min(values):,.0f}, max {max(values):,.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--candlepin", default=os.environ.get("CANDLEPIN_REPO"))
    parser.add_argument("--rules", default="candlepin-5.42")
    parser.add_argument("--consumers", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3, help="0: rules.js only")
    parser.add_argument("--before", metavar="GIT_REF", help="the heal_org job at this commit too")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--export", metavar="FILE")
    args = parser.parse_args()
    job = make_heal_job(args.consumers, rules=args.rules)
    if args.export:
        Path(args.export).write_text(json.dumps(job))
        return 0
    ctx = Context(limits=Limits(heal_seconds=3600))
    if args.profile:
        from pyinstrument import Profiler

        text = json.dumps(job)
        with Profiler() as profiler:
            run("heal_org", text, ctx)
        profiler.print(show_all=False)
        return 0
    envelope = run("heal_org", json.dumps(job), ctx)
    if envelope.result is not None and not envelope.result["summary"]["complete"]:
        raise SystemExit(f"the heal stopped early: {envelope.result['summary']}")
    if envelope.status != "ok" or envelope.result is None:
        raise SystemExit(f"heal_org did not answer: {envelope.error}")
    answer: dict[str, Any] = envelope.result
    summary = answer["summary"]
    print(
        f"heal_org ({args.rules}): {args.consumers} consumers, 2,000 pools / 200 stacks, "
        f"20 products; healed {summary['healed']}, still not compliant "
        f"{summary['still_not_compliant']}, {summary['entitlements_attached']} entitlements, "
        f"{len(summary['pools_exhausted'])} pools exhausted",
        flush=True,
    )
    reference_ms = None
    if args.candlepin:
        with tempfile.TemporaryDirectory() as tmp:
            rules_js = rules_file(args.candlepin, args.rules, tmp)
            if rules_js is None:
                return 1
            started = time.perf_counter()
            theirs, reference_wall, reference_ms = rules_loop(job, rules_js)
            loop_s = time.perf_counter() - started
        ours = [c.get("pool_quantities") for c in answer["consumers"]]
        agree = sum(a == b for a, b in zip(ours, theirs, strict=True))
        print(
            f"rules.js loop: {agree} / {len(theirs)} consumers answered alike; select_pools "
            f"CPU {reference_ms:,.0f} ms in all, wall {reference_wall:,.0f} ms "
            f"({loop_s:.0f} s with the server's side)",
            flush=True,
        )
    if args.rounds == 0:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jobs = singles(job, answer)
        n = len(jobs)
        # 500 jobs of 2,000 pools are ~440 MB of JSON, over max_payload_bytes: the single
        # jobs go in files of CHUNK, each measured minus a file of one job.
        chunks = [jobs[i : i + CHUNK] for i in range(0, n, CHUNK)]
        paths = {"heal_1": [job], "heal_2": [job, job], "single_1": jobs[:1]}
        files: dict[str, Path] = {}
        for name, content in [*paths.items(), *((f"chunk_{k}", c) for k, c in enumerate(chunks))]:
            files[name] = folder / f"{name}.json"
            files[name].write_text(json.dumps(content))
        counted = n - len(chunks)  # each chunk's difference counts one job fewer
        trees: dict[str, str | None] = {"now": None}
        if args.before:
            trees["before"] = str(_unpack(args.before, folder / "before"))
        heal = {name: _Heal() for name in trees}
        single_cpu: list[float] = []
        single_wall: list[float] = []
        for r in range(args.rounds):
            for name in list(trees) if r % 2 == 0 else list(reversed(trees)):
                heal[name].measure(files["heal_1"], files["heal_2"], trees[name])
            wall = cpu = 0.0
            for k in range(len(chunks)):
                w1, c1 = solve("auto_attach", files["single_1"])
                wn, cn = solve("auto_attach", files[f"chunk_{k}"])
                wall += wn - w1
                cpu += cn - c1
            single_wall.append(wall * n / counted)
            single_cpu.append(cpu * n / counted)
    load = os.getloadavg()[0]
    heal_cpu, heal_wall = heal["now"].cpu, heal["now"].wall
    print(f"apportion solve, {args.rounds} rounds, load {load:.1f} (ms):")
    print(f"  heal_org job:      CPU {_median(heal_cpu)}; wall {_median(heal_wall)}")
    if "before" in heal:
        then = heal["before"]
        print(f"  heal_org job ({args.before}): CPU {_median(then.cpu)}; wall {_median(then.wall)}")
        paired = [a / b for a, b in zip(heal_cpu, then.cpu, strict=True)]
        print(
            f"  heal_org now / {args.before}, paired by round (CPU): "
            f"{statistics.median(paired):.2f} (min {min(paired):.2f}, max {max(paired):.2f})"
        )
    print(f"  {n} single jobs:  CPU {_median(single_cpu)}; wall {_median(single_wall)}")
    ratios = [s / h for s, h in zip(single_cpu, heal_cpu, strict=True)]
    print(f"  singles / heal_org, paired by round (CPU): {statistics.median(ratios):.1f}×")
    if reference_ms is not None:
        print(
            f"  rules.js select_pools / heal_org (CPU): "
            f"{reference_ms / statistics.median(heal_cpu):.1f}×"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
