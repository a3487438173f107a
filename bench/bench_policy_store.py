"""What reading the policy store costs a launch_select job (issue 18).

Run: ``.venv/bin/python bench/bench_policy_store.py [--rounds N] [--jobs M]``

Starts a redis-server on a free port, saves a pool's policy (the default policy file's
stack) and times, in interleaved rounds, the same small launch_select job (3 accounts,
no ``policy`` key) answered two ways through ``apportion.engine.run``:

* ``file``:  a worker's context without a store (the default policy file decides);
* ``store``: a worker's context with the store (``Runtime.context``'s ``policy_lookup``:
  one pipelined round trip for the pool's and the default's current version).

Each round runs M jobs of each, alternating which goes first; the page reports the
median per-job time of each and of their difference. It also counts the Redis commands
and round trips a job costs (INFO commandstats; the pipeline is one round trip).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import redis  # noqa: E402

from apportion.config.settings import Settings  # noqa: E402
from apportion.engine import run  # noqa: E402
from apportion.engine_settings import load_default_policy  # noqa: E402
from apportion.workers.history.failure_store import MemoryFailureStore  # noqa: E402
from apportion.workers.policies.store import PolicyStore  # noqa: E402
from apportion.workers.runtime import Runtime  # noqa: E402
from tests.support.processes import RedisServer, free_port  # noqa: E402


def job() -> dict[str, Any]:
    host = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 8192}}
    return {
        "providers": [{"uuid": f"{a}-h", "account": a, "inventories": host} for a in "abc"],
        "request": "resources=VCPU:1",
        "failures": {},
        "pool": "gpu",
        "seed": 1,
    }


def per_job(ctx: Any, jobs: int) -> float:
    """Seconds per job over ``jobs`` jobs (a new context per job, as a worker makes)."""
    payload = job()
    started = time.perf_counter()
    for _ in range(jobs):
        env = run("launch_select", payload, ctx())
        assert env.status == "ok", env.error
    return (time.perf_counter() - started) / jobs


def hgets(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_hget", {}).get("calls", 0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--jobs", type=int, default=300)
    args = parser.parse_args()
    policy = load_default_policy()
    assert policy is not None
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(port=free_port(), workdir=Path(workdir))
        server.start()
        try:
            client = redis.Redis.from_url(server.url)
            store = PolicyStore(client)
            store.save("gpu", [dict(m) for m in policy], author="bench")

            settings = Settings(redis_url=server.url)
            common = {"settings": settings, "publisher": None, "failures": MemoryFailureStore()}
            with_store = Runtime(**common, policies=store)  # type: ignore[arg-type]
            without = Runtime(**common)  # type: ignore[arg-type]
            ways = {"file": without.context, "store": with_store.context}
            per_job(ways["store"], 50)  # warm up: imports, parsers, the connection
            per_job(ways["file"], 50)
            times: dict[str, list[float]] = {w: [] for w in ways}
            added: list[float] = []
            for r in range(args.rounds):
                order = list(ways) if r % 2 == 0 else list(reversed(ways))
                got = {w: per_job(ways[w], args.jobs) for w in order}
                for w, t in got.items():
                    times[w].append(t)
                added.append(got["store"] - got["file"])
            before = hgets(client)
            per_job(ways["store"], 100)
            commands = (hgets(client) - before) / 100
            lookups = [0.0] * 200
            for i in range(len(lookups)):
                started = time.perf_counter()
                store.effective("gpu")
                lookups[i] = time.perf_counter() - started
        finally:
            server.stop()
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"rounds {args.rounds} x {args.jobs} jobs each way, interleaved")
    for w, ts in times.items():
        print(f"{w:>6}: median {statistics.median(ts) * 1e6:8.1f} us/job, min {min(ts) * 1e6:8.1f}")
    print(f" added: median {statistics.median(added) * 1e6:8.1f} us/job "
          f"(min {min(added) * 1e6:.1f}, max {max(added) * 1e6:.1f})")  # fmt: skip
    print(f"effective(): median {statistics.median(lookups) * 1e6:.1f} us, "
          f"p95 {sorted(lookups)[int(len(lookups) * 0.95)] * 1e6:.1f} us")  # fmt: skip
    print(f"per job: {commands:.2f} HGET (the pool's and the default's current version), "
          "sent as one pipeline: 1 round trip")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
