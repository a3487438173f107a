"""Differential test of auto_attach against Candlepin's own rules.js, run under Node.

Run: ``.venv/bin/python bench/attach_differential.py --candlepin PATH [--rules R]
[--corpus random|partial-stacks] [--jobs N] [--seed S] [--show K] [--big]``

``PATH`` is a clone of https://github.com/candlepin/candlepin (a bare mirror is fine; the
environment variable ``CANDLEPIN_REPO`` may name it instead). Without it, or without
``node``, the script says so and exits 0: it is a tool for developers, not part of CI,
and nothing of Candlepin's is in this repository. The rules file is read from the clone
with ``git show`` at the commits below and handed to ``bench/attach_oracle.js``, which
reproduces the server's part of ``getBestPools`` around rules.js (compliance status,
products to cover, the pools offered to the rules, the pre-entitlement check) and calls
``select_pools``.

Jobs are random consumers × pools from a fixed seed (``--seed``), drawn from the whole
attribute space the rules read: physical and guest consumers with or without socket,
core, RAM, arch and storage facts, hypervisors with guests, syspurpose role/addons/SLA/
usage/service type, installed products; pools stacked or not, multi-entitlement or not,
with sizes, instance_multiplier, arch, virt_only, requires_host, guest_limit, syspurpose
values, unlimited or used-up quantities, expired and future dates, and exact copies of
other pools (identical pools); sometimes attached entitlements (so partial stacks and
compliant products occur) and sometimes an explicit product list.

``--corpus partial-stacks`` draws only consumers that already hold part of one or two
stacks (an entitlement of a stacked pool too small to cover them), most with a role
and addons, sometimes a compliant product whose pool carries them; the pools are more
of those stacks and unstacked pools, carrying the consumer's role or addons (in other
spellings) or others', providing installed products or not, among random ones. In the
random corpus about 5 % of the consumers hold a partial stack; here nearly all do, and
most still need a role or addon when the stack is completed.

An answer agrees when the pool → quantity maps are equal. A disagreement where the two
answers become equal once identical pools (same everything but the id) are treated as
one is counted apart, as a tie: Candlepin sorts with an unstable sort there, so either
answer is right. ``--big`` also runs bench/bench_attach.py's 2,000-pool job.

Exit status: 0 when every job agrees or ties (or the oracle is unavailable), 1 otherwise.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from apportion.engine import Context, run

HERE = Path(__file__).resolve().parent
ORACLE = HERE / "attach_oracle.js"

# rules.js of each profile: (commit, path) in candlepin/candlepin.
RULES = {
    "candlepin-5.42": (
        "70ede8407a2973b574a95736d8deaeebee1f7781",
        "server/src/main/resources/rules/rules.js",
    ),
    "candlepin-5.44": (
        "575931d868526708804ce4e857d561296856d345",
        "src/main/resources/rules/rules.js",
    ),
}

AT = "2026-06-01T00:00:00.000Z"
PRODUCTS = [f"p{i}" for i in range(8)]
STACKS = ["s1", "s2", "s3"]
HOST = "host-1"
ROLES = ["RHEL Server", "rhel server", "RHEL Workstation", "Satellite"]
ADDONS = ["RHEL EUS", "Smart Management", "ELS"]
LEVELS = ["Premium", "Standard", "Self-Support"]
USAGES = ["Production", "Development"]
TYPES = ["L1-L3", "L3"]


# ---- random jobs (apportion's snake_case form) ---------------------------------------


def _maybe(rng: random.Random, p: float, value: Any) -> Any:
    return value if rng.random() < p else None


def _consumer(rng: random.Random) -> dict[str, Any]:
    guest = rng.random() < 0.35
    facts: dict[str, str] = {}
    if rng.random() < 0.85:
        facts["cpu.cpu_socket(s)"] = str(rng.choice([1, 2, 2, 4, 8, 12]))
    if rng.random() < 0.7:
        facts["cpu.core(s)_per_socket"] = str(rng.choice([1, 2, 4, 6]))
    if rng.random() < 0.7:
        facts["memory.memtotal"] = str(rng.choice([2, 4, 8, 16, 64]) * 1024 * 1024 - 1000)
    if rng.random() < 0.8:
        facts["uname.machine"] = rng.choice(["x86_64", "x86_64", "ppc64le", "i686"])
    if rng.random() < 0.15:
        facts["band.storage.usage"] = str(rng.choice([1, 2, 5]))
    facts["virt.is_guest"] = "true" if guest else "false"
    if guest:
        facts["virt.uuid"] = "guest-1"
    installed = rng.sample(PRODUCTS, rng.randint(1, 5))
    guests = []
    if not guest and rng.random() < 0.2:
        for i in range(rng.randint(1, 4)):
            active = "1" if rng.random() < 0.8 else "0"
            attrs = {"virtWhoType": "libvirt", "active": active}
            guests.append({"guest_id": f"g{i}", "attributes": attrs})
    out: dict[str, Any] = {
        "uuid": "consumer-1",
        "type": "hypervisor" if not guest and rng.random() < 0.05 else "system",
        "facts": facts,
        "installed_products": installed,
        "addons": rng.sample(ADDONS, rng.choice([0, 0, 1, 2])),
        "guest_ids": guests,
    }
    for name, values, p in (
        ("role", ROLES, 0.4),
        ("service_level", LEVELS, 0.4),
        ("usage", USAGES, 0.3),
        ("service_type", TYPES, 0.15),
    ):
        if rng.random() < p:
            out[name] = rng.choice(values)
    return out


def _pool(rng: random.Random, index: int, guest: bool) -> dict[str, Any]:
    pattrs: dict[str, str] = {}
    attrs: dict[str, str] = {}
    if rng.random() < 0.45:
        pattrs["stacking_id"] = rng.choice(STACKS)
        pattrs["multi-entitlement"] = "yes"
    elif rng.random() < 0.5:
        pattrs["multi-entitlement"] = rng.choice(["yes", "Yes", "no"])
    for name, values, p in (
        ("sockets", ["1", "2", "4", "8"], 0.45),
        ("cores", ["2", "4", "8", "16"], 0.25),
        ("ram", ["4", "8", "16", "32"], 0.15),
        ("vcpu", ["1", "2", "4", "8"], 0.15),
        ("storage_band", ["1", "2", "4"], 0.05),
        ("guest_limit", ["2", "4", "-1"], 0.06),
        ("instance_multiplier", ["2"], 0.12),
        ("arch", ["x86_64", "ALL", "x86", "ppc64le", "x86_64,ppc64le"], 0.3),
        ("roles", ["RHEL Server", "RHEL Workstation", "Satellite, RHEL Server"], 0.25),
        ("addons", ["RHEL EUS", "ELS", "RHEL EUS,Smart Management"], 0.2),
        ("support_level", LEVELS, 0.4),
        ("usage", USAGES, 0.25),
        ("support_type", TYPES, 0.1),
    ):
        if rng.random() < p:
            pattrs[name] = rng.choice(values)
    if rng.random() < 0.12:
        (attrs if rng.random() < 0.5 else pattrs)["virt_only"] = "true"
    if guest and rng.random() < 0.15:
        attrs["virt_only"] = "true"
        attrs["requires_host"] = HOST if rng.random() < 0.8 else "other-host"
    if rng.random() < 0.04:
        attrs["physical_only"] = "true"
    # Rarer readings: a value of "0" (unset), a pool attribute over the product's, a
    # role or addon on the pool rather than its product, a pool reserved for a consumer.
    if rng.random() < 0.04:
        pattrs[rng.choice(["sockets", "cores", "vcpu", "instance_multiplier"])] = "0"
    if rng.random() < 0.05:
        attrs[rng.choice(["sockets", "cores", "ram"])] = rng.choice(["2", "8"])
    if rng.random() < 0.04:
        attrs[rng.choice(["roles", "addons"])] = rng.choice(["RHEL Server", "ELS"])
    if rng.random() < 0.03:
        attrs["requires_consumer"] = rng.choice(["consumer-1", "someone-else"])
    r = rng.random()
    if r < 0.06:
        quantity, consumed = -1, 0
    elif r < 0.16:
        quantity = rng.randint(1, 3)
        consumed = rng.randint(0, quantity)
    else:
        quantity = rng.randint(1, 20)
        consumed = rng.randint(0, quantity) if rng.random() < 0.15 else 0
    start, end = "2025-01-01T00:00:00.000Z", f"20{rng.randint(27, 31)}-01-01T00:00:00.000Z"
    d = rng.random()
    if d < 0.04:
        end = "2026-01-01T00:00:00.000Z"
    elif d < 0.07:
        start = "2027-01-01T00:00:00.000Z"
    provided = rng.sample(PRODUCTS, rng.choice([0, 1, 1, 2, 3]))
    product = rng.choice(PRODUCTS) if rng.random() < 0.2 else f"sku-{index}"
    return {
        "id": f"pool-{index:02d}",
        "product_id": product,
        "quantity": quantity,
        "consumed": consumed,
        "start_date": start,
        "end_date": end,
        "attributes": attrs,
        "product_attributes": pattrs,
        "provided_products": provided,
    }


def random_job(rng: random.Random, rules: str) -> dict[str, Any]:
    consumer = _consumer(rng)
    guest = consumer["facts"]["virt.is_guest"] == "true"
    pools: list[dict[str, Any]] = []
    for i in range(rng.randint(1, 14)):
        if pools and rng.random() < 0.12:
            twin = copy.deepcopy(rng.choice(pools))  # an identical pool: only the id differs
            twin["id"] = f"pool-{i:02d}"
            pools.append(twin)
        else:
            pools.append(_pool(rng, i, guest))
    entitlements = []
    if rng.random() < 0.25:
        for k in range(rng.randint(1, 2)):
            source = copy.deepcopy(
                rng.choice(pools) if rng.random() < 0.6 else _pool(rng, 90 + k, guest)
            )
            entitlements.append({"id": f"ent-{k}", "pool": source, "quantity": rng.randint(1, 3)})
    job: dict[str, Any] = {
        "job_id": "differential",
        "consumer": consumer,
        "pools": pools,
        "entitlements": entitlements,
        "at": AT,
        "rules": rules,
    }
    if rng.random() < 0.1:
        job["products"] = rng.sample(PRODUCTS, rng.randint(1, 3))
    if guest:
        job["host_uuid"] = HOST
    return job


def _case_variant(rng: random.Random, value: str) -> str:
    return rng.choice([value, value.lower(), value.upper(), f" {value} "])


def _purpose_attrs(rng: random.Random, consumer: dict[str, Any]) -> dict[str, str]:
    """Roles/addons for a pool: often the consumer's own (in another spelling), else
    another's, else none."""
    out: dict[str, str] = {}
    role = consumer.get("role")
    if rng.random() < 0.5:
        if role and rng.random() < 0.7:
            out["roles"] = _case_variant(rng, role).strip()
        else:
            out["roles"] = rng.choice([*ROLES, "Satellite, RHEL Server"])
    if rng.random() < 0.45:
        mine = consumer.get("addons") or []
        if mine and rng.random() < 0.7:
            picked = rng.sample(mine, rng.randint(1, len(mine)))
            out["addons"] = ",".join(_case_variant(rng, a).strip() for a in picked)
        else:
            out["addons"] = rng.choice([*ADDONS, "RHEL EUS,Smart Management"])
    return out


def _stack_pool(
    rng: random.Random,
    pool_id: str,
    stack: str,
    consumer: dict[str, Any],
    installed: list[str],
    guest: bool,
) -> dict[str, Any]:
    """A pool of ``stack``: a size the consumer needs several of, often the consumer's
    role or addons, sometimes an installed product (else only its own sku)."""
    pool = _pool(rng, 0, guest)
    pool["id"] = pool_id
    pattrs = {
        k: v
        for k, v in pool["product_attributes"].items()
        if k not in ("roles", "addons", "stacking_id", "multi-entitlement", "instance_multiplier")
    }
    pattrs["stacking_id"] = stack
    pattrs["multi-entitlement"] = "yes"
    size = "vcpu" if guest and rng.random() < 0.5 else rng.choice(["sockets", "sockets", "cores"])
    pattrs[size] = rng.choice(["1", "2"])
    if not guest and rng.random() < 0.1:
        pattrs["instance_multiplier"] = "2"
    pattrs.update(_purpose_attrs(rng, consumer))
    pool["product_attributes"] = pattrs
    pool["attributes"] = {
        k: v for k, v in pool["attributes"].items() if k not in ("roles", "addons")
    }
    pool["product_id"] = rng.choice(installed) if rng.random() < 0.6 else f"sku-{pool_id}"
    pool["provided_products"] = rng.sample(installed, rng.choice([0, 0, 1]))
    if rng.random() < 0.8:  # mostly usable: the class is about which groups win
        pool["quantity"], pool["consumed"] = rng.randint(4, 20), 0
        pool["start_date"], pool["end_date"] = (
            "2025-01-01T00:00:00.000Z",
            "2030-01-01T00:00:00.000Z",
        )
    return pool


def partial_stack_job(rng: random.Random, rules: str) -> dict[str, Any]:
    """A consumer holding part of a stack (1–2 partial stacks, sometimes a compliant
    product too), with a role and addons more often than not; pools of those stacks
    and unstacked pools carrying the role, the addons or neither, providing installed
    products or not: the class where a partial stack and another group both offer a
    role or addon still needed."""
    consumer = _consumer(rng)
    guest = consumer["facts"]["virt.is_guest"] == "true"
    facts = consumer["facts"]
    facts["cpu.cpu_socket(s)"] = str(rng.choice([4, 8, 12]))
    if rng.random() < 0.75:
        consumer["role"] = rng.choice(ROLES)
    consumer["addons"] = rng.sample(ADDONS, rng.choice([0, 1, 1, 2]))
    if rng.random() < 0.8:
        # rules.js loops on a consumer's addon not in lower case once something is
        # attached (bench/attach.md); the oracle then waits 5 s and asks again
        # lower-cased. The pools keep their spellings, so matching is still exercised.
        consumer["addons"] = [a.lower() for a in consumer["addons"]]
    installed: list[str] = consumer["installed_products"]
    stacks = rng.sample(STACKS, rng.choice([1, 1, 2]))
    pools: list[dict[str, Any]] = []
    entitlements: list[dict[str, Any]] = []
    for k, stack in enumerate(stacks):
        held = _stack_pool(rng, f"pool-h{k}", stack, consumer, installed, guest)
        held["product_id"] = rng.choice(installed)  # in a compliance map: partial
        if rng.random() < 0.7:  # the held pool's roles/addons may already provide them
            held["product_attributes"].pop("roles", None)
            held["product_attributes"].pop("addons", None)
        entitlements.append({"id": f"ent-{k}", "pool": copy.deepcopy(held), "quantity": 1})
        if rng.random() < 0.5:
            pools.append(held)
        for i in range(rng.randint(1, 3)):
            pools.append(_stack_pool(rng, f"pool-{stack}-{i}", stack, consumer, installed, guest))
    for i in range(rng.randint(1, 4)):  # unstacked pools carrying the role or addons
        pool = _pool(rng, 40 + i, guest)
        attrs = pool["product_attributes"]
        for name in ("stacking_id", "roles", "addons"):
            attrs.pop(name, None)
        attrs.update(_purpose_attrs(rng, consumer))
        if rng.random() < 0.5:
            pool["provided_products"] = rng.sample(installed, 1)
        pools.append(pool)
    for i in range(rng.randint(0, 5)):
        pools.append(_pool(rng, 60 + i, guest))
    if rng.random() < 0.25:  # a compliant product whose pool may provide a role/addon
        done = _pool(rng, 95, guest)
        done["product_attributes"] = _purpose_attrs(rng, consumer)
        done["product_id"] = rng.choice(installed)
        done["start_date"], done["end_date"] = (
            "2025-01-01T00:00:00.000Z",
            "2030-01-01T00:00:00.000Z",
        )
        entitlements.append({"id": "ent-c", "pool": done, "quantity": 1})
    rng.shuffle(pools)
    job: dict[str, Any] = {
        "job_id": "differential",
        "consumer": consumer,
        "pools": pools,
        "entitlements": entitlements,
        "at": AT,
        "rules": rules,
    }
    if guest:
        job["host_uuid"] = HOST
    return job


CORPORA = {"random": random_job, "partial-stacks": partial_stack_job}


# ---- Candlepin's JSON ----------------------------------------------------------------


def _attributes(values: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _ids(values: list[str]) -> list[dict[str, str]]:
    return [{"productId": v} for v in values]


def candlepin_pool(pool: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": pool["id"],
        "productId": pool["product_id"],
        "quantity": pool["quantity"],
        "consumed": pool.get("consumed", 0),
        "startDate": pool.get("start_date"),
        "endDate": pool.get("end_date"),
        "attributes": _attributes(pool.get("attributes", {})),
        "productAttributes": _attributes(pool.get("product_attributes", {})),
        "providedProducts": _ids(pool.get("provided_products", [])),
        "derivedProductId": pool.get("derived_product_id"),
        "derivedProductAttributes": _attributes(pool.get("derived_product_attributes", {})),
        "derivedProvidedProducts": _ids(pool.get("derived_provided_products", [])),
        "restrictedToUsername": None,
    }


def candlepin_request(job: dict[str, Any]) -> dict[str, Any]:
    c = job["consumer"]
    consumer = {
        "uuid": c["uuid"],
        "username": None,
        "type": {"label": c.get("type", "system"), "manifest": False},
        "facts": c.get("facts", {}),
        "installedProducts": _ids(c.get("installed_products", [])),
        "role": c.get("role"),
        "addOns": c.get("addons", []),
        "serviceLevel": c.get("service_level"),
        "usage": c.get("usage"),
        "serviceType": c.get("service_type"),
        "guestIds": [
            {"guestId": g["guest_id"], "attributes": g["attributes"]}
            for g in c.get("guest_ids", [])
        ],
        "capabilities": [],
        "created": None,
    }
    entitlements = [
        {
            "id": e["id"],
            "quantity": e["quantity"],
            "startDate": e["pool"].get("start_date"),
            "endDate": e["pool"].get("end_date"),
            "pool": candlepin_pool(e["pool"]),
        }
        for e in job.get("entitlements", [])
    ]
    host = job.get("host_uuid")
    return {
        "consumer": consumer,
        "hostConsumer": {"uuid": host} if host else None,
        "entitlements": entitlements,
        "pools": [candlepin_pool(p) for p in job["pools"]],
        "products": job.get("products"),
        "date": job.get("at", AT),
        "considerDerived": False,
    }


# ---- comparing -----------------------------------------------------------------------


def _twin_classes(pools: list[dict[str, Any]]) -> dict[str, str]:
    """Each pool id → the id of the first pool identical to it but for the id."""
    seen: dict[str, str] = {}
    out: dict[str, str] = {}
    for pool in pools:
        key = json.dumps({k: v for k, v in pool.items() if k != "id"}, sort_keys=True)
        out[pool["id"]] = seen.setdefault(key, pool["id"])
    return out


def classify(job: dict[str, Any], ours: dict[str, int], theirs: dict[str, int]) -> str:
    if ours == theirs:
        return "agree"
    twins = _twin_classes(job["pools"])
    same = Counter((twins[k], v) for k, v in ours.items()) == Counter(
        (twins[k], v) for k, v in theirs.items()
    )
    return "tie of identical pools" if same else "differ"


def rules_file(repo: str, rules: str, workdir: str) -> str | None:
    commit, path = RULES[rules]
    try:
        text = subprocess.run(
            ["git", "--git-dir", _git_dir(repo), "show", f"{commit}:{path}"],
            check=True,
            capture_output=True,
        ).stdout
    except (subprocess.CalledProcessError, OSError) as exc:
        print(f"cannot read {path} at {commit[:10]} from {repo}: {exc}", file=sys.stderr)
        return None
    out = os.path.join(workdir, f"rules-{rules}.js")
    Path(out).write_bytes(text)
    return out


def _git_dir(repo: str) -> str:
    dotgit = os.path.join(repo, ".git")
    return dotgit if os.path.isdir(dotgit) else repo


def oracle(rules_js: str, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    lines = "".join(json.dumps(candlepin_request(j)) + "\n" for j in jobs)
    done = subprocess.run(
        ["node", str(ORACLE), rules_js], input=lines, capture_output=True, text=True, check=True
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def ours(job: dict[str, Any]) -> dict[str, Any]:
    envelope = run("auto_attach", job, Context())
    if envelope.status != "ok" or envelope.result is None:
        raise SystemExit(f"apportion did not answer: {envelope.model_dump_json()}")
    result: dict[str, Any] = envelope.result  # type: ignore[assignment]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--candlepin", default=os.environ.get("CANDLEPIN_REPO"))
    parser.add_argument("--rules", default="candlepin-5.42", choices=sorted(RULES))
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument(
        "--corpus",
        default="random",
        choices=sorted(CORPORA),
        help="random: the whole attribute space; partial-stacks: consumers holding part "
        "of a stack, with roles and addons",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--show", type=int, default=5, help="print this many disagreements")
    parser.add_argument("--big", action="store_true", help="also the 2,000-pool benchmark job")
    parser.add_argument("--dump", metavar="DIR", help="write each disagreeing job there")
    args = parser.parse_args()
    if not args.candlepin or shutil.which("node") is None:
        print("skipped: needs a Candlepin clone (--candlepin or CANDLEPIN_REPO) and node")
        return 0
    rng = random.Random(args.seed)
    make = CORPORA[args.corpus]
    jobs = [make(rng, args.rules) for _ in range(args.jobs)]
    if args.big:
        sys.path.insert(0, str(HERE.parent))
        from bench.bench_attach import make_job

        jobs.append(make_job(rules=args.rules))
    with tempfile.TemporaryDirectory() as workdir:
        rules_js = rules_file(args.candlepin, args.rules, workdir)
        if rules_js is None:
            return 0
        answers = oracle(rules_js, jobs)
    counts: Counter[str] = Counter()
    notes: Counter[str] = Counter()
    shown = 0
    for i, (job, theirs) in enumerate(zip(jobs, answers, strict=True)):
        if "error" in theirs:
            counts["oracle error"] += 1
            print(f"job {i}: oracle error {theirs['error'][:300]}")
            continue
        mine = ours(job)["pool_quantities"]
        verdict = classify(job, mine, theirs["pools"])
        counts[verdict] += 1
        if "note" in theirs:
            notes[theirs["note"]] += 1
        if verdict == "differ":
            if args.dump:
                Path(args.dump).mkdir(parents=True, exist_ok=True)
                Path(args.dump, f"job-{i:04d}.json").write_text(json.dumps(job, indent=1))
            if shown < args.show:
                shown += 1
                print(f"job {i}: apportion {mine}\n        candlepin {theirs['pools']}")
    total = sum(counts.values())
    summary = ", ".join(f"{k} {v}" for k, v in counts.most_common())
    agree = counts["agree"] + counts["tie of identical pools"]
    print(
        f"{args.rules}, {args.corpus}, seed {args.seed}: {total} jobs: {summary}; "
        f"agreement {100 * agree / max(total, 1):.1f} % (ties counted as agreeing), "
        f"{100 * counts['agree'] / max(total, 1):.1f} % identical"
    )
    for note, n in notes.items():
        print(f"  {n} job(s): {note}")
    return 0 if counts["differ"] == 0 and counts["oracle error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
