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
* ``+ expression``: the default plus one yaql expression module (the direct evaluation
  answers it, and a weight change leaves what it reads alone: memoised);
* ``+ expr, reads p``: the same, but it reads ``$.probability`` (which the weight
  changes): evaluated again every round;
* ``+ expr, yaql``: an expression the direct evaluation does not know (``int``): the
  forked child answers, the memo serves the later rounds.

Timed: request sent to response body decoded (JSON), i.e. the server's whole share.
``--before`` also times each expression stack the way it ran before the in-process
evaluation and the studio's memo (every expression in the forked child, no memo), in
the same rounds: each round sends the stack once each way (paired).
``--browser`` also opens the page in headless chromium (scripts/ensure-browser),
moves the weight slider ``--rounds`` times and reports the page's own measurement
of each change, input event to redrawn pies (``window.studio.timing``), split into
server round trip and drawing.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import fakeredis  # noqa: E402
import uvicorn  # noqa: E402

from apportion import yaql_eval  # noqa: E402
from apportion.engine_settings import load_default_policy  # noqa: E402
from apportion.limits import DEFAULT_LIMITS  # noqa: E402
from apportion.selection.memo import ExpressionMemo  # noqa: E402
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
    "+ expr, reads p": [
        *DEFAULT,
        {"module": "expression", "expression": "switch($.probability > 0.0015 => 2, true => 1)"},
    ],
    "+ expr, yaql": [
        *DEFAULT,
        {
            "module": "expression",
            "expression": "switch(int($.cost_per_hour * 10) = 0 => 2, true => 1)",
        },
    ],
}


class _NoMemo(ExpressionMemo):
    """The studio without its memo (``--before``)."""

    def get(self, key: Hashable) -> Any | None:
        return None

    def put(self, key: Hashable, value: Any) -> None:
        return None


@contextlib.contextmanager
def before(studio: Studio) -> Iterator[None]:
    """Every expression to the forked child and no memo, as before both changes."""
    route, memo = yaql_eval.route, studio.expression_memo
    yaql_eval.route = lambda tree, shape: yaql_eval.CHILD  # type: ignore[assignment]
    studio.expression_memo = _NoMemo()
    try:
        yield
    finally:
        yaql_eval.route, studio.expression_memo = route, memo


def serve() -> tuple[uvicorn.Server, int, Studio]:
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
    return server, port, studio


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, Any]:
    conn.request("POST", path, body, HEADERS)
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def bench_server(port: int, job: bytes, rounds: int, studio: Studio, paired: bool) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    status, summary = post(conn, "/api/deployables/upload?name=bench.json", job)
    assert status == 200, summary
    ident = summary["id"]
    runs = [(label, False) for label in STACKS]
    if paired:
        runs += [(label, True) for label in STACKS if "expr" in label]
    times: dict[tuple[str, bool], list[float]] = {run: [] for run in runs}
    for r in range(rounds + 2):  # two warm-up rounds
        for label, old in runs:
            policy = json.loads(json.dumps(STACKS[label]))
            # A new weight every round: a stack reading probabilities never repeats its input.
            policy[1]["weights"] = {"acct0002": 1 + r % 9 + r / 1000}
            body = json.dumps({"deployable": ident, "policy": policy}).encode()
            with before(studio) if old else contextlib.nullcontext():
                started = time.perf_counter()
                status, answer = post(conn, "/api/evaluate", body)
                elapsed = (time.perf_counter() - started) * 1000
            assert status == 200, answer
            if r >= 2:
                times[(label, old)].append(elapsed)
    lines = [f"{summary['candidates']} candidates, {len(summary['accounts'])} accounts"]
    for (label, old), ts in times.items():
        name = f"{label} (before)" if old else label
        line = (
            f"POST /api/evaluate {name:24s} median {statistics.median(ts):7.1f} ms  "
            f"min {min(ts):6.1f}  max {max(ts):7.1f}  ({len(ts)} rounds)"
        )
        if old:
            ratios = [b / a for a, b in zip(times[(label, False)], ts, strict=True)]
            line += f"  before/after per round: median {statistics.median(ratios):.1f}x"
        lines.append(line)
    memo = studio.expression_memo
    lines.append(f"studio memo: {memo.hits} hits, {memo.misses} misses")
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
        moves = {"default stack": _moves(driver, rounds)}
        # The same moves with an expression module added on the page (its values memoised).
        driver.execute_script(
            "document.getElementById('add-kind').value = 'expression';"
            "document.getElementById('add-module').click();"
        )
        wait_until(lambda: driver.execute_script(_SETTLED), 20)
        driver.execute_async_script(
            _CHANGE,
            '.module[data-module="expression"] textarea',
            STACKS["+ expression"][-1]["expression"],
        )
        moves["+ expression"] = _moves(driver, rounds)
    finally:
        driver.quit()
    lines = []
    for stack, timings in moves.items():
        for key in ("total_ms", "server_ms", "draw_ms", "pies_ms", "trace_ms"):
            values = [t[key] for t in timings]
            lines.append(
                f"page ({stack}) {key:10s} median {statistics.median(values):6.1f} ms"
                f"  min {min(values):6.1f}  p90 {sorted(values)[int(len(values) * 0.9)]:6.1f}"
            )
    return "\n".join(lines)


_SETTLED = (
    "const s = window.studio; return s.timing.renders > 0 && !s.state.inflight && !s.state.pending"
)
# One input event on a control, then the page's own timing once it has drawn the answer.
_CHANGE = (
    "const [selector, value, done] = arguments;"
    "const input = document.querySelector(selector);"
    "document.addEventListener('studio:rendered', function h() {"
    "  if (window.studio.state.inflight || window.studio.state.pending) return;"
    "  document.removeEventListener('studio:rendered', h);"
    "  done(window.studio.timing.last); });"
    "input.value = String(value);"
    "input.dispatchEvent(new Event('input', {bubbles: true}));"
)


def _moves(driver: Any, rounds: int) -> list[dict[str, float]]:
    return [
        driver.execute_async_script(_CHANGE, 'input[data-account="acct0002"]', 1 + r % 9 + 0.5)
        for r in range(rounds)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--browser", action="store_true", help="also time the page")
    parser.add_argument(
        "--before", action="store_true", help="also time the expression stacks as before"
    )
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]} on {platform.machine()}, load {os.getloadavg()}")
    job = json.dumps(many_accounts_job(1_000, 4)).encode()
    server, port, studio = serve()
    try:
        print(bench_server(port, job, args.rounds, studio, args.before))
        if args.browser:
            print(bench_browser(port, job, args.rounds))
    finally:
        server.should_exit = True
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
