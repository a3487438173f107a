"""Differential test: launch_select candidates against OpenStack Placement's own code.

Not part of the product or its test suite: Placement and its dependencies live in a
separate virtualenv, and this script runs there (the project is only read, for the
engine's answers, from a JSON file written by ``--export``). Nothing of Placement is
copied here.

    # 1. with the project's venv: export jobs and the engine's candidates (the golden
    #    corpus's jobs, or N random forests drawn by the brute-force test's strategies)
    .venv/bin/python -m bench.placement_oracle --export /tmp/jobs.json [--golden DIR | --random N]
    # 2. with a venv holding Placement (pip install its requirements, fixtures,
    #    testtools, oslotest, wsgi-intercept, keystoneauth1) and its source on PYTHONPATH:
    PYTHONPATH=PLACEMENT_SRC PVENV/bin/python bench/placement_oracle.py --compare /tmp/jobs.json

Each job's providers are created through Placement's REST API in-process (sqlite,
``placement.direct``), usages as one consumer's allocations, and the job's query
is sent as GET /allocation_candidates at the latest microversion. Names the project
allows but Placement does not (resource classes and traits outside its registry,
aggregate names, provider names) are mapped to CUSTOM_* names and UUIDs and back.
Candidates are compared as sets of (allocations, mappings).

``--serve FILE`` is the timing mode bench/bench_reference.py drives (see ``serve``):
one set of providers loaded once, then rounds of timed GET /allocation_candidates
calls, with Placement's options (``max_allocation_candidates``, the wide-tree
workaround) set per request.

Jobs Placement cannot express are skipped and counted: an inventory with total 0, a
``limit`` (Placement picks at random), several resourced suffixed groups without
``group_policy`` (Placement answers 400; the project defaults to none, as the seed
says).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NAMESPACE = uuid.UUID("6f0e5b1c-4a2e-4c1b-9d1e-1a2b3c4d5e6f")


# ---- step 1: the project's side -------------------------------------------------------


def export(out: Path, golden: Path | None, random: int) -> None:
    """Jobs and the engine's candidates for each: the golden corpus's (``golden``), or
    ``random`` forests and requests drawn by the brute-force test's strategies."""
    payloads = _random_jobs(random) if random else _golden_jobs(golden)
    rows = []
    seen = set()
    for name, payload in payloads:
        key = json.dumps(
            [payload.get("providers"), payload.get("request")], sort_keys=True, default=str
        )
        if key not in seen:
            seen.add(key)
            row = _answer(name, payload)
            if row is not None:
                rows.append(row)
    out.write_text(json.dumps(rows))
    print(f"{len(rows)} distinct valid jobs written to {out}")


def _golden_jobs(folder: Path | None) -> list[tuple[str, dict[str, Any]]]:
    import pickle

    out = []
    for path in sorted((folder or Path("/work/golden-before")).glob("launch_select-*.pkl")):
        payload = pickle.loads(path.read_bytes())["payload"]
        if isinstance(payload, dict):
            out.append((path.name, payload))
    return out


def _random_jobs(count: int) -> list[tuple[str, dict[str, Any]]]:
    from hypothesis import HealthCheck, given, settings

    from tests.unit.placement.test_brute_force import forests, requests

    drawn: list[tuple[str, dict[str, Any]]] = []
    jobs = forests().flatmap(lambda f: requests(len(f)).map(lambda r: (f, r)))

    @settings(
        max_examples=count,
        database=None,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(jobs)
    def draw(job: tuple[list[dict[str, Any]], Any]) -> None:
        providers, request = job
        payload = {"providers": providers, "request": request.render(), "policy": None}
        drawn.append((f"random-{len(drawn)}", json.loads(json.dumps(payload))))

    draw()
    return drawn


def _answer(name: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    from apportion.engine import Context, validate
    from apportion.errors import DomainError
    from apportion.placement import find_candidates

    try:
        job = validate("launch_select", payload)
        cs = find_candidates(job, Context())
    except DomainError:
        return None
    return {
        "name": name,
        "providers": [dict(p) for p in job.providers],
        "request": job.request,
        "candidates": sorted(canon(r["allocations"], r["mappings"]) for r in cs.requests),
        "capped": cs.capped,
    }


def canon(allocations: dict[str, Any], mappings: dict[str, list[str]]) -> str:
    return json.dumps(
        {
            "allocations": {p: a["resources"] for p, a in allocations.items()},
            "mappings": {s: sorted(ps) for s, ps in mappings.items()},
        },
        sort_keys=True,
    )


# ---- step 2: Placement's side -------------------------------------------------------------


class Names:
    """Project names ⇄ names Placement accepts."""

    def __init__(self, standard_classes: set[str], standard_traits: set[str]) -> None:
        self.classes = standard_classes
        self.traits = standard_traits
        self.back: dict[str, str] = {}
        self.used_classes: set[str] = set()
        self.used_traits: set[str] = set()

    def rc(self, name: str) -> str:
        out = name if name in self.classes or name.startswith("CUSTOM_") else f"CUSTOM_X_{name}"
        self.back[out] = name
        if out.startswith("CUSTOM_"):
            self.used_classes.add(out)
        return out

    def trait(self, name: str) -> str:
        out = name if name in self.traits or name.startswith("CUSTOM_") else f"CUSTOM_X_{name}"
        if out.startswith("CUSTOM_"):
            self.used_traits.add(out)
        return out

    @staticmethod
    def uuid(name: str) -> str:
        return str(uuid.uuid5(NAMESPACE, name))


def translate_query(text: str, names: Names, keep_limit: bool = False) -> str | None:
    """The project's query in Placement's names; None when Placement cannot take it
    (``limit``, unless ``keep_limit``: the timing mode sends it as it is)."""
    from urllib.parse import quote

    pairs = _split(text)
    out = []
    suffixes = set()
    has_policy = False
    for key, value in pairs:
        prefix = next(
            (p for p in ("resources", "required", "member_of", "in_tree") if key.startswith(p)),
            None,
        )
        if key == "limit":
            if not keep_limit:
                return None
            out.append(f"limit={int(value)}")
            continue
        if key == "group_policy":
            has_policy = True
        if prefix is not None and key != prefix:
            suffixes.add(key[len(prefix) :])
        if prefix == "resources":
            items = []
            for item in value.split(","):
                rc, _, n = item.partition(":")
                items.append(f"{names.rc(rc.strip())}:{n.strip()}")
            value = ",".join(items)
        elif prefix == "required" or key == "root_required":
            head = "in:" if value.startswith("in:") else ""
            body = value[len(head) :]
            value = head + ",".join(
                ("!" if t.strip().startswith("!") else "") + names.trait(t.strip().lstrip("!"))
                for t in body.split(",")
            )
        elif prefix == "member_of":
            head = next((h for h in ("!in:", "in:", "!") if value.startswith(h)), "")
            body = value[len(head) :]
            value = head + ",".join(names.uuid("agg:" + a.strip()) for a in body.split(","))
        elif prefix == "in_tree":
            value = names.uuid("rp:" + value)
        out.append(f"{key}={quote(value, safe=':,!')}")
    # The project defaults group_policy to none (the seed); Placement wants it said.
    if len(suffixes) > 1 and not has_policy:
        out.append("group_policy=none")
    return "&".join(out)


def _split(text: str) -> list[tuple[str, str]]:
    from urllib.parse import unquote_plus

    text = text.strip().removeprefix("?")
    pairs = []
    for part in text.split("&"):
        part = part.strip()
        if part:
            key, _, value = part.partition("=")
            pairs.append((unquote_plus(key).strip(), unquote_plus(value).strip()))
    return pairs


def _ok(response: Any, what: str) -> bool:
    """True for a 2xx response; otherwise say why on stderr (for the skip counts)."""
    if response:
        return True
    print(f"{what}: {response.status_code} {response.text[:300]}", file=sys.stderr)
    return False


def register_and_load(client: Any, providers: list[dict[str, Any]], names: Names) -> bool:
    """Register every custom name the job uses (names exist here without a registry, so
    an unknown one matches nothing instead of a 400), then :func:`load` the providers."""
    for rc in names.used_classes:
        client.put(f"/resource_classes/{rc}")
    for trait in names.used_traits:
        client.put(f"/traits/{trait}")
    return load(client, providers, names)


def load(client: Any, providers: list[dict[str, Any]], names: Names) -> bool:
    """Create ``providers`` in Placement; False when it cannot hold them."""
    by_name = {p["uuid"]: p for p in providers}
    created: set[str] = set()
    order: list[dict[str, Any]] = []

    def visit(p: dict[str, Any]) -> None:
        if p["uuid"] in created:
            return
        parent = p.get("parent_provider_uuid")
        if parent is not None:
            visit(by_name[parent])
        created.add(p["uuid"])
        order.append(p)

    for p in providers:
        visit(p)
    for p in order:
        body = {"name": p["uuid"][:200], "uuid": names.uuid("rp:" + p["uuid"])}
        if p.get("parent_provider_uuid"):
            body["parent_provider_uuid"] = names.uuid("rp:" + p["parent_provider_uuid"])
        if not _ok(client.post("/resource_providers", json=body), "provider"):
            return False
    return all(_fill(client, p, names) for p in order)


def _fill(client: Any, p: dict[str, Any], names: Names) -> bool:
    rp = names.uuid("rp:" + p["uuid"])
    for rc in p["inventories"]:
        if names.rc(rc).startswith("CUSTOM_"):
            client.put(f"/resource_classes/{names.rc(rc)}")
    for t in p["traits"]:
        if names.trait(t).startswith("CUSTOM_"):
            client.put(f"/traits/{names.trait(t)}")
    gen = client.get(f"/resource_providers/{rp}").json()["generation"]
    # total 0 fits nothing in either system, and Placement wants total >= 1: leave out.
    p = {
        **p,
        "inventories": {rc: inv for rc, inv in p["inventories"].items() if inv["total"] >= 1},
    }
    p["usages"] = {rc: n for rc, n in p["usages"].items() if rc in p["inventories"]}
    if p["inventories"]:
        # Usages first, against a relaxed inventory (Placement checks each allocation
        # against min_unit, max_unit and step_size), then the job's own inventory.
        if p["usages"]:
            loose = {
                names.rc(rc): {"total": max(inv["total"], p["usages"].get(rc, 0), 1)}
                for rc, inv in p["inventories"].items()
            }
            r = client.put(
                f"/resource_providers/{rp}/inventories",
                json={"resource_provider_generation": gen, "inventories": loose},
            )
            if not _ok(r, "loose inventory"):
                return False
            gen = r.json()["resource_provider_generation"]
            consumer = str(uuid.uuid4())
            alloc = {
                "allocations": {
                    rp: {"resources": {names.rc(rc): n for rc, n in p["usages"].items() if n}}
                },
                "project_id": str(uuid.uuid4()),
                "user_id": str(uuid.uuid4()),
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
            if any(p["usages"].values()) and not _ok(
                client.put(f"/allocations/{consumer}", json=alloc), "usages"
            ):
                return False
            gen = client.get(f"/resource_providers/{rp}").json()["generation"]
        inventories = {}
        for rc, inv in p["inventories"].items():
            inventories[names.rc(rc)] = {
                "total": inv["total"],
                "reserved": inv["reserved"],
                "min_unit": inv["min_unit"],
                "max_unit": inv["total"] if inv["max_unit"] is None else inv["max_unit"],
                "step_size": inv["step_size"],
                "allocation_ratio": inv["allocation_ratio"],
            }
        r = client.put(
            f"/resource_providers/{rp}/inventories",
            json={"resource_provider_generation": gen, "inventories": inventories},
        )
        if not _ok(r, "inventory"):
            return False
        gen = r.json()["resource_provider_generation"]
    if p["traits"]:
        r = client.put(
            f"/resource_providers/{rp}/traits",
            json={
                "resource_provider_generation": gen,
                "traits": [names.trait(t) for t in p["traits"]],
            },
        )
        if not r:
            return False
        gen = r.json()["resource_provider_generation"]
    if p["aggregates"]:
        r = client.put(
            f"/resource_providers/{rp}/aggregates",
            json={
                "resource_provider_generation": gen,
                "aggregates": [names.uuid("agg:" + a) for a in p["aggregates"]],
            },
        )
        if not r:
            return False
    return True


@contextlib.contextmanager
def _placement() -> Iterator[tuple[Any, Any, Names]]:
    """Placement's ``direct`` module, a fresh configuration on an in-memory sqlite
    database (its own test fixtures), and a name map; cleaned up on exit."""
    import os_resource_classes
    import os_traits
    from oslo_config import cfg
    from oslo_config import fixture as config_fixture
    from oslo_policy import opts as policy_opts
    from placement import conf, direct
    from placement.tests import fixtures as pfix
    from placement.tests.unit import policy_fixture

    conf_fixture = config_fixture.Config(cfg.ConfigOpts())
    conf_fixture.setUp()
    conf.register_opts(conf_fixture.conf)
    db = pfix.Database(conf_fixture, set_config=True)
    db.setUp()
    conf_fixture.conf([], default_config_files=[])
    policy_opts.set_defaults(conf_fixture.conf)
    pf = policy_fixture.PolicyFixture(conf_fixture)
    pf.setUp()
    names = Names(set(os_resource_classes.STANDARDS), set(os_traits.get_traits()))
    try:
        yield direct, conf_fixture.conf, names
    finally:
        pf.cleanUp()
        db.cleanUp()
        conf_fixture.cleanUp()


def compare(path: Path, limit: int | None) -> None:
    rows = json.loads(path.read_text())[:limit]
    outcome: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for row in rows:
        with _placement() as (direct, conf, names):
            verdict = _one(direct, conf, row, names)
        outcome[verdict] += 1
        examples.setdefault(verdict, []).append(row["name"])
    for verdict, n in outcome.most_common():
        print(f"{n:5d}  {verdict}  e.g. {', '.join(examples[verdict][:3])}")


def _one(direct: Any, conf: Any, row: dict[str, Any], names: Names) -> str:
    if row["capped"]:
        return "skipped: capped answer"
    query = translate_query(row["request"], names)
    if query is None:
        return "skipped: limit (Placement samples at random)"
    with direct.PlacementDirect(conf, latest_microversion=True) as client:
        if not register_and_load(client, row["providers"], names):
            return "skipped: providers Placement cannot hold (total 0, over-used)"
        r = client.get(f"/allocation_candidates?{query}")
        if r.status_code != 200:
            theirs: list[str] | None = None
        else:
            theirs = sorted(
                _back(c, row["providers"], names) for c in r.json()["allocation_requests"]
            )
    ours = row["candidates"]
    if theirs is None:
        print(f"{row['name']}: {query} -> {r.status_code} {r.text[:300]}", file=sys.stderr)
        return f"Placement {r.status_code}, project answered {len(ours)}"
    if theirs == ours:
        return "same candidates"
    only_ours = sorted(set(ours) - set(theirs))[:3]
    only_theirs = sorted(set(theirs) - set(ours))[:3]
    print(f"DIFF {row['name']}: {row['request']}", file=sys.stderr)
    print(f"  only ours {only_ours}\n  only theirs {only_theirs}", file=sys.stderr)
    return _classify(ours, theirs)


def _back(candidate: dict[str, Any], providers: list[dict[str, Any]], names: Names) -> str:
    by_uuid = {names.uuid("rp:" + p["uuid"]): p["uuid"] for p in providers}
    allocations = {
        by_uuid[u]: {"resources": {names.back.get(rc, rc): n for rc, n in a["resources"].items()}}
        for u, a in candidate["allocations"].items()
    }
    mappings = {s: [by_uuid[u] for u in us] for s, us in candidate.get("mappings", {}).items()}
    return canon(allocations, mappings)


def _classify(ours: list[str], theirs: list[str]) -> str:
    mine, other = set(ours), set(theirs)
    if other < mine:
        return "differ: Placement returns a subset (collapsed candidates / unmatched resourceless)"
    if mine < other:
        return "differ: Placement returns more"
    totals_ours = Counter(json.dumps(json.loads(c)["allocations"]) for c in ours)
    if len(ours) == len(theirs) and not totals_ours:
        return "differ: other"
    return "differ: different candidates (e.g. inflated amounts)"


# ---- timing: GET /allocation_candidates on a loaded database ----------------------------


def serve(path: Path) -> None:
    """Load one set of providers into Placement, then time its answers to requests.

    ``path`` holds ``{"providers": [...], "queries": {NAME: {"request": QUERY,
    "config": {GROUP: {OPTION: VALUE}}}}}`` in the project's form. After loading, one
    line ``{"ready": true, "load_s": …}`` is printed; then each line read from stdin,
    ``{"query": NAME, "calls": K, "answer": BOOL}``, is answered by one line: the wall and
    CPU seconds of each of K calls ``GET /allocation_candidates?QUERY`` through the
    in-process client (Placement's WSGI app: handler, database queries and the JSON
    body it returns), with the options of ``config`` set for the calls, the number of
    candidates, and with ``answer`` the candidates in the project's names.
    """
    spec = json.loads(path.read_text())
    with _placement() as (direct, conf, names):
        queries = {
            name: translate_query(q["request"], names, keep_limit=True)
            for name, q in spec["queries"].items()
        }
        options = {
            (g, o) for q in spec["queries"].values() for g, v in q["config"].items() for o in v
        }
        started = time.perf_counter()
        with direct.PlacementDirect(conf, latest_microversion=True) as client:
            if not register_and_load(client, spec["providers"], names):
                raise SystemExit("Placement cannot hold these providers")
            _say({"ready": True, "load_s": time.perf_counter() - started})
            for line in sys.stdin:
                order = json.loads(line)
                config = spec["queries"][order["query"]]["config"]
                for group, option in options:
                    if option in config.get(group, {}):
                        conf.set_override(option, config[group][option], group=group)
                    else:
                        conf.clear_override(option, group=group)
                _say(_round(client, queries[order["query"]], order, spec["providers"], names))


def _round(
    client: Any, query: str | None, order: dict[str, Any], providers: Any, names: Names
) -> dict[str, Any]:
    walls, cpus = [], []
    for _ in range(order["calls"]):
        wall, cpu = time.perf_counter(), time.process_time()
        r = client.get(f"/allocation_candidates?{query}")
        body = r.content
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
        if r.status_code != 200:
            raise SystemExit(f"{query}: {r.status_code} {body[:300]!r}")
    out: dict[str, Any] = {"wall_s": walls, "cpu_s": cpus, "bytes": len(body)}
    candidates = json.loads(body)["allocation_requests"]
    out["count"] = len(candidates)
    if order.get("answer"):
        out["candidates"] = sorted(_back(c, providers, names) for c in candidates)
    return out


def _say(row: dict[str, Any]) -> None:
    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--export", type=Path)
    parser.add_argument("--golden", type=Path)
    parser.add_argument("--random", type=int, default=0, help="export N random jobs instead")
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--serve", type=Path, help="time requests on one set of providers")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
    if args.export:
        export(args.export, args.golden, args.random)
    if args.compare:
        compare(args.compare, args.limit)


if __name__ == "__main__":
    main()
