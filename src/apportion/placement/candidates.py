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

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from apportion.contracts.launch import (
    AllocationRequest,
    LaunchSelectJob,
    ProviderAllocation,
    ProviderSummary,
    cyclic_gc_paused,
    trusted,
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

    Candidates are kept as ``found``: (anchoring root, assignment) pairs, one per
    candidate in answer order. The wire objects are built from them on demand,
    once (:meth:`build`), so that selection can add its fields without building
    every ``AllocationRequest`` twice. ``requests[i]`` is anchored at the tree
    rooted at ``anchors[i]`` and belongs to that root's account (``accounts[i]``).
    """

    found: Sequence[tuple[int, Assignment]]
    provider_summaries: dict[str, ProviderSummary]
    # The global cap (limits.max_candidates) cut the answer short.
    capped: bool
    max_candidates: int
    # The search step budget ran out: there may be candidates not returned.
    search_exhausted: bool = False
    limit: int | None = None
    forest: Forest | None = field(default=None, repr=False, compare=False)
    builder: _Builder | None = field(default=None, repr=False, compare=False)

    @property
    def requests(self) -> list[AllocationRequest]:
        """The candidates as wire objects, without selection fields (built on each call)."""
        return self.build()

    @property
    def anchors(self) -> list[str]:
        """The uuid of each candidate's anchoring root."""
        if self.forest is None:
            return []
        uuids = self.forest.uuids
        return [uuids[anchor] for anchor, _ in self.found]

    @property
    def accounts(self) -> list[str]:
        """The account of each candidate: the account of its anchoring root."""
        if self.forest is None:
            return []
        accounts = self.forest.accounts
        return [accounts[anchor] for anchor, _ in self.found]

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
        return self.builder.build(self.found, per_account, costs)

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
        if self.forest is None or self.builder is None:
            return None
        total, priced = 0.0, False
        for p, resources in self.builder.allocated(self.found[index][1]):
            prices = self.forest.prices.get(p)
            if not prices:
                continue
            for rc, amount in resources.items():
                if rc in prices:
                    total += amount * prices[rc]
                    priced = True
        return total if priced else None

    def costs(self, base: Mapping[str, float]) -> list[float]:
        """cost_per_hour of each candidate: its account's (``base``, 0.0 if absent)
        plus Σ amount × unit price over its priced providers.

        Added one by one in allocation order, a class the provider has no price for
        adding 0.0, exactly as ``selection.facts.request_costs`` walks a built
        candidate, so both give the same floats. Not clamped.
        """
        if self.builder is None:
            return []
        return self.builder.costs(self.found, base)

    def extra(self) -> dict[str, Any]:
        """What the result's ``extra`` reports about how the answer was cut."""
        out: dict[str, Any] = {"capped": self.capped, "max_candidates": self.max_candidates}
        if self.search_exhausted:
            out["search_exhausted"] = True
        return out


# The fields set of every AllocationRequest built here, shared (see trusted()).
_PLAIN_FIELDS = {"allocations", "mappings", "account"}
_ALL_FIELDS = set(AllocationRequest.model_fields)
_RESOURCES = {"resources"}


Demands = tuple[tuple[str, int], ...]
_SECOND = itemgetter(1)
Picker = Callable[[Sequence[Any]], tuple[Any, ...]]


def _picker(indices: Sequence[int]) -> Picker:
    """A function taking the items at ``indices`` of a sequence, as a tuple."""
    if not indices:
        return lambda _: ()
    if len(indices) == 1:
        k = indices[0]
        return lambda items: (items[k],)
    return itemgetter(*indices)


@dataclass(frozen=True, slots=True)
class _Shape:
    """How the candidates whose slots share providers the same way are built.

    The shape of an assignment is, per slot, the first slot holding the same
    provider (``tuple(map(assignment.index, assignment))``): a candidate with
    three unsuffixed slots on one NUMA node and a sharing disk has the shape
    (0, 0, 2). Everything but the provider names follows from the shape, so it
    is worked out once per shape rather than once per candidate.
    """

    # per allocated provider (by its first slot), in allocation order: its
    # position in the assignment and its shared ProviderAllocation
    givers: Picker
    allocations: tuple[ProviderAllocation, ...]
    # providers of the unsuffixed group's mapping, without repeats, in slot order
    unsuffixed: Picker | None
    # per allocated provider, in allocation order: its first slot and what it gives
    # (class, summed amount), for pricing
    gives: tuple[tuple[int, tuple[tuple[str, int], ...]], ...]


class _Builder:
    """Turns assignments into AllocationRequest objects, sharing immutable parts."""

    def __init__(self, forest: Forest, plan: SlotPlan) -> None:
        self.forest = forest
        self.uuids = forest.uuids
        self.accounts = forest.accounts
        # One ProviderAllocation per distinct (class, amount) list: frozen, so shared.
        self.allocations: dict[Demands, ProviderAllocation] = {}
        self.demands = [s.demands for s in plan.slots]
        self.unsuffixed = [k for k, s in enumerate(plan.slots) if not s.suffix]
        self.suffixed = [(k, s.suffix) for k, s in enumerate(plan.slots) if s.suffix]
        self.shapes: dict[tuple[int, ...], _Shape] = {}

    def _allocation(self, demands: Demands) -> ProviderAllocation:
        pa = self.allocations.get(demands)
        if pa is None:
            resources: dict[str, int] = {}
            for rc, amount in demands:
                resources[rc] = resources.get(rc, 0) + amount
            pa = self.allocations[demands] = trusted(
                ProviderAllocation, {"resources": resources}, _RESOURCES
            )
        return pa

    def _shape(self, assignment: Assignment) -> _Shape:
        key = tuple(map(assignment.index, assignment))
        shape = self.shapes.get(key)
        if shape is None:
            # Amounts of several slots on one provider add up in one allocation
            # (placed where the first of those slots is), in slot order.
            merged: dict[int, Demands] = {}
            for first, demands in zip(key, self.demands):  # noqa: B905 (equal lengths)
                if demands:
                    merged[first] = merged.get(first, ()) + demands
            mapped = tuple(dict.fromkeys(key[k] for k in self.unsuffixed))
            allocations = tuple(self._allocation(d) for d in merged.values())
            shape = self.shapes[key] = _Shape(
                givers=_picker(tuple(merged)),
                allocations=allocations,
                unsuffixed=_picker(mapped) if self.unsuffixed else None,
                gives=tuple(
                    (k, tuple(pa.resources.items()))
                    for k, pa in zip(merged, allocations, strict=True)
                ),
            )
        return shape

    def allocated(self, assignment: Assignment) -> list[tuple[int, dict[str, int]]]:
        """(provider, class → amount) of ``assignment``, in allocation order."""
        shape = self._shape(assignment)
        return [
            (p, pa.resources)
            for p, pa in zip(shape.givers(assignment), shape.allocations, strict=True)
        ]

    def build(
        self,
        found: Sequence[tuple[int, Assignment]],
        per_account: Mapping[str, tuple[int | None, float]] | None,
        costs: Sequence[float] | None,
    ) -> list[AllocationRequest]:
        uuid_of, accounts = self.uuids.__getitem__, self.accounts
        shapes, shape_of, suffixed = self.shapes, self._shape, self.suffixed
        # The values are the engine's own (uuids of the job, amounts of the parsed
        # request, accounts of the forest): built as they are, not re-validated.
        annotated = per_account is not None and costs is not None
        fields = _ALL_FIELDS if annotated else _PLAIN_FIELDS
        groups: Mapping[str, tuple[int | None, float]] = per_account or {}
        cost_of: Sequence[float] = costs or ()
        group: int | None = None
        probability: float | None = None
        cost: float | None = None
        out: list[AllocationRequest] = []
        append = out.append
        for i, (anchor, assignment) in enumerate(found):
            shape = shapes.get(tuple(map(assignment.index, assignment))) or shape_of(assignment)
            names = tuple(map(uuid_of, assignment))
            mappings: dict[str, list[str]] = {}
            if shape.unsuffixed is not None:
                mappings[""] = list(shape.unsuffixed(names))
            for k, suffix in suffixed:
                mappings[suffix] = [names[k]]
            account = accounts[anchor]
            if annotated:
                group, probability = groups[account]
                cost = cost_of[i]
            values = {
                "allocations": dict(zip(shape.givers(names), shape.allocations)),  # noqa: B905
                "mappings": mappings,
                "account": account,
                "priority_group": group,
                "probability": probability,
                "cost_per_hour": cost,
            }
            append(trusted(AllocationRequest, values, fields))
        return out

    def costs(
        self, found: Sequence[tuple[int, Assignment]], base: Mapping[str, float]
    ) -> list[float]:
        accounts, prices = self.accounts, self.forest.prices
        totals = [base.get(accounts[anchor], 0.0) for anchor, _ in found]
        if not prices or not found:
            return totals
        # Candidates of one shape price the same (slot, class, amount) list, only on
        # other providers: per shape, each term is one numpy operation over all its
        # candidates instead of a Python loop per candidate (bench/selection.md).
        # Every candidate still gets its terms added one by one in the same order as
        # the plain walk (request_costs), each a float64 multiply and add, so the
        # floats are identical; a provider with no prices at all adds nothing (not
        # even 0.0, which would turn a -0.0 base into 0.0), as in the walk.
        # The providers of every candidate, one row each, and each row's shape: per
        # slot, the first slot holding the same provider (see _Shape).
        slots = len(found[0][1])
        assigned = np.fromiter(
            chain.from_iterable(map(_SECOND, found)), dtype=np.intp, count=len(found) * slots
        ).reshape(len(found), slots)
        first = np.empty_like(assigned)
        for j in range(slots):
            first[:, j] = j
            for i in range(j - 1, -1, -1):  # ends at the smallest such slot
                first[assigned[:, i] == assigned[:, j], j] = i
        if slots == 1:  # one shape: (0,)
            codes, shape_of = np.zeros(1, dtype=np.int64), np.zeros(len(found), dtype=np.intp)
        elif slots**slots < 2**62:  # the shape as one number in base ``slots``: fast unique
            code = np.zeros(len(found), dtype=np.int64)
            for j in range(slots):
                code = code * slots + first[:, j]
            codes, shape_of = np.unique(code, return_inverse=True)
        else:  # 16 slots or more: rows compared whole (slower, exact)
            codes, shape_of = np.unique(first, axis=0, return_inverse=True)
            shape_of = shape_of.reshape(-1)
        total = np.array(totals, dtype=np.float64)
        # One index array for every assignment below (a list would be converted each time).
        priced_providers = np.fromiter(prices, dtype=np.intp, count=len(prices))
        priced = np.zeros(len(self.uuids), dtype=bool)
        priced[priced_providers] = True
        columns: dict[str, npt.NDArray[np.float64]] = {}

        def column(rc: str) -> npt.NDArray[np.float64]:
            col = columns.get(rc)
            if col is None:
                col = columns[rc] = np.zeros(len(self.uuids), dtype=np.float64)
                col[priced_providers] = [unit.get(rc, 0.0) for unit in prices.values()]
            return col

        for u in range(len(codes)):
            at = np.flatnonzero(shape_of == u) if len(codes) > 1 else np.arange(len(found))
            example = found[int(at[0])][1]
            shape = self.shapes.get(tuple(map(example.index, example))) or self._shape(example)
            for k, gives in shape.gives:
                providers = assigned[at, k]
                has = priced[providers]
                if not has.any():
                    continue
                where, providers = at[has], providers[has]
                with np.errstate(over="ignore", invalid="ignore"):  # inf, as floats do
                    for rc, amount in gives:
                        total[where] += np.float64(amount) * column(rc)[providers]
        return cast(list[float], total.tolist())


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
    with cyclic_gc_paused():
        forest = build_forest(job.providers, limits)
        request = parse_request(job.request, limits)
        return candidates_for(
            forest, request, limits.max_candidates, limits.max_candidate_search_steps
        )


def candidates_for(
    forest: Forest, request: ParsedRequest, max_candidates: int, max_steps: int
) -> CandidateSet:
    """The candidates of an already parsed request over an already built forest."""
    plan = plan_slots(forest, request)
    empty = CandidateSet(
        found=[],
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
    touched = {p for _, assignment in found for p in assignment}
    return CandidateSet(
        found=found,
        provider_summaries=provider_summaries(forest, touched),
        capped=capped,
        max_candidates=max_candidates,
        search_exhausted=exhausted,
        limit=limit,
        forest=forest,
        builder=_Builder(forest, plan),
    )
