"""Enumerate the candidates anchored at one tree, pruning as early as possible.

A candidate is an *assignment*: one provider per slot (see :mod:`slots`). The
search fills slots in order and abandons a partial assignment as soon as it
cannot be completed:

* capacity — amounts of one class landing on one provider are summed and must
  stay within free capacity and max_unit (only classes that several slots
  request need this; each slot's candidates already fit on their own);
* isolate — suffixed slots take distinct providers; before searching, a
  bipartite matching proves there is at least one such assignment at all, so a
  pigeonhole request (7 isolated groups, 6 providers) costs nothing;
* same_subtree — the highest provider chosen so far in a same_subtree (the
  lowest common ancestor of its choices) must be one of the choices, or an
  ancestor that a later slot of the same same_subtree can still take;
* the unsuffixed group's required traits — checked collectively once its last
  resource slot is filled.

Without any of these interactions an anchor's candidates are a plain Cartesian
product. Candidates of many anchors are interleaved breadth-first, so a capped
answer is spread across trees; generation is lazy, so ``limit`` bounds the work.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter

from apportion.placement.model import Forest
from apportion.placement.slots import SlotPlan

Assignment = tuple[int, ...]


class SearchExhausted(Exception):
    """The step budget (limits.max_candidate_search_steps) ran out."""


class Budget:
    """Steps the search may still take; shared by every anchor of one request."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise SearchExhausted


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """The interactions between slots, worked out once per request.

    The search visits *bound* slots (whose choice interacts with another slot)
    first, depth-first; the remaining *free* slots are a Cartesian product
    appended to every partial assignment, so they never multiply the search.
    Everything below is indexed in that visiting order; ``order[i]`` is the
    original slot at position ``i``.
    """

    order: tuple[int, ...]
    bound_count: int
    # per position: the (class, amount) demands that other slots compete for
    checked: tuple[tuple[tuple[str, int], ...], ...]
    isolated: frozenset[int]
    # per position: (same_subtree index, is its first position, its later positions)
    subtrees: tuple[tuple[tuple[int, bool, tuple[int, ...]], ...], ...]
    subtree_count: int
    unsuffixed: tuple[int, ...]
    collective_at: int  # position after which the unsuffixed traits are checked, or -1

    @classmethod
    def of(cls, plan: SlotPlan) -> SearchSpec:
        n = len(plan.slots)
        demanders: dict[str, int] = {}
        for slot in plan.slots:
            for rc, _ in slot.demands:
                demanders[rc] = demanders.get(rc, 0) + 1
        checked = [tuple(d for d in slot.demands if demanders[d[0]] > 1) for slot in plan.slots]
        in_subtree = {k for members in plan.subtrees for k in members}
        collective = bool(plan.collective and plan.unsuffixed)
        bound = [
            bool(checked[k])
            or k in in_subtree
            or k in plan.isolated
            or (collective and k in plan.unsuffixed)
            for k in range(n)
        ]
        order = tuple([k for k in range(n) if bound[k]] + [k for k in range(n) if not bound[k]])
        rank = {k: i for i, k in enumerate(order)}
        per_position: list[list[tuple[int, bool, tuple[int, ...]]]] = [[] for _ in range(n)]
        for j, members in enumerate(plan.subtrees):
            ranked = sorted(rank[k] for k in members)
            for at, i in enumerate(ranked):
                per_position[i].append((j, at == 0, tuple(ranked[at + 1 :])))
        unsuffixed = tuple(sorted(rank[k] for k in plan.unsuffixed))
        return cls(
            order=order,
            bound_count=sum(bound),
            checked=tuple(checked[k] for k in order),
            isolated=frozenset(rank[k] for k in plan.isolated),
            subtrees=tuple(tuple(x) for x in per_position),
            subtree_count=len(plan.subtrees),
            unsuffixed=unsuffixed,
            collective_at=unsuffixed[-1] if collective else -1,
        )


def _matching_exists(choices: Sequence[Sequence[int]]) -> bool:
    """Can every slot take a different provider? (Kuhn's augmenting paths.)"""
    owner: dict[int, int] = {}

    def augment(slot: int, seen: set[int]) -> bool:
        for p in choices[slot]:
            if p in seen:
                continue
            seen.add(p)
            if p not in owner or augment(owner[p], seen):
                owner[p] = slot
                return True
        return False

    return all(augment(k, set()) for k in range(len(choices)))


class Searcher:
    """The candidates of one request, anchor by anchor.

    Built once per request so that each anchor only pays for its own state: with
    a thousand small trees the per-anchor set-up dominates the search itself.
    """

    def __init__(self, forest: Forest, plan: SlotPlan, budget: Budget) -> None:
        self.forest = forest
        self.plan = plan
        self.spec = spec = SearchSpec.of(plan)
        self.budget = budget
        self.room: dict[tuple[int, str], int] = {}
        n = len(plan.slots)
        rank = {k: i for i, k in enumerate(spec.order)}
        back = [rank[k] for k in range(n)]
        if back == list(range(n)):
            self.restore: Callable[[tuple[int, ...]], Assignment] = _same
        elif n == 1:  # itemgetter with one index returns the item itself
            self.restore = _same
        else:
            self.restore = itemgetter(*back)

    def candidates(self, anchor: int) -> Iterator[Assignment]:
        """The assignments anchored at ``anchor``, lazily."""
        spec = self.spec
        choices = [
            slot.members.get(anchor, ()) + slot.shared.get(anchor, ()) for slot in self.plan.slots
        ]
        if not spec.bound_count:
            self.budget.spend(1)
            return itertools.product(*choices)
        ordered = [choices[k] for k in spec.order]
        if spec.isolated and not _matching_exists([ordered[i] for i in sorted(spec.isolated)]):
            return iter(())
        return self._search(ordered)

    def _headroom(self, provider: int, rc: str) -> int:
        key = (provider, rc)
        room = self.room.get(key)
        if room is None:
            room = self.room[key] = self.forest.inventories[rc].headroom(provider)
        return room

    def _search(self, choices: list[tuple[int, ...]]) -> Iterator[Assignment]:
        """Depth-first over the bound positions, with an explicit stack."""
        forest, spec, budget = self.forest, self.spec, self.budget
        checked, isolated, subtrees = spec.checked, spec.isolated, spec.subtrees
        collective_at, collective = spec.collective_at, self.plan.collective
        unsuffixed, traits = spec.unsuffixed, forest.traits
        bound = spec.bound_count
        load: dict[tuple[int, str], int] = {}
        taken: set[int] = set()
        # per same_subtree: the highest provider chosen so far (the lowest common
        # ancestor of its choices), and whether it is itself one of the choices
        top = [-1] * spec.subtree_count
        top_chosen = [False] * spec.subtree_count
        saved: list[list[tuple[int, int, bool]]] = [[] for _ in range(bound)]
        sets: dict[int, frozenset[int]] = {}
        chosen = [-1] * bound
        pos = [-1] * bound

        def reachable(high: int, later: tuple[int, ...]) -> bool:
            """Can a later position still take ``high`` or one of its ancestors?"""
            if not later:
                return False
            above = forest.ancestors_or_self(high)
            for m in later:
                options = sets.get(m)
                if options is None:
                    options = sets[m] = frozenset(choices[m])
                if not options.isdisjoint(above):
                    return True
            return False

        def place(k: int, p: int) -> bool:
            """Take ``p`` at position ``k`` if the assignment stays completable."""
            if k in isolated and p in taken:
                return False
            for done, (rc, amount) in enumerate(checked[k]):
                key = (p, rc)
                total = load.get(key, 0) + amount
                if total > self._headroom(p, rc):
                    for rc2, amount2 in checked[k][:done]:
                        load[p, rc2] -= amount2
                    return False
                load[key] = total
            ok = True
            if subtrees[k]:
                undo = saved[k]
                undo.clear()
                for j, first, later in subtrees[k]:
                    undo.append((j, top[j], top_chosen[j]))
                    if first:
                        top[j], top_chosen[j] = p, True
                        continue
                    high = forest.lowest_common_ancestor(top[j], p)
                    if high < 0:
                        ok = False
                        break
                    if high == p:
                        top_chosen[j] = True
                    elif high != top[j]:
                        top_chosen[j] = False
                    top[j] = high
                    if not top_chosen[j] and not reachable(high, later):
                        ok = False
                        break
            if ok and k == collective_at:
                have: set[str] = set()
                for m in unsuffixed:
                    have |= traits[p if m == k else chosen[m]]
                ok = all(clause & have for clause in collective)
            if not ok:
                for rc, amount in checked[k]:
                    load[p, rc] -= amount
                for j, t, c in reversed(saved[k]):
                    top[j], top_chosen[j] = t, c
                saved[k].clear()
                return False
            if k in isolated:
                taken.add(p)
            chosen[k] = p
            return True

        def unplace(k: int) -> None:
            p = chosen[k]
            for rc, amount in checked[k]:
                load[p, rc] -= amount
            for j, t, c in reversed(saved[k]):
                top[j], top_chosen[j] = t, c
            saved[k].clear()
            if k in isolated:
                taken.discard(p)
            chosen[k] = -1

        restore = self.restore
        tail = choices[bound:]
        k = 0
        budget.spend(len(choices[0]))
        while k >= 0:
            if chosen[k] >= 0:
                unplace(k)
            options = choices[k]
            i = pos[k] + 1
            while i < len(options) and not place(k, options[i]):
                i += 1
            if i == len(options):
                pos[k] = -1
                k -= 1
                continue
            pos[k] = i
            if k < bound - 1:
                k += 1
                budget.spend(len(choices[k]))
            elif tail:
                head = tuple(chosen)
                for rest in itertools.product(*tail):
                    yield restore(head + rest)
            else:
                yield restore(tuple(chosen))


def _same(assignment: tuple[int, ...]) -> Assignment:
    return assignment


def round_robin(
    streams: Iterable[tuple[int, Iterable[Assignment]]],
) -> Iterator[tuple[int, Assignment]]:
    """Interleave the anchors' candidates: one from each in turn (breadth-first).

    The first round pulls anchors lazily, so when the consumer stops early the
    remaining anchors are never searched.
    """
    active: deque[tuple[int, Iterator[Assignment]]] = deque()
    for anchor, stream in streams:
        it = iter(stream)
        first = next(it, None)
        if first is None:
            continue
        yield anchor, first
        active.append((anchor, it))
    while active:
        anchor, it = active.popleft()
        item = next(it, None)
        if item is None:
            continue
        yield anchor, item
        active.append((anchor, it))
