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
* A mapping's provider list is a set, written sorted by provider uuid, so the
  same job always gives the same bytes.

Identity of a candidate: its allocations and mappings. Two anchors can only
produce the same one when every provider in it is a sharing provider; it is
kept once, anchored at a tree it touches when one of those produced it.

The candidates are kept compact (:class:`~apportion.placement.shapes.Found`)
until the answer is built (:mod:`build`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apportion.contracts.launch import AllocationRequest, LaunchSelectJob, ProviderSummary
from apportion.placement.build import Builder
from apportion.placement.model import Forest, build_forest
from apportion.placement.pricing import candidate_costs
from apportion.placement.product import product_candidates
from apportion.placement.query import ParsedRequest, parse_request
from apportion.placement.search import (
    Assignment,
    Budget,
    Searcher,
    SearchExhausted,
    SearchSpec,
    round_robin,
)
from apportion.placement.shapes import Found
from apportion.placement.slots import SlotPlan, plan_slots
from apportion.placement.summaries import provider_summaries

if TYPE_CHECKING:
    from apportion.context import Context

# How many unusable inventories the result lists by name (the count is always given).
SHOWN_UNUSABLE = 20


@dataclass(frozen=True, slots=True)
class CandidateSet:
    """The allocation candidates of one job, with what selection needs about them.

    Candidates are kept as ``found``: (anchoring root, assignment) pairs, one per
    candidate in answer order. The wire objects are built from them once
    (:meth:`build`), with the selection fields when there is a selection.
    ``requests[i]`` is anchored at the tree rooted at ``anchors[i]`` and belongs
    to that root's account (``accounts[i]``).
    """

    found: Found
    provider_summaries: dict[str, ProviderSummary]
    # The global cap (limits.max_candidates) cut the answer short.
    capped: bool
    max_candidates: int
    forest: Forest = field(repr=False, compare=False)
    # The search step budget ran out: there may be candidates not returned.
    search_exhausted: bool = False
    limit: int | None = None
    # The resource classes the request asks for.
    requested: frozenset[str] = frozenset()
    builder: Builder | None = field(default=None, repr=False, compare=False)

    @property
    def requests(self) -> list[AllocationRequest]:
        """The candidates as wire objects, without selection fields (built on each call)."""
        return self.build()

    @property
    def anchors(self) -> list[str]:
        """The uuid of each candidate's anchoring root."""
        uuids = self.forest.uuids
        return [uuids[anchor] for anchor in self.found.anchors.tolist()]

    @property
    def accounts(self) -> list[str]:
        """The account of each candidate: the account of its anchoring root."""
        accounts = self.forest.accounts
        return [accounts[anchor] for anchor in self.found.anchors.tolist()]

    def resource_classes(self) -> list[str]:
        """The resource classes every candidate allocates (sorted).

        Every candidate allocates every class of the request (amounts are ≥ 1).
        """
        if self.builder is None:
            return []
        return sorted({rc for demands in self.builder.demands for rc, _ in demands})

    def build(
        self,
        per_account: Mapping[str, tuple[int | None, float]] | None = None,
        costs: Sequence[float] | None = None,
    ) -> list[AllocationRequest]:
        """The candidates as wire objects, in answer order.

        With ``per_account`` (account → its priority group and each of its
        candidates' probability) and ``costs`` (one per candidate), the selection
        fields are filled in; without, they are null.
        """
        if self.builder is None:
            return []
        if per_account is None or costs is None:
            return self.builder.build(self.found)
        return self.builder.build(self.found, per_account, costs)

    def account_of(self, provider_uuid: str) -> str:
        """The account of any provider of the job (its own, else its root's, else the root uuid)."""
        return self.forest.accounts[self.forest.index[provider_uuid]]

    @property
    def provider_accounts(self) -> Mapping[str, str]:
        """provider uuid → account, for every provider of the job."""
        return dict(zip(self.forest.uuids, self.forest.accounts, strict=True))

    def costs(self, base: Mapping[str, float]) -> list[float]:
        """cost_per_hour of each candidate: its account's (``base``, 0.0 if absent)
        plus Σ amount × unit price over its priced providers, added in allocation
        order exactly as ``selection.facts.request_costs`` walks a built candidate.
        Not clamped.
        """
        totals = [base.get(account, 0.0) for account in self.accounts]
        if self.builder is None:
            return totals
        return candidate_costs(
            self.found, totals, self.forest.prices, self.forest.size, self.builder.gives
        )

    def extra(self) -> dict[str, Any]:
        """What the result's ``extra`` reports: how the answer was cut, what fits nothing."""
        out: dict[str, Any] = {"capped": self.capped, "max_candidates": self.max_candidates}
        if self.search_exhausted:
            out["search_exhausted"] = True
        unusable = self.forest.unusable
        if unusable:
            uuids = self.forest.uuids
            out["unusable_inventories"] = [
                {
                    "provider": uuids[u.provider],
                    "resource_class": u.resource_class,
                    "reason": u.reason,
                }
                for u in unusable[:SHOWN_UNUSABLE]
            ]
            out["unusable_inventory_count"] = len(unusable)
        return out


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


def _search(forest: Forest, plan: SlotPlan, want: int, budget: Budget) -> tuple[Found, bool]:
    """Up to ``want`` candidates, and whether the step budget ran out: computed as
    arrays where that is exact (:mod:`product`), else searched."""
    found = product_candidates(forest, plan, SearchSpec.of(plan), want, budget)
    if found is not None:
        return found, False
    pairs, exhausted = _collect(forest, plan, want, budget)
    return Found.of(pairs, len(plan.slots)), exhausted


def find_candidates(job: LaunchSelectJob, ctx: Context) -> CandidateSet:
    """Every allocation candidate of ``job`` (up to ``limit`` and the global cap).

    Raises :class:`~apportion.errors.Rejected` for invalid providers or query; an
    empty answer is an empty ``requests`` list, not an error.
    """
    limits = ctx.limits
    forest = build_forest(job.providers, limits)
    request = parse_request(job.request, limits)
    return candidates_for(forest, request, limits.max_candidates, limits.max_candidate_search_steps)


def candidates_for(
    forest: Forest, request: ParsedRequest, max_candidates: int, max_steps: int
) -> CandidateSet:
    """The candidates of an already parsed request over an already built forest."""
    plan = plan_slots(forest, request)
    requested = frozenset(rc for g in request.groups for rc, _ in g.resources)
    if plan is None or not plan.anchors:
        return CandidateSet(
            found=Found.of([], len(plan.slots) if plan is not None else 1),
            provider_summaries={},
            capped=False,
            max_candidates=max_candidates,
            limit=request.limit,
            requested=requested,
            forest=forest,
        )
    limit = request.limit
    # One more than the cap, to tell "exactly the cap" from "cut at the cap".
    want = limit if limit is not None and limit <= max_candidates else max_candidates + 1
    found, exhausted = _search(forest, plan, want, Budget(max_steps))
    capped = len(found) > max_candidates
    if capped:
        found = found[:max_candidates]
    return CandidateSet(
        found=found,
        provider_summaries=provider_summaries(forest, found.providers()),
        capped=capped,
        max_candidates=max_candidates,
        search_exhausted=exhausted,
        limit=limit,
        requested=requested,
        forest=forest,
        builder=Builder(forest, plan),
    )
