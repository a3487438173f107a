"""``find_candidates``: the allocation candidates of a launch_select job.

Pipeline: check and index the providers (:mod:`model`), parse the query
(:mod:`query`), turn groups into slots with eligible providers per tree
(:mod:`slots`), search each anchoring tree and interleave them breadth-first
(:mod:`search`), then build the wire objects.

Where this differs from OpenStack Placement on purpose:

* Every anchoring tree yields its candidates, also when the unsuffixed group
  gets a resource only from a sharing provider (Placement de-duplicates the
  unsuffixed group's requests ignoring their anchor and loses candidates).
* Amounts always add up to exactly what was requested; summed amounts on one
  provider are re-checked against free capacity and max_unit.
* A resourceless group with only ``in_tree`` matches the providers of that tree.
* Candidates that differ only in their mappings are separate entries.

Identity of a candidate: its allocations and mappings. Two anchors can only
produce the same one when every provider in it is a sharing provider; it is
kept once, anchored at a tree it touches when one of those produced it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apportion.contracts.launch import (
    AllocationRequest,
    LaunchSelectJob,
    ProviderAllocation,
    ProviderSummary,
)
from apportion.placement.model import Forest, build_forest
from apportion.placement.query import ParsedRequest, parse_request
from apportion.placement.search import (
    Assignment,
    Budget,
    Searcher,
    SearchExhausted,
    round_robin,
)
from apportion.placement.slots import SlotPlan, plan_slots
from apportion.placement.summaries import provider_summaries

if TYPE_CHECKING:
    from apportion.engine import Context


@dataclass(frozen=True, slots=True)
class CandidateSet:
    """The allocation candidates of one job, with what selection needs about them.

    ``requests[i]`` is anchored at the tree rooted at ``anchors[i]`` and belongs to
    that root's account (already filled in ``requests[i].account``). The lists are
    not to be mutated.
    """

    requests: list[AllocationRequest]
    anchors: list[str]
    provider_summaries: dict[str, ProviderSummary]
    # The global cap (limits.max_candidates) cut the answer short.
    capped: bool
    max_candidates: int
    # The search step budget ran out: there may be candidates not returned.
    search_exhausted: bool = False
    limit: int | None = None
    forest: Forest | None = field(default=None, repr=False, compare=False)

    def account_of(self, provider_uuid: str) -> str:
        """The account of any provider of the job (its own, else its root's, else the root uuid)."""
        if self.forest is None:
            raise KeyError(provider_uuid)
        return self.forest.accounts[self.forest.index[provider_uuid]]

    @property
    def provider_accounts(self) -> Mapping[str, str]:
        """provider uuid → account, for every provider of the job."""
        if self.forest is None:
            return {}
        return dict(zip(self.forest.uuids, self.forest.accounts, strict=True))

    def price_per_hour(self, index: int) -> float | None:
        """Σ amount × the provider's price for that class, over candidate ``index``.

        ``None`` when no allocated provider states a price for what it gives.
        """
        if self.forest is None:
            return None
        total, priced = 0.0, False
        for uuid, alloc in self.requests[index].allocations.items():
            prices = self.forest.providers[self.forest.index[uuid]].prices
            if not prices:
                continue
            for rc, amount in alloc.resources.items():
                if rc in prices:
                    total += amount * prices[rc]
                    priced = True
        return total if priced else None

    def extra(self) -> dict[str, Any]:
        """What the result's ``extra`` reports about how the answer was cut."""
        out: dict[str, Any] = {"capped": self.capped, "max_candidates": self.max_candidates}
        if self.search_exhausted:
            out["search_exhausted"] = True
        return out


class _Builder:
    """Turns assignments into AllocationRequest objects, sharing immutable parts."""

    def __init__(self, forest: Forest, plan: SlotPlan) -> None:
        self.uuids = forest.uuids
        self.accounts = forest.accounts
        # One ProviderAllocation per distinct (class, amount) list: frozen, so shared.
        self.allocations: dict[tuple[tuple[str, int], ...], ProviderAllocation] = {}
        self.demands = [s.demands for s in plan.slots]
        self.size = len(plan.slots)
        # Slots that allocate something, with their allocation when alone on a provider.
        self.giving = [
            (k, self._allocation(s.demands)) for k, s in enumerate(plan.slots) if s.demands
        ]
        self.unsuffixed = [k for k, s in enumerate(plan.slots) if not s.suffix]
        self.suffixed = [(k, s.suffix) for k, s in enumerate(plan.slots) if s.suffix]

    def _allocation(self, demands: tuple[tuple[str, int], ...]) -> ProviderAllocation:
        pa = self.allocations.get(demands)
        if pa is None:
            resources: dict[str, int] = {}
            for rc, amount in demands:
                resources[rc] = resources.get(rc, 0) + amount
            pa = self.allocations[demands] = ProviderAllocation(resources=resources)
        return pa

    def request(self, anchor: int, assignment: Assignment) -> AllocationRequest:
        uuids, cache = self.uuids, self.allocations
        merged: dict[int, tuple[tuple[str, int], ...]] = {}
        for p, demands in zip(assignment, self.demands):  # noqa: B905 (equal lengths)
            if demands:
                before = merged.get(p)
                merged[p] = demands if before is None else before + demands
        allocations: dict[str, ProviderAllocation] = {}
        for p, demands in merged.items():
            allocations[uuids[p]] = cache.get(demands) or self._allocation(demands)
        mappings: dict[str, list[str]] = {}
        if self.unsuffixed:
            mappings[""] = list(dict.fromkeys([uuids[assignment[k]] for k in self.unsuffixed]))
        for k, suffix in self.suffixed:
            mappings[suffix] = [uuids[assignment[k]]]
        return AllocationRequest(
            allocations=allocations, mappings=mappings, account=self.accounts[anchor]
        )


def _streams(
    forest: Forest, plan: SlotPlan, budget: Budget
) -> Iterator[tuple[int, Iterator[Assignment]]]:
    searcher = Searcher(forest, plan, budget)
    for anchor in plan.anchors:
        yield anchor, searcher.candidates(anchor)


def _collect(
    forest: Forest, plan: SlotPlan, want: int, budget: Budget
) -> tuple[list[tuple[int, Assignment]], bool]:
    """Up to ``want`` distinct candidates, breadth-first over anchors; and whether
    the step budget ran out."""
    found: list[tuple[int, Assignment]] = []
    # Only candidates made entirely of sharing providers can come from two anchors.
    sharing = forest.sharing
    seen: dict[Assignment, int] = {}
    roots = forest.roots
    try:
        for anchor, assignment in round_robin(_streams(forest, plan, budget)):
            if sharing and assignment[0] in sharing and all(p in sharing for p in assignment):
                touches = any(roots[p] == anchor for p in assignment)
                at = seen.get(assignment)
                if at is not None:
                    if touches and all(roots[p] != found[at][0] for p in assignment):
                        found[at] = (anchor, assignment)
                    # Repeats cost search steps: thousands of trees served by the
                    # same storage would otherwise repeat it without bound.
                    budget.spend(1)
                    continue
                seen[assignment] = len(found)
            found.append((anchor, assignment))
            if len(found) >= want:
                break
    except SearchExhausted:
        return found, True
    return found, False


def find_candidates(job: LaunchSelectJob, ctx: Context) -> CandidateSet:
    """Every allocation candidate of ``job`` (up to ``limit`` and the global cap).

    Raises :class:`~apportion.errors.Rejected` for invalid providers or query; an
    empty answer is an empty ``requests`` list, not an error.
    """
    limits = ctx.limits
    with _cyclic_gc_paused():
        forest = build_forest(job.providers, limits)
        request = parse_request(job.request, limits)
        return candidates_for(
            forest, request, limits.max_candidates, limits.max_candidate_search_steps
        )


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while candidates are built.

    The engine creates tens of thousands of small, long-lived, cycle-free objects;
    each automatic full collection meanwhile re-traverses all of them and the job's
    providers, which cost up to a third of the run time (bench/placement.md).
    Reference counting still frees everything; the collector is restored after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def candidates_for(
    forest: Forest, request: ParsedRequest, max_candidates: int, max_steps: int
) -> CandidateSet:
    """The candidates of an already parsed request over an already built forest."""
    plan = plan_slots(forest, request)
    empty = CandidateSet(
        requests=[],
        anchors=[],
        provider_summaries={},
        capped=False,
        max_candidates=max_candidates,
        limit=request.limit,
        forest=forest,
    )
    if plan is None or not plan.anchors:
        return empty
    limit = request.limit
    # One more than the cap, to tell "exactly the cap" from "cut at the cap".
    want = limit if limit is not None and limit <= max_candidates else max_candidates + 1
    found, exhausted = _collect(forest, plan, want, Budget(max_steps))
    capped = len(found) > max_candidates
    if capped:
        found = found[:max_candidates]
    builder = _Builder(forest, plan)
    requests = [builder.request(anchor, assignment) for anchor, assignment in found]
    touched = {p for _, assignment in found for p in assignment}
    return CandidateSet(
        requests=requests,
        anchors=[forest.uuids[anchor] for anchor, _ in found],
        provider_summaries=provider_summaries(forest, touched),
        capped=capped,
        max_candidates=max_candidates,
        search_exhausted=exhausted,
        limit=limit,
        forest=forest,
    )
