"""Studio benchmark: one policy change for a 1,000-account deployable (target ≤ 100 ms).

Run: ``.venv/bin/python bench/bench_studio.py [--rounds N] [--browser]``

The studio (workers/studio/) serves over real HTTP (uvicorn on a loopback port, in a
thread of this process); the deployable is 1,000 accounts × 4 hosts (4,000 candidates,
tests/support/studio.py), uploaded once, so its candidates are computed once. Each
round then sends one ``POST /api/evaluate`` per stack, the stacks interleaved (paired
rounds: load changes hit every stack alike), each with a different weight for one
account, as a dragged slider does:

* ``default``: the default policy (equal, weights, failure_penalty, priority strict);
* ``full``: least_used, weights, priority probabilistic, failure_penalty with a hard
  limit, cost probabilistic, priority strict;
* ``+ expression``: the default plus one yaql expression module.

Timed: request sent to response body decoded (JSON), i.e. the server's whole share.
``--browser`` also opens the page in headless chromium (scripts/ensure-browser),
moves the weight slider ``--rounds`` times and reports the page's own measurement
of each change, input event to redrawn pies (``window.studio.timing``), split into
server round trip and drawing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import fakeredis  # noqa: E402
import uvicorn  # noqa: E402

from apportion.engine_settings import load_default_policy  # noqa: E402
from apportion.limits import DEFAULT_LIMITS  # noqa: E402
from apportion.workers.policies.store import PolicyStore  # noqa: E402
from apportion.workers.studio.app import Studio, StudioConfig, create_app  # noqa: E402
from tests.support.processes import free_port, wait_until  # noqa: E402
from tests.support.studio import many_accounts_job  # noqa: E402

HEADERS = {"X-Apportion-Studio": "1", "Content-Type": "application/json"}
DEFAULT: list[dict[str, Any]] = [
    {"module": "equal"},
    {"module": "weights"},
    {"module": "failure_penalty", "percent": 5, "window_hours": 6},
    {"module": "priority", "mode": "strict"},
]
STACKS: dict[str, list[dict[str, Any]]] = {
    "default": DEFAULT,
    "full": [
        {"module": "least_used"},
        {"module": "weights"},
        {"module": "priority", "mode": "probabilistic", "strength": 0.5},
        {"module": "failure_penalty", "percent": 5, "window_hours": 6, "hard_limit": 3},
        {"module": "cost", "mode": "probabilistic", "amount": 1},
        {"module": "priority", "mode": "strict"},
    ],
    "+ expression": [
        *DEFAULT,
        {"module": "expression", "expression": "switch($.cost_per_hour = 0 => 2, true => 1)"},
    ],
}


def serve() -> tuple[uvicorn.Server, int]:
    studio = Studio(
        StudioConfig(limits=DEFAULT_LIMITS, config_policy=load_default_policy()),
        PolicyStore(fakeredis.FakeRedis()),
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(studio), host="127.0.0.1", port=port, log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    wait_until(lambda: server.started, 20, what="studio server")
    return server, port


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, Any]:
    conn.request("POST", path, body, HEADERS)
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def bench_server(port: int, job: bytes, rounds: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    status, summary = post(conn, "/api/deployables/upload?name=bench.json", job)
    assert status == 200, summary
    ident = summary["id"]
    times: dict[str, list[float]] = {label: [] for label in STACKS}
    for r in range(rounds + 2):  # two warm-up rounds
        for label, stack in STACKS.items():
            policy = json.loads(json.dumps(stack))
            policy[1]["weights"] = {"acct0002": 1 + r % 9}
            body = json.dumps({"deployable": ident, "policy": policy}).encode()
            started = time.perf_counter()
            status, answer = post(conn, "/api/evaluate", body)
            elapsed = (time.perf_counter() - started) * 1000
            assert status == 200, answer
            if r >= 2:
                times[label].append(elapsed)
    lines = [f"{summary['candidates']} candidates, {len(summary['accounts'])} accounts"]
    for label, ts in times.items():
        lines.append(
            f"POST /api/evaluate {label:14s} median {statistics.median(ts):7.1f} ms  "
            f"min {min(ts):6.1f}  max {max(ts):7.1f}  ({len(ts)} rounds)"
        )
    return "\n".join(lines)


def bench_browser(port: int, job: bytes, rounds: int) -> str:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(60)
    try:
        driver.get(f"http://127.0.0.1:{port}/")
        wait_until(lambda: driver.execute_script("return document.body.dataset.ready"), 20)
        with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as f:
            f.write(job)
        driver.find_element("id", "upload").send_keys(f.name)
        wait_until(
            lambda: driver.execute_script(
                "const s = window.studio; return s.state.deployable && s.timing.renders > 0"
                " && !s.state.inflight"
            ),
            60,
        )
        os.unlink(f.name)
        timings = []
        for r in range(rounds):
            timings.append(
                driver.execute_async_script(
                    "const [value, done] = arguments;"
                    "const input = document.querySelector('input[data-account=\"acct0002\"]');"
                    "document.addEventListener('studio:rendered', function h() {"
                    "  if (window.studio.state.inflight || window.studio.state.pending) return;"
                    "  document.removeEventListener('studio:rendered', h);"
                    "  done(window.studio.timing.last); });"
                    "input.value = String(value);"
                    "input.dispatchEvent(new Event('input', {bubbles: true}));",
                    1 + r % 9 + 0.5,
                )
            )
    finally:
        driver.quit()
    lines = []
    for key in ("total_ms", "server_ms", "draw_ms", "pies_ms", "trace_ms"):
        values = [t[key] for t in timings]
        lines.append(
            f"page {key:10s} median {statistics.median(values):6.1f} ms  min {min(values):6.1f}"
            f"  p90 {sorted(values)[int(len(values) * 0.9)]:6.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--browser", action="store_true", help="also time the page")
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]} on {platform.machine()}, load {os.getloadavg()}")
    job = json.dumps(many_accounts_job(1_000, 4)).encode()
    server, port = serve()
    try:
        print(bench_server(port, job, args.rounds))
        if args.browser:
            print(bench_browser(port, job, args.rounds))
    finally:
        server.should_exit = True
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
