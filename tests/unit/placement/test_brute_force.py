"""Random small forests and requests: the engine returns exactly what a brute-force
enumerator (written here, independently of the engine) finds valid.

The brute force tries every provider for every slot at every anchor and keeps
the assignments that satisfy every rule, each checked in the simplest way:
capacity and units, traits, aggregates, in_tree, sharing, root_required,
isolate and same_subtree. No valid candidate may be missing and no invalid one
returned; each returned candidate's anchor must be one at which it is valid.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, assume, given
from hypothesis import strategies as st

from tests.support.samples import comparison
from tests.unit.placement.helpers import SHARES, canon, find, got

RCS = ("A", "B")
TRAITS = ("T1", "T2")
AGGS = ("g1", "g2")


@dataclass
class Group:
    suffix: str
    resources: dict[str, int]
    required: list[frozenset[str]] = field(default_factory=list)
    forbidden: set[str] = field(default_factory=set)
    member_of: list[frozenset[str]] = field(default_factory=list)
    forbidden_aggs: set[str] = field(default_factory=set)
    in_tree: str | None = None

    def render(self) -> list[str]:
        s = self.suffix
        out = []
        if self.resources:
            out.append(f"resources{s}=" + ",".join(f"{rc}:{n}" for rc, n in self.resources.items()))
        for clause in self.required:
            out.append(
                f"required{s}="
                + (f"in:{','.join(sorted(clause))}" if len(clause) > 1 else next(iter(clause)))
            )
        for t in sorted(self.forbidden):
            out.append(f"required{s}=!{t}")
        for clause in self.member_of:
            out.append(
                f"member_of{s}="
                + (f"in:{','.join(sorted(clause))}" if len(clause) > 1 else next(iter(clause)))
            )
        if self.forbidden_aggs:
            names = sorted(self.forbidden_aggs)
            out.append(
                f"member_of{s}=" + (f"!in:{','.join(names)}" if len(names) > 1 else f"!{names[0]}")
            )
        if self.in_tree is not None:
            out.append(f"in_tree{s}={self.in_tree}")
        return out


@dataclass
class Request:
    groups: list[Group]
    isolate: bool
    same_subtrees: list[list[str]]
    root_required: set[str]
    root_forbidden: set[str]

    def render(self) -> str:
        parts = [p for g in self.groups for p in g.render()]
        if self.isolate:
            parts.append("group_policy=isolate")
        parts += ["same_subtree=" + ",".join(ss) for ss in self.same_subtrees]
        if self.root_required or self.root_forbidden:
            names = sorted(self.root_required) + [f"!{t}" for t in sorted(self.root_forbidden)]
            parts.append("root_required=" + ",".join(names))
        return "&".join(parts)


# ---- strategies ---------------------------------------------------------------------
# Strategies are built once (building them inside draws dominates the run time).
# Providers are biased towards having room, so that most examples have candidates.

TOTAL = st.sampled_from([0, 2, 3, 4, 4, 6, 6, 8, 8, 8])
MIN_UNIT = st.sampled_from([1] * 9 + [2])
MAX_UNIT = st.sampled_from([None] * 6 + [2, 4])
STEP = st.sampled_from([1] * 9 + [2])
RATIO = st.sampled_from([1.0, 1.0, 1.5])
USED = st.sampled_from([0] * 6 + [1, 2, 99])  # 99 stands for "all of it"
HAS = st.integers(0, 5)
PROVIDER_TRAITS = st.sets(st.sampled_from((*TRAITS, SHARES)), max_size=2)
PROVIDER_AGGS = st.sets(st.sampled_from(AGGS), max_size=2)
PARENT = [st.integers(-1, i - 1) for i in range(8)]
COUNT = st.integers(1, 6)
AMOUNT = st.sampled_from([1, 1, 1, 2, 3])
RESOURCES = st.dictionaries(st.sampled_from(RCS), AMOUNT, max_size=2)
ONE_IN_FOUR = st.integers(0, 3)
TRAIT_CLAUSES = st.lists(st.frozensets(st.sampled_from(TRAITS), min_size=1), min_size=1, max_size=2)
AGG_CLAUSES = st.lists(st.frozensets(st.sampled_from(AGGS), min_size=1), min_size=1, max_size=2)
ONE_TRAIT = st.sets(st.sampled_from(TRAITS), min_size=1, max_size=1)
SOME_AGGS = st.sets(st.sampled_from(AGGS), min_size=1, max_size=2)
SUFFIXES = st.sampled_from([[], ["_a"], ["_a", "_b"], ["_a", "_b", "_c"]])
TREES = [st.sampled_from([f"p{i}" for i in range(n)] + ["nope"]) for n in range(8)]


@st.composite
def forests(draw: st.DrawFn) -> list[dict[str, Any]]:
    providers = []
    for i in range(draw(COUNT)):
        parent = draw(PARENT[i]) if i else -1
        inventories: dict[str, Any] = {}
        usages: dict[str, int] = {}
        for rc in RCS:
            if not draw(HAS):
                continue
            total, min_unit, max_unit = draw(TOTAL), draw(MIN_UNIT), draw(MAX_UNIT)
            inventories[rc] = {
                "total": total,
                "reserved": min(total, draw(st.sampled_from([0, 0, 0, 1]))),
                "min_unit": min_unit,
                "max_unit": None if max_unit is None else max(max_unit, min_unit),
                "step_size": draw(STEP),
                "allocation_ratio": draw(RATIO),
            }
            usages[rc] = min(total, draw(USED))
        providers.append(
            {
                "uuid": f"p{i}",
                "parent_provider_uuid": None if parent < 0 else f"p{parent}",
                "inventories": inventories,
                "usages": usages,
                "traits": sorted(draw(PROVIDER_TRAITS)),
                "aggregates": sorted(draw(PROVIDER_AGGS)),
            }
        )
    return providers


def group(draw: st.DrawFn, suffix: str, n_providers: int) -> Group:
    def maybe(strategy: st.SearchStrategy[Any], empty: Any) -> Any:
        return draw(strategy) if draw(ONE_IN_FOUR) == 0 else empty

    return Group(
        suffix=suffix,
        resources=draw(RESOURCES),
        required=maybe(TRAIT_CLAUSES, []),
        forbidden=maybe(ONE_TRAIT, set()),
        member_of=maybe(AGG_CLAUSES, []),
        forbidden_aggs=maybe(SOME_AGGS, set()),
        in_tree=maybe(TREES[n_providers], None),
    )


@st.composite
def requests(draw: st.DrawFn, n_providers: int) -> Request:
    chosen: list[Group] = []
    if draw(st.booleans()):
        chosen.append(group(draw, "", n_providers))
    for suffix in draw(SUFFIXES):
        chosen.append(group(draw, suffix, n_providers))
    # A group exists only through its keys: one with none is not in the query.
    chosen = [g for g in chosen if g.render()]
    assume(any(g.resources for g in chosen))
    slots = sum(max(1, len(g.resources)) if not g.suffix else 1 for g in chosen)
    assume(slots <= 4)
    for g in chosen:
        assume(not any(clause <= g.forbidden for clause in g.required))
    suffixes = [g.suffix for g in chosen if g.suffix]
    same: list[list[str]] = []
    tie_some: bool = draw(st.booleans())
    if suffixes and tie_some:
        wide = min(2, len(suffixes))
        same.append(sorted(draw(st.sets(st.sampled_from(suffixes), min_size=wide))))
    covered = {s for ss in same for s in ss}
    for g in chosen:
        if g.suffix and not g.resources and g.suffix not in covered:
            same.append(sorted({g.suffix, *draw(st.sets(st.sampled_from(suffixes), max_size=1))}))
            covered |= set(same[-1])
    root_required: set[str] = set()
    root_forbidden: set[str] = set()
    if draw(ONE_IN_FOUR) == 0:
        root_required = draw(st.sets(st.sampled_from(TRAITS), max_size=1))
        root_forbidden = draw(st.sets(st.sampled_from(TRAITS), max_size=1)) - root_required
    return Request(chosen, draw(st.booleans()), same, root_required, root_forbidden)


# ---- the brute force ----------------------------------------------------------------


class Brute:
    def __init__(self, providers: list[dict[str, Any]]) -> None:
        self.p = providers
        self.uuid = [p["uuid"] for p in providers]
        self.idx = {u: i for i, u in enumerate(self.uuid)}
        self.parent = [
            -1 if p["parent_provider_uuid"] is None else self.idx[p["parent_provider_uuid"]]
            for p in providers
        ]
        self.traits = [set(p["traits"]) for p in providers]
        self.aggs = [set(p["aggregates"]) for p in providers]

    def root(self, i: int) -> int:
        while self.parent[i] >= 0:
            i = self.parent[i]
        return i

    def ancestors(self, i: int) -> set[int]:
        out = {i}
        while self.parent[i] >= 0:
            i = self.parent[i]
            out.add(i)
        return out

    def inventory(self, i: int, rc: str) -> tuple[int, int, int] | None:
        """(free, max_unit, fits-check data) or None."""
        inv = self.p[i]["inventories"].get(rc)
        if inv is None:
            return None
        capacity = int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"])
        used = self.p[i]["usages"].get(rc, 0)
        max_unit = inv["total"] if inv["max_unit"] is None else inv["max_unit"]
        return capacity - used, max_unit, 0

    def fits(self, i: int, rc: str, amount: int) -> bool:
        inv = self.p[i]["inventories"].get(rc)
        if inv is None:
            return False
        free, max_unit, _ = self.inventory(i, rc)  # type: ignore[misc]
        return (
            amount <= free
            and inv["min_unit"] <= amount <= max_unit
            and amount % inv["step_size"] == 0
        )

    def serves(self, s: int, anchor: int) -> bool:
        if SHARES not in self.traits[s] or self.root(s) == anchor:
            return False
        return any(
            self.aggs[s] & self.aggs[q] for q in range(len(self.p)) if self.root(q) == anchor
        )

    def slot_ok(
        self, g: Group, demands: dict[str, int], i: int, anchor: int, per_provider: bool
    ) -> bool:
        member = self.root(i) == anchor
        if not member and not self.serves(i, anchor):
            return False
        if not all(self.fits(i, rc, n) for rc, n in demands.items()):
            return False
        if g.forbidden & self.traits[i]:
            return False
        if per_provider and not all(c & self.traits[i] for c in g.required):
            return False
        if g.in_tree is not None and (
            g.in_tree not in self.idx or self.root(self.idx[g.in_tree]) != self.root(i)
        ):
            return False
        own = self.aggs[i]
        for clause in g.member_of:
            seen = own | self.aggs[self.root(i)] if (member and not g.suffix) else own
            if not clause & seen:
                return False
        bad_seen = own if g.suffix else own | self.aggs[self.root(i)]
        return not g.forbidden_aggs & bad_seen

    def candidates(self, req: Request) -> dict[tuple[int, ...], set[int]]:
        """assignment → anchors where it is valid."""
        slots: list[tuple[Group, dict[str, int], bool]] = []
        for g in req.groups:
            if g.suffix or not g.resources:
                slots.append((g, dict(g.resources), True))
            else:
                slots += [(g, {rc: n}, False) for rc, n in g.resources.items()]
        unsuffixed = [k for k, (g, d, _) in enumerate(slots) if not g.suffix and d]
        collective = next((g.required for g in req.groups if not g.suffix and g.resources), [])
        out: dict[tuple[int, ...], set[int]] = {}
        n = len(self.p)
        for anchor in {self.root(i) for i in range(n)}:
            if (
                not req.root_required <= self.traits[anchor]
                or req.root_forbidden & self.traits[anchor]
            ):
                continue
            # Each slot's own rules do not depend on the other slots: filter them
            # first, then try every combination of what is left.
            options = [
                [i for i in range(n) if self.slot_ok(g, d, i, anchor, pp)] for g, d, pp in slots
            ]
            for a in itertools.product(*options):
                traits = set().union(*(self.traits[a[k]] for k in unsuffixed))
                if unsuffixed and not all(c & traits for c in collective):
                    continue
                load: dict[tuple[int, str], int] = {}
                for k, (_, d, _) in enumerate(slots):
                    for rc, amount in d.items():
                        load[a[k], rc] = load.get((a[k], rc), 0) + amount
                if any(
                    total > min(self.inventory(i, rc)[0], self.inventory(i, rc)[1])  # type: ignore[index]
                    for (i, rc), total in load.items()
                ):
                    continue
                suffixed = [a[k] for k, (g, _, _) in enumerate(slots) if g.suffix]
                if req.isolate and len(set(suffixed)) != len(suffixed):
                    continue
                if not all(self.same_subtree(req, slots, a, ss) for ss in req.same_subtrees):
                    continue
                out.setdefault(a, set()).add(anchor)
        return out

    def same_subtree(
        self, req: Request, slots: list[Any], a: tuple[int, ...], ss: list[str]
    ) -> bool:
        chosen = {a[k] for k, (g, _, _) in enumerate(slots) if g.suffix in ss}
        return any(all(t in self.ancestors(q) for q in chosen) for t in chosen)

    def render(self, req: Request, a: tuple[int, ...]) -> str:
        slots: list[tuple[str, dict[str, int]]] = []
        for g in req.groups:
            if g.suffix or not g.resources:
                slots.append((g.suffix, dict(g.resources)))
            else:
                slots += [(g.suffix, {rc: n}) for rc, n in g.resources.items()]
        allocations: dict[str, dict[str, int]] = {}
        mappings: dict[str, list[str]] = {}
        for (suffix, demands), i in zip(slots, a, strict=True):
            for rc, n in demands.items():
                held = allocations.setdefault(self.uuid[i], {})
                held[rc] = held.get(rc, 0) + n
            if self.uuid[i] not in mappings.setdefault(suffix, []):
                mappings[suffix].append(self.uuid[i])
        return canon(allocations, mappings)


@comparison(100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_the_engine_returns_exactly_the_valid_candidates(data: st.DataObject) -> None:
    providers = data.draw(forests())
    req = data.draw(requests(len(providers)))
    cs = find(providers, req.render())
    brute = Brute(providers)
    valid = brute.candidates(req)
    expected = sorted(brute.render(req, a) for a in valid)
    assert got(cs) == expected, req.render()
    # Each candidate is anchored where it is valid, at a tree it touches when it can be.
    by_key = {brute.render(req, a): anchors for a, anchors in valid.items()}
    for request, anchor in zip(cs.requests, cs.anchors, strict=True):
        key = canon(
            {p: a["resources"] for p, a in request["allocations"].items()}, request["mappings"]
        )
        anchors = by_key[key]
        assert brute.idx[anchor] in anchors
        touched = {brute.root(brute.idx[u]) for ps in request["mappings"].values() for u in ps}
        if anchors & touched:
            assert brute.idx[anchor] in touched
        assert request["account"] == anchor


@comparison(50, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_limited_answer_is_the_first_candidates_of_the_full_answer(data: st.DataObject) -> None:
    providers = data.draw(forests())
    req = data.draw(requests(len(providers)))
    full = find(providers, req.render())
    limit = data.draw(st.integers(1, 5))
    cut = find(providers, req.render() + f"&limit={limit}")

    def dump(rs: Any) -> list[str]:
        return [
            json.dumps({k: r[k] for k in ("allocations", "mappings")}, sort_keys=True) for r in rs
        ]

    assert dump(cut.requests) == dump(full.requests[:limit])
    assert set(cut.provider_summaries) <= set(full.provider_summaries)
