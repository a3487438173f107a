"""Studio memory soak: RSS after 50 distinct uploads of the largest allowed job.

Run: ``.venv/bin/python bench/soak_studio_uploads.py [--uploads 50] [--max-bytes N]``

Starts its own redis-server and ``apportion studio`` (a child process, so the RSS read
from /proc is the studio's alone), then uploads ``--uploads`` distinct launch_select
jobs, each as close under ``--max-bytes`` (the studio's upload limit, default
APPORTION_STUDIO_MAX_UPLOAD_BYTES, 8 MiB) as tests/support/studio.py's generator
gets, and prints the studio's RSS after the first upload and after each tenth.
Target (issue 32): RSS after 50 within 2x of RSS after one (bench/studio.md).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.conftest import running  # noqa: E402
from tests.support.processes import RedisServer, free_port, wait_until  # noqa: E402
from tests.support.studio import many_accounts_job  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def largest_job(max_bytes: int, n: int) -> bytes:
    """A distinct job (its job_id) of nearly ``max_bytes``: 9 hosts per account, as many
    accounts as fit."""
    accounts = 100
    body = json.dumps(many_accounts_job(accounts, 9, job_id=f"soak-{n:03d}")).encode()
    per_account = len(body) / accounts
    accounts = int(max_bytes * 0.98 / per_account)
    return json.dumps(many_accounts_job(accounts, 9, job_id=f"soak-{n:03d}")).encode()


def upload(port: int, body: bytes, n: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    conn.request(
        "POST",
        f"/api/deployables/upload?name=soak-{n}",
        body,
        {"Content-Type": "application/json", "X-Apportion-Studio": "1"},
    )
    answer = conn.getresponse()
    data = answer.read()
    if answer.status != 200:
        raise RuntimeError(f"upload {n}: {answer.status} {data[:300]!r}")
    conn.close()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uploads", type=int, default=50)
    parser.add_argument("--max-bytes", type=int, default=8 * 1024 * 1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        redis_gen = running(RedisServer(port=free_port(), workdir=Path(work)))
        redis = next(redis_gen)
        port = free_port()
        env = {
            **os.environ,
            "APPORTION_REDIS_URL": redis.url,
            "APPORTION_STUDIO_MAX_UPLOAD_BYTES": str(args.max_bytes),
        }
        studio = subprocess.Popen(
            [str(REPO / ".venv/bin/apportion"), "studio", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until(lambda: _answers(port), 30, what="studio up")
            print(f"studio started: RSS {rss_mb(studio.pid):.0f} MB")
            first = 0.0
            for n in range(1, args.uploads + 1):
                body = largest_job(args.max_bytes, n)
                took = upload(port, body, n)
                rss = rss_mb(studio.pid)
                if n == 1:
                    first = rss
                    print(f"job size {len(body) / 1e6:.2f} MB")
                if n == 1 or n % 10 == 0:
                    print(f"after {n:3d} uploads: RSS {rss:.0f} MB ({rss / first:.2f}x), "
                          f"last upload {took:.1f} s")  # fmt: skip
            verdict = "met" if rss <= 2 * first else "NOT met"
            print(f"RSS after {args.uploads} / after 1: {rss / first:.2f} ({verdict}: <= 2)")
        finally:
            studio.terminate()
            studio.wait(20)
            next(redis_gen, None)
    return 0


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/api/state")
        conn.getresponse().read()
        conn.close()
        return True
    except OSError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
