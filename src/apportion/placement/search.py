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
        checked = _contested(plan)
        collective = bool(plan.collective and plan.unsuffixed)
        bound = _bound(plan, checked, collective)
        order = tuple([k for k in range(n) if bound[k]] + [k for k in range(n) if not bound[k]])
        rank = {k: i for i, k in enumerate(order)}
        unsuffixed = tuple(sorted(rank[k] for k in plan.unsuffixed))
        return cls(
            order=order,
            bound_count=sum(bound),
            checked=tuple(checked[k] for k in order),
            isolated=frozenset(rank[k] for k in plan.isolated),
            subtrees=_subtrees_per_position(plan, rank, n),
            subtree_count=len(plan.subtrees),
            unsuffixed=unsuffixed,
            collective_at=unsuffixed[-1] if collective else -1,
        )


def _contested(plan: SlotPlan) -> list[tuple[tuple[str, int], ...]]:
    """Per slot: its (class, amount) demands that another slot demands too."""
    demanders: dict[str, int] = {}
    for slot in plan.slots:
        for rc, _ in slot.demands:
            demanders[rc] = demanders.get(rc, 0) + 1
    return [tuple(d for d in slot.demands if demanders[d[0]] > 1) for slot in plan.slots]


def _bound(
    plan: SlotPlan, checked: list[tuple[tuple[str, int], ...]], collective: bool
) -> list[bool]:
    """Per slot: whether its choice interacts with another slot's (the search binds it)."""
    in_subtree = {k for members in plan.subtrees for k in members}
    return [
        bool(checked[k])
        or k in in_subtree
        or k in plan.isolated
        or (collective and k in plan.unsuffixed)
        for k in range(len(plan.slots))
    ]


def _subtrees_per_position(
    plan: SlotPlan, rank: dict[int, int], n: int
) -> tuple[tuple[tuple[int, bool, tuple[int, ...]], ...], ...]:
    """Per position: (same_subtree index, is its first position, its later positions)."""
    per_position: list[list[tuple[int, bool, tuple[int, ...]]]] = [[] for _ in range(n)]
    for j, members in enumerate(plan.subtrees):
        ranked = sorted(rank[k] for k in members)
        for at, i in enumerate(ranked):
            per_position[i].append((j, at == 0, tuple(ranked[at + 1 :])))
    return tuple(tuple(x) for x in per_position)


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

    def headroom(self, provider: int, rc: str) -> int:
        key = (provider, rc)
        room = self.room.get(key)
        if room is None:
            room = self.room[key] = self.forest.inventories[rc].headroom(provider)
        return room

    def _search(self, choices: list[tuple[int, ...]]) -> Iterator[Assignment]:
        """Depth-first over the bound positions, with an explicit stack."""
        walk = _Walk(self, choices)
        chosen, budget, restore = walk.chosen, self.budget, self.restore
        bound = self.spec.bound_count
        tail = choices[bound:]
        pos = [-1] * bound
        k = 0
        budget.spend(len(choices[0]))
        while k >= 0:
            if chosen[k] >= 0:
                walk.unplace(k)
            options = choices[k]
            i = pos[k] + 1
            while i < len(options) and not walk.place(k, options[i]):
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


class _Walk:
    """The state of one anchor's depth-first search: what the chosen providers hold.

    ``place`` takes a provider at a position only if the partial assignment can
    still be completed (capacity, isolate, same_subtree, the unsuffixed group's
    traits); ``unplace`` undoes it exactly.
    """

    __slots__ = (
        "choices",
        "chosen",
        "forest",
        "load",
        "saved",
        "searcher",
        "sets",
        "spec",
        "taken",
        "top",
        "top_chosen",
    )

    def __init__(self, searcher: Searcher, choices: list[tuple[int, ...]]) -> None:
        self.searcher = searcher
        self.spec = spec = searcher.spec
        self.forest = searcher.forest
        self.choices = choices
        self.load: dict[tuple[int, str], int] = {}
        self.taken: set[int] = set()
        # per same_subtree: the highest provider chosen so far (the lowest common
        # ancestor of its choices), and whether it is itself one of the choices
        self.top = [-1] * spec.subtree_count
        self.top_chosen = [False] * spec.subtree_count
        self.saved: list[list[tuple[int, int, bool]]] = [[] for _ in range(spec.bound_count)]
        # position -> its options as a set, built when first needed
        self.sets: dict[int, frozenset[int]] = {}
        self.chosen = [-1] * spec.bound_count

    def place(self, k: int, p: int) -> bool:
        """Take ``p`` at position ``k`` if the assignment stays completable."""
        spec = self.spec
        if k in spec.isolated and p in self.taken:
            return False
        if spec.checked[k] and not self._load(k, p):
            return False
        ok = self._same_subtrees(k, p) if spec.subtrees[k] else True
        if ok and k == spec.collective_at:
            ok = self._collective(k, p)
        if not ok:
            self._release(k, p)
            return False
        if k in spec.isolated:
            self.taken.add(p)
        self.chosen[k] = p
        return True

    def unplace(self, k: int) -> None:
        p = self.chosen[k]
        self._release(k, p)
        if k in self.spec.isolated:
            self.taken.discard(p)
        self.chosen[k] = -1

    def _release(self, k: int, p: int) -> None:
        """Give back what ``place(k, p)`` took: load and same_subtree tops."""
        load = self.load
        for rc, amount in self.spec.checked[k]:
            load[p, rc] -= amount
        saved, top, top_chosen = self.saved[k], self.top, self.top_chosen
        for j, t, c in reversed(saved):
            top[j], top_chosen[j] = t, c
        saved.clear()

    def _load(self, k: int, p: int) -> bool:
        """Add position ``k``'s competing amounts on ``p``, if they stay within its room."""
        load, checked = self.load, self.spec.checked[k]
        for done, (rc, amount) in enumerate(checked):
            key = (p, rc)
            total = load.get(key, 0) + amount
            if total > self.searcher.headroom(p, rc):
                for rc2, amount2 in checked[:done]:
                    load[p, rc2] -= amount2
                return False
            load[key] = total
        return True

    def _same_subtrees(self, k: int, p: int) -> bool:
        """Update the tops of ``k``'s same_subtrees with ``p``; False if one is broken."""
        top, top_chosen, undo = self.top, self.top_chosen, self.saved[k]
        undo.clear()
        for j, first, later in self.spec.subtrees[k]:
            undo.append((j, top[j], top_chosen[j]))
            if first:
                top[j], top_chosen[j] = p, True
                continue
            high = self.forest.lowest_common_ancestor(top[j], p)
            if high < 0:
                return False
            if high == p:
                top_chosen[j] = True
            elif high != top[j]:
                top_chosen[j] = False
            top[j] = high
            if not top_chosen[j] and not self._reachable(high, later):
                return False
        return True

    def _reachable(self, high: int, later: tuple[int, ...]) -> bool:
        """Can a later position still take ``high`` or one of its ancestors?"""
        if not later:
            return False
        above = self.forest.ancestors_or_self(high)
        for m in later:
            options = self.sets.get(m)
            if options is None:
                options = self.sets[m] = frozenset(self.choices[m])
            if not options.isdisjoint(above):
                return True
        return False

    def _collective(self, k: int, p: int) -> bool:
        """Do the unsuffixed group's providers, ``p`` at ``k``, cover its required traits?"""
        traits, chosen = self.forest.traits, self.chosen
        have: set[str] = set()
        for m in self.spec.unsuffixed:
            have |= traits[p if m == k else chosen[m]]
        return all(clause & have for clause in self.searcher.plan.collective)


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
