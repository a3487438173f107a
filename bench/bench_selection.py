"""Selection policy benchmark: 1,000 accounts, 4,000 candidates (target ≤ 5 ms added).

Run: ``.venv/bin/python bench/bench_selection.py [--repeat N] [--profile]``

Times the selection alone, two ways: ``apportion.selection.apply_policy`` over built
AllocationRequests (the module stack, the dice, pricing and annotated copies of every
candidate), and ``choose`` over a Pool — what launch_select runs since the engine
builds each AllocationRequest once, with its selection fields (apportion/launch.py):
the stack, the dice and pricing, no copies. Four hosts per account, each priced per
VCPU; accounts spread over three priorities, varied weights, costs and failure counts.

Stacks: the default policy (config/default_policy.yaml), a "full" stack using every
module except expression, and the full stack plus an expression module (which forks
one bounded yaql child per module, see apportion/yaql_eval/).
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from apportion.contracts.launch import (
    PROVIDER,
    Account,
    AllocationRequest,
    LaunchSelectJob,
    Provider,
)
from apportion.contracts.policy import PolicyModule
from apportion.engine import Context
from apportion.launch import solve as launch_solve
from apportion.limits import Limits
from apportion.selection import apply_policy, parse_policy
from apportion.selection.annotate import annotate
from apportion.selection.facts import DEFAULT_ACCOUNT, Facts, candidate_costs, request_costs
from apportion.selection.policy import Pool, _run_stack, choose

DEFAULT: list[dict[str, Any]] = [
    {"module": "equal"},
    {"module": "weights"},
    {"module": "failure_penalty", "percent": 5, "window_hours": 6},
    {"module": "priority", "mode": "strict"},
]
FULL: list[dict[str, Any]] = [
    {"module": "least_used"},
    {"module": "weights"},
    {"module": "priority", "mode": "probabilistic", "strength": 0.5},
    {"module": "failure_penalty", "percent": 5, "window_hours": 6, "hard_limit": 8},
    {"module": "cost", "mode": "probabilistic", "amount": 1},
    {"module": "priority", "mode": "strict"},
]
EXPRESSION: list[dict[str, Any]] = [
    *FULL,
    {
        "module": "expression",
        "expression": "switch($.cost_per_hour = 0 and $.now.hour >= 20 => 3, true => 1)",
    },
]


def make_inputs(
    n_accounts: int = 1_000, hosts_per_account: int = 4
) -> tuple[list[AllocationRequest], dict[str, Provider], dict[str, Account], dict[str, int]]:
    providers: dict[str, Provider] = {}
    requests: list[AllocationRequest] = []
    accounts: dict[str, Account] = {}
    failures: dict[str, int] = {}
    for a in range(n_accounts):
        name = f"acct{a:04d}"
        accounts[name] = Account(
            priority=a % 3, weight=1 + a % 4, cost_per_hour=0.1 * (a % 5), enabled=a % 97 != 0
        )
        if a % 7 == 0:
            failures[name] = a % 11
        for h in range(hosts_per_account):
            uuid = f"{name}-h{h}"
            providers[uuid] = PROVIDER.validate_python(
                {
                    "uuid": uuid,
                    "account": name,
                    "inventories": {"VCPU": {"total": 64}, "MEMORY_MB": {"total": 262_144}},
                    "usages": {"VCPU": (a * 7 + h * 13) % 64, "MEMORY_MB": (a * 4099) % 262_144},
                    "prices": {"VCPU": 0.01 + 0.001 * (a % 10)},
                }
            )
            requests.append(
                {
                    "allocations": {uuid: {"resources": {"VCPU": 2, "MEMORY_MB": 4096}}},
                    "mappings": {"": [uuid]},
                    "account": name,
                    "priority_group": None,
                    "probability": None,
                    "cost_per_hour": None,
                }
            )
    return requests, providers, accounts, failures


def time_stack(
    policy: list[PolicyModule],
    inputs: tuple[list[AllocationRequest], dict[str, Provider], dict[str, Account], dict[str, int]],
    repeat: int,
    *,
    engine: bool = False,
) -> list[float]:
    """Times of ``apply_policy`` (annotated copies of built requests) or, with
    ``engine``, of what launch_select itself runs: ``choose`` over a Pool, pricing
    included (the engine then builds each request once, with its selection fields)."""
    requests, providers, accounts, failures = inputs
    now = datetime(2026, 11, 21, 22, tzinfo=UTC)
    limits = Limits()
    times = []
    for seed in range(repeat):
        started = time.perf_counter()
        if engine:
            pool = Pool(
                accounts=[r["account"] for r in requests],
                costs=lambda base: request_costs(requests, providers, base),
                resource_classes=lambda: ["MEMORY_MB", "VCPU"],
                providers=lambda: providers,
            )
            choose(
                pool,
                accounts,
                policy,
                failures=failures,
                exclude_accounts=["acct0001"],
                seed=seed,
                now=now,
                limits=limits,
            )
        else:
            apply_policy(
                requests,
                providers,
                accounts,
                policy,
                failures=failures,
                exclude_accounts=["acct0001"],
                seed=seed,
                now=now,
                limits=limits,
            )
        times.append((time.perf_counter() - started) * 1000)
    return times


def launch_select_delta(
    inputs: tuple[list[AllocationRequest], dict[str, Provider], dict[str, Account], dict[str, int]],
    repeat: int,
) -> tuple[list[float], list[float]]:
    """What the target measures: a whole launch_select engine call with the default
    policy minus the same call with ``policy: null`` (candidates only), run in pairs so
    that a burst of load elsewhere spoils one pair, not the comparison.

    The same 1,000 accounts × 4 hosts as a job: 4,000 root providers, one candidate each
    (3,879 with room) for
    ``resources=VCPU:2,MEMORY_MB:4096``, failure counts given in the job.
    """
    _, providers, accounts, failures = inputs
    base = {
        "providers": list(providers.values()),
        "request": "resources=VCPU:2,MEMORY_MB:4096",
        "accounts": {a: s.model_dump() for a, s in accounts.items()},
        "failures": failures,
        "exclude_accounts": ["acct0001"],
        "seed": 7,
    }
    plain = LaunchSelectJob.model_validate({**base, "policy": None})
    chosen = LaunchSelectJob.model_validate({**base, "policy": DEFAULT})
    ctx = Context(now=datetime(2026, 11, 21, 22, tzinfo=UTC))
    # 121 of the 4,000 hosts have fewer than 2 VCPUs free (their usages are varied).
    assert len(launch_solve(plain, ctx)["allocation_requests"]) == 3_879
    assert launch_solve(chosen, ctx)["selection"] is not None
    plain_ms: list[float] = []
    chosen_ms: list[float] = []
    for i in range(repeat):
        # Alternate which goes first, so that drift hits both alike.
        for job, times in ((plain, plain_ms), (chosen, chosen_ms))[:: 1 if i % 2 else -1]:
            started = time.perf_counter()
            launch_solve(job, ctx)
            times.append((time.perf_counter() - started) * 1000)
    return plain_ms, chosen_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--profile", action="store_true", help="cProfile the default stack")
    args = parser.parse_args(argv)
    inputs = make_inputs()
    print(f"python {sys.version.split()[0]} on {platform.machine()} {platform.processor() or ''}")
    print(f"{len(inputs[2])} accounts, {len(inputs[0])} candidates, repeat {args.repeat}")
    stacks: dict[str, list[dict[str, Any]]] = {
        "default": DEFAULT,
        "full (no expression)": FULL,
        "full + expression": EXPRESSION,
    }
    for label, raw in stacks.items():
        policy = parse_policy(raw)
        for engine in (False, True):
            time_stack(policy, inputs, 2, engine=engine)  # warm-up: imports, yaql, caches
            times = time_stack(policy, inputs, args.repeat, engine=engine)
            how = "choose (engine)" if engine else "apply_policy"
            print(
                f"{label:22s} {how:16s} median {statistics.median(times):7.2f} ms   "
                f"min {min(times):7.2f}   max {max(times):7.2f}"
            )
    # Where the default stack's time goes: the per-candidate passes (cost of every
    # candidate, annotated copies) against the account-level rest (modules, dice, trace).
    requests, providers, accounts, _ = inputs
    settings = {
        r["account"] or "": accounts.get(r["account"] or "", DEFAULT_ACCOUNT) for r in requests
    }
    costs = candidate_costs(requests, providers, settings)
    per_account = dict.fromkeys(settings, (0, 0.001))
    eligible = tuple(sorted(a for a, s in settings.items() if s.enabled))
    facts = Facts.build(
        eligible,
        settings,
        inputs[3],
        {},
        Counter(r["account"] or "" for r in requests),
        None,
        datetime(2026, 11, 21, 22, tzinfo=UTC),
        Limits(),
    )
    default_policy = parse_policy(DEFAULT)
    for label, run in (
        ("  of which modules", lambda: _run_stack(default_policy, facts, removed_note=None)),
        ("  of which costs", lambda: candidate_costs(requests, providers, settings)),
        ("  of which annotation", lambda: annotate(requests, per_account, costs)),
    ):
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            run()
            times.append((time.perf_counter() - started) * 1000)
        print(f"{label:22s} median {statistics.median(times):7.2f} ms   min {min(times):7.2f}")
    plain_ms, chosen_ms = launch_select_delta(inputs, args.repeat)
    plain, chosen = statistics.median(plain_ms), statistics.median(chosen_ms)
    print(
        f"launch_select engine: policy null median {plain:7.2f} ms (min {min(plain_ms):.2f}), "
        f"default policy median {chosen:7.2f} ms (min {min(chosen_ms):.2f}); "
        f"added: {chosen - plain:.2f} ms median, {min(chosen_ms) - min(plain_ms):.2f} ms min "
        "(target ≤ 5)"
    )
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(time_stack, parse_policy(DEFAULT), inputs, 10)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
