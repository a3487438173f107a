"""Request groups → slots, each with the providers that may fill it (pure set algebra).

A *slot* is one provider choice a candidate makes:

* a suffixed group is one slot (one provider supplies all its resources, or is
  merely mapped when the group is resourceless);
* the unsuffixed group is one slot per resource class (Placement never splits
  one class across providers, but different classes may come from different
  providers of the tree or from sharing providers), or a single slot when it
  has no resources.

A candidate is *anchored* at a tree T: every provider it uses is either in T
(a *member* use) or a sharing provider that serves T (a *shared* use: it has the
trait MISC_SHARES_VIA_AGGREGATE and shares an aggregate with some provider of
T). Filters that Placement applies differently to the two uses are computed as
two masks per slot:

* unsuffixed ``member_of``: a member passes when it *or its root* is in the
  aggregate (an aggregate on a root spans the tree); a shared provider must be
  in it itself;
* unsuffixed forbidden aggregates: neither the provider nor its own root may be
  in them;
* suffixed ``member_of`` and forbidden aggregates: the provider itself;
* ``in_tree``: the provider must be in the tree of the named provider (so no
  sharing provider from outside that tree is pulled in); a sharing provider of
  that tree may still serve other trees, as in the seed's ``in_tree1=<SS1>``
  example;
* required traits: per provider for suffixed and resourceless groups,
  *collectively* over the providers that contribute resources for the unsuffixed
  group (checked during the search); forbidden traits: per provider, always.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from apportion.placement.model import BoolArray, Forest
from apportion.placement.query import ParsedRequest, RequestGroup

IntArray = npt.NDArray[np.int64]


class ByRoot(Mapping[int, tuple[int, ...]]):
    """Providers grouped by the root they serve: root -> providers, in the order given.

    Kept as two arrays sorted by root (``providers[i]`` serves ``roots[i]``): the array
    search reads every anchor's providers from them at once; the dict of tuples the
    plain search looks anchors up in is built only when it is first read.
    """

    __slots__ = ("_dict", "providers", "roots")

    def __init__(self, roots: IntArray, providers: IntArray) -> None:
        order = np.argsort(roots, kind="stable")  # a root's providers keep their order
        self.roots: IntArray = roots[order]
        self.providers: IntArray = providers[order]
        self._dict: dict[int, tuple[int, ...]] | None = None

    def spans(self, anchors: IntArray) -> tuple[IntArray, IntArray]:
        """Where each anchor's providers start in :attr:`providers`, and how many."""
        start = np.searchsorted(self.roots, anchors, side="left")
        end = np.searchsorted(self.roots, anchors, side="right")
        return start, end - start

    def keys_set(self) -> set[int]:
        """Every root with at least one provider."""
        return set(self.roots.tolist())

    def _as_dict(self) -> dict[int, tuple[int, ...]]:
        if self._dict is None:
            grouped: dict[int, list[int]] = {}
            for root, provider in zip(self.roots.tolist(), self.providers.tolist(), strict=True):
                grouped.setdefault(root, []).append(provider)
            self._dict = {root: tuple(providers) for root, providers in grouped.items()}
        return self._dict

    def __getitem__(self, root: int) -> tuple[int, ...]:
        return self._as_dict()[root]

    def get(self, root: int, default: tuple[int, ...] = ()) -> tuple[int, ...]:  # type: ignore[override]
        # Mapping's get raises and catches KeyError on every miss; the plain search
        # looks up every anchor, most of them misses.
        return self._as_dict().get(root, default)

    def __iter__(self) -> Iterator[int]:
        return iter(self._as_dict())

    def __len__(self) -> int:
        return len(self._as_dict())

    def __bool__(self) -> bool:
        return len(self.roots) > 0


@dataclass(frozen=True, slots=True)
class Slot:
    group: int  # index into ParsedRequest.groups
    suffix: str
    demands: tuple[tuple[str, int], ...]
    # providers of T eligible for a member use, by root T, in job order
    members: ByRoot
    # sharing providers eligible for a shared use, by the root T they serve
    shared: ByRoot

    def candidates(self, root: int) -> list[int]:
        """Providers that may fill this slot in a candidate anchored at ``root``."""
        return [*self.members.get(root), *self.shared.get(root)]

    def anchors(self) -> set[int]:
        return self.members.keys_set() | self.shared.keys_set()


@dataclass(frozen=True, slots=True)
class SlotPlan:
    """Everything the search needs that does not depend on the anchor."""

    slots: tuple[Slot, ...]
    # slots of the unsuffixed group that carry resources (a prefix of ``slots``)
    unsuffixed: tuple[int, ...]
    # any-of trait clauses the unsuffixed providers must cover collectively
    collective: tuple[frozenset[str], ...]
    # slot indices whose providers must all differ (group_policy=isolate)
    isolated: tuple[int, ...]
    # slot indices of each same_subtree
    subtrees: tuple[tuple[int, ...], ...]
    # roots that may anchor a candidate, ascending
    anchors: tuple[int, ...]


def _any_of(forest: Forest, names: Iterable[str], member: bool = False) -> BoolArray:
    """Providers having any of ``names`` (traits, or aggregates when ``member``)."""
    out = np.zeros(forest.size, dtype=np.bool_)
    for name in names:
        out |= forest.in_aggregate(name) if member else forest.with_trait(name)
    return out


def _group_masks(forest: Forest, group: RequestGroup) -> tuple[BoolArray, BoolArray] | None:
    """(member-use mask, shared-use mask) of the filters other than resources.

    ``None`` when the group can match nothing (an unknown ``in_tree`` provider).
    """
    n = forest.size
    member = np.ones(n, dtype=np.bool_)
    if group.in_tree is not None:
        anchor = forest.index.get(group.in_tree)
        if anchor is None:
            return None
        member &= forest.roots_array == forest.roots[anchor]
    if group.forbidden:
        member &= ~_any_of(forest, group.forbidden)
    per_provider_traits = group.suffixed or not group.resources
    if per_provider_traits:
        for clause in group.required:
            member &= _any_of(forest, clause)
    shared = member.copy()
    roots = forest.roots_array
    for clause in group.member_of:
        inside = _any_of(forest, clause, member=True)
        shared &= inside
        member &= inside if group.suffixed else inside | inside[roots]
    if group.forbidden_aggregates:
        bad = _any_of(forest, group.forbidden_aggregates, member=True)
        if group.suffixed:
            member &= ~bad
            shared &= ~bad
        else:
            bad |= bad[roots]
            member &= ~bad
            shared &= ~bad
    sharing = forest.mask(np.fromiter(forest.sharing, dtype=np.int64, count=len(forest.sharing)))
    return member, shared & sharing


def _fits(forest: Forest, demands: Sequence[tuple[str, int]]) -> BoolArray:
    out = np.ones(forest.size, dtype=np.bool_)
    for rc, amount in demands:
        inv = forest.inventories.get(rc)
        if inv is None:
            return np.zeros(forest.size, dtype=np.bool_)
        out &= forest.mask(inv.fitting(amount))
    return out


def _by_root(forest: Forest, mask: BoolArray) -> ByRoot:
    idx = np.flatnonzero(mask)
    return ByRoot(forest.roots_array[idx], idx)


def _served(forest: Forest, mask: BoolArray) -> ByRoot:
    serves = forest.serves
    sharing = np.flatnonzero(mask).tolist()
    counts = [len(serves[s]) for s in sharing]
    roots = np.fromiter(
        (root for s in sharing for root in serves[s]), dtype=np.int64, count=sum(counts)
    )
    return ByRoot(roots, np.repeat(np.array(sharing, dtype=np.int64), counts))


def _slot(
    forest: Forest,
    index: int,
    group: RequestGroup,
    demands: tuple[tuple[str, int], ...],
    masks: tuple[BoolArray, BoolArray],
) -> Slot:
    fits = _fits(forest, demands)
    return Slot(
        group=index,
        suffix=group.suffix,
        demands=demands,
        members=_by_root(forest, masks[0] & fits),
        shared=_served(forest, masks[1] & fits),
    )


def plan_slots(forest: Forest, request: ParsedRequest) -> SlotPlan | None:
    """The slots of ``request`` over ``forest``; ``None`` when nothing can match."""
    found = _slots(forest, request)
    if found is None:
        return None
    slots, collective = found
    spread = tuple(k for k, s in enumerate(slots) if not s.suffix and s.demands)
    slot_of = {s.suffix: k for k, s in enumerate(slots) if s.suffix}
    isolated: tuple[int, ...] = ()
    if request.group_policy == "isolate" and len(slot_of) > 1:
        isolated = tuple(sorted(slot_of.values()))
    subtrees = tuple(
        tuple(sorted(slot_of[s] for s in same)) for same in request.same_subtrees if len(same) > 1
    )
    return SlotPlan(
        slots=tuple(slots),
        unsuffixed=spread,
        collective=collective,
        isolated=isolated,
        subtrees=subtrees,
        anchors=_anchors(forest, request, slots),
    )


def _slots(
    forest: Forest, request: ParsedRequest
) -> tuple[list[Slot], tuple[frozenset[str], ...]] | None:
    """Every group's slots, unsuffixed groups first (one slot per resource of the
    unsuffixed group that has some), and its required traits; ``None`` when a slot can
    have no provider."""
    unsuffixed = [(i, g) for i, g in enumerate(request.groups) if not g.suffixed]
    suffixed = [(i, g) for i, g in enumerate(request.groups) if g.suffixed]
    slots: list[Slot] = []
    collective: tuple[frozenset[str], ...] = ()
    for i, group in unsuffixed + suffixed:
        masks = _group_masks(forest, group)
        if masks is None:
            return None
        if group.suffixed or not group.resources:
            slots.append(_slot(forest, i, group, group.resources, masks))
        else:
            collective = group.required
            for demand in group.resources:
                slots.append(_slot(forest, i, group, (demand,), masks))
        if not (slots[-1].members or slots[-1].shared):
            return None
    return slots, collective


def _anchors(forest: Forest, request: ParsedRequest, slots: list[Slot]) -> tuple[int, ...]:
    """The roots every slot can be served under, with the root's required and
    forbidden traits applied, in order."""
    anchors = set.intersection(*(s.anchors() for s in slots))
    if request.root_required or request.root_forbidden:
        anchors = {
            r
            for r in anchors
            if request.root_required <= forest.traits[r]
            and not request.root_forbidden & forest.traits[r]
        }
    return tuple(sorted(anchors))
