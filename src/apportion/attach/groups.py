"""Entitlement groups: build, validate, remove extra attributes, prune, choose quantities.

An entitlement group is a stack (every valid pool with the same ``stacking_id``) or a
single non-stacked pool. Each step below is the reference's, on the pools of one
group, with the consumer's attached entitlements counted in:

* :meth:`GroupWork.validate` — the group at full availability must cover the consumer;
  for a stack that does not, drop every pool carrying an attribute named in the
  coverage reasons and check again (the reference rebuilds the list back to front,
  which reverses the order of the pools kept);
* :meth:`GroupWork.remove_extra_attributes` — avoid parallel stacks: for each
  attribute in subsets of the stack's enforced attributes, try the stack without the
  pools carrying it; keep the candidate with the best virt_only/host-specific score per
  pool, fewer pools on a tie;
* :meth:`GroupWork.prune` — sort by priority (the pool ending earlier gets +1 in each
  comparison) and drop, from the end, every pool the stack can do without;
* :meth:`GroupWork.quantities` — per pool, in post-prune order, the smallest multiple of
  the increment that keeps the stack covered while the pools after it stay at their
  maximum. The reference tries k × increment one by one; coverage only grows with the
  quantity, so the first covering multiple is computed directly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import cmp_to_key, lru_cache, partial
from itertools import pairwise
from typing import NamedTuple

from apportion.attach.compliance import (
    CoverageContext,
    CoverageUnit,
    Tally,
    combine_limits,
    entitlement_failures,
)
from apportion.attach.needs import Offer
from apportion.attach.pools import PoolView

_NONE: Sequence[str] = ()


class Member(NamedTuple):
    """A valid pool inside a group, with everything the group steps need."""

    view: PoolView
    unit: CoverageUnit
    available: int
    step: int
    priority: int  # scaled: the exact priority × the run's scale (see priority.Scorer)
    offers: frozenset[Offer]  # of what is still needed
    protects: frozenset[Offer]  # what pruning must not lose (offers.py)


class Attached(NamedTuple):
    """The consumer's attached entitlements, as the group steps count them."""

    by_stack: dict[str, Tally]
    limits: tuple[int, ...]

    def stack_tally(self, ctx: CoverageContext, stack_id: str | None) -> Tally:
        found = self.by_stack.get(stack_id or "")
        return found.copy() if found is not None else Tally(ctx)


def get_sets(items: Sequence[str], max_length: int) -> list[list[str]]:
    """The reference's subset enumeration (its order decides ties between candidates)."""
    if not items:
        return [[]]
    out: list[list[str]] = []
    for rest in get_sets(items[1:], max_length):
        if len(rest) < max_length:
            out.append([items[0], *rest])
        out.append(rest)
    return out


@lru_cache(maxsize=64)
def _subset_order(attributes: tuple[str, ...]) -> tuple[str, ...]:
    """The attributes in the order the reference meets them in its subsets of size n − 1."""
    order: list[str] = []
    for subset in get_sets(attributes, len(attributes) - 1):
        for attribute in subset:
            if attribute not in order:
                order.append(attribute)
    return tuple(order)


def _product_count(members: Iterable[Member]) -> int:
    seen: set[Offer] = set()
    for m in members:
        seen |= m.offers
    return sum(1 for kind, _ in seen if kind == "product")


def _compare(scale: int, a: Member, b: Member) -> int:
    """Priority descending; the pool ending earlier gets one point more in the comparison."""
    pa, pb = a.priority, b.priority
    if a.view.end is not None and b.view.end is not None:
        if a.view.end > b.view.end:
            pb += scale
        elif a.view.end < b.view.end:
            pa += scale
    diff = pb - pa
    return (diff > 0) - (diff < 0)


def _ties(ordered: Sequence[Member], scale: int) -> list[list[PoolView]]:
    """Runs of pools the prune sort finds equal, which Candlepin's unstable sort may
    order either way (the explanation names them)."""
    runs: list[list[PoolView]] = []
    for previous, m in pairwise(ordered):
        if _compare(scale, previous, m) == 0:
            if runs and runs[-1][-1] is previous.view:
                runs[-1].append(m.view)
            else:
                runs.append([previous.view, m.view])
    return runs


class GroupWork:
    """One entitlement group while the rules work on it (mutable working state)."""

    __slots__ = (
        "_full",
        "_limited",
        "_offers",
        "_quantities",
        "_sorted",
        "attached",
        "ctx",
        "failures",
        "initial",
        "key",
        "lost_as_extra",
        "members",
        "pruned",
        "removed_as_extra",
        "removed_by_validation",
        "scale",
        "stack_id",
        "stackable",
        "status",
    )

    def __init__(
        self,
        ctx: CoverageContext,
        attached: Attached,
        stackable: bool,
        stack_id: str | None,
        first: Member,
        scale: int = 1,
    ) -> None:
        self.ctx = ctx
        self.scale = scale
        self.attached = attached
        self.stackable = stackable
        self.stack_id = stack_id
        self.key = f"stack:{stack_id}" if stackable else f"pool:{first.view.id}"
        self.members: list[Member] = [first]
        self._limited: bool | None = None
        # The tally of the current members at their availability, once counted: each step
        # starts from it, and tallies are sums, so it holds whatever the members' order.
        self._full: Tally | None = None
        # What the steps record for the explanation (empty until a step records something).
        self.initial: Sequence[str] = _NONE
        self.removed_by_validation: Sequence[str] = _NONE
        self.removed_as_extra: Sequence[str] = _NONE
        self.lost_as_extra: Sequence[Offer] = ()
        self.pruned: Sequence[str] = _NONE
        # The members as the prune sort ordered them (its ties: sort_ties).
        self._sorted: Sequence[Member] = ()
        self.failures: Sequence[str] = _NONE
        self.status = "considered"
        self._offers: frozenset[Offer] | None = None
        self._quantities: dict[str, int] | None = None

    # ---- shared helpers --------------------------------------------------------------

    def _can_be_limited(self) -> bool:
        """Whether a guest_limit can apply at all: when neither an attached entitlement nor
        any of the group's pools has one, the global limit is None for every subset of the
        pools. Decided on first use (the steps only ever remove pools)."""
        if self._limited is None:
            self._limited = bool(self.attached.limits) or any(
                m.unit.guest_limit is not None for m in self.members
            )
        return self._limited

    def offers(self) -> frozenset[Offer]:
        """What the group's current pools offer (cached once the steps are done)."""
        if self._offers is not None:
            return self._offers
        if len(self.members) == 1:  # most groups: a single pool's offers as they are
            only = self.members[0].offers
            if self.status != "considered":
                self._offers = only
            return only
        out: set[Offer] = set()
        for m in self.members:
            out |= m.offers
        if self.status != "considered":
            self._offers = frozenset(out)
        return frozenset(out)

    def _limit(self, members: Iterable[Member]) -> int | None:
        if not self._can_be_limited():
            return None
        own = [m.unit.guest_limit for m in members if m.unit.guest_limit is not None]
        if not own and not self.attached.limits:
            return None
        return combine_limits([*self.attached.limits, *own])

    def _tally(self, members: Iterable[Member]) -> Tally:
        tally = self.attached.stack_tally(self.ctx, self.stack_id)
        add = tally.add
        for m in members:
            add(m.unit, m.available)
        return tally

    def _members_tally(self) -> Tally:
        """The tally of the current members (shared: copied by whoever changes it)."""
        if self._full is None:
            self._full = self._tally(self.members)
        return self._full

    @property
    def sort_ties(self) -> list[list[PoolView]]:
        """Runs of pools the prune sort found equal, which Candlepin's unstable sort may
        order either way: found when the explanation asks, not for every stack pruned."""
        return _ties(self._sorted, self.scale)

    # ---- the steps ---------------------------------------------------------------------

    def validate(self) -> bool:
        if not self.stackable:
            m = self.members[0]
            self.initial = [m.view.id]
            unit = m.unit
            # _limit without its calls when neither the pool nor an attached entitlement
            # has a guest_limit (most single pools).
            limited = unit.guest_limit is not None or self.attached.limits
            limit = self._limit(self.members) if limited else None
            # compliance.effective_quantity of a pool that is not stacked.
            quantity = 1 if m.available > 1 else m.available
            if self.ctx.covers_alone(unit, quantity, limit):
                return True
            tally = Tally(self.ctx)
            tally.add(unit, quantity)
            self.failures = tally.failures(limit)
            return False
        self.initial = [m.view.id for m in self.members]
        tally = self._members_tally()
        limit = self._limit(self.members)
        if tally.covers(limit):
            return True
        failures = tally.failures(limit)
        has = self.ctx.has
        kept = [m for m in reversed(self.members) if not any(has(m.unit, a) for a in failures)]
        kept_ids = {m.view.id for m in kept}
        self.removed_by_validation = [m.view.id for m in self.members if m.view.id not in kept_ids]
        self.members = kept
        self._full = None
        if not kept:
            self.failures = failures
            return False
        self.failures = self._members_tally().failures(self._limit(kept))
        return not self.failures

    def remove_extra_attributes(self) -> None:
        if not self.stackable:
            return
        members = self.members
        attributes = self.ctx.carried(m.unit for m in members)
        if len(attributes) < 2:
            return  # subsets of size n − 1 of one attribute: only the empty set
        # rules.js remove_extra_attrs compares the role and addons of the whole group (not
        # of the candidate) with themselves, so only the products count: a candidate
        # may drop the pools that carry the role or an addon.
        candidates, tallies = self._extra_candidates(members, attributes)
        if len(candidates) == 1:
            return  # the stack itself, which the scores below would keep
        # Score per pool: (virt_only 100 + host-specific 150) summed over the candidate's
        # pools and divided by their number; compared exactly by cross-multiplying.
        best, best_total, size = 0, 0, len(members)
        best_len = 1
        for i, candidate in enumerate(candidates):
            total = sum(
                (100 if m.view.virt_only else 0) + (150 if m.view.requires_host is not None else 0)
                for m in candidate
            )
            n = len(candidate)
            if total * best_len > best_total * n:
                best, best_total, best_len, size = i, total, n, n
            elif total * best_len == best_total * n and size > n:
                best, size = i, n
        if best:
            chosen = {m.view.id for m in candidates[best]}
            self.removed_as_extra = [m.view.id for m in members if m.view.id not in chosen]
            self.members = list(candidates[best])
            self._full = tallies[best]
            kept: set[Offer] = set()
            for m in self.members:
                kept |= m.protects
            self.lost_as_extra = sorted({o for m in members for o in m.protects} - kept)

    def _extra_candidates(
        self, members: list[Member], attributes: list[str]
    ) -> tuple[list[list[Member]], list[Tally]]:
        """The stack, then the stack less the pools carrying each attribute in the
        reference's order where that still covers the consumer and offers as many
        products; with their tallies."""
        original: int | None = None  # counted when a candidate needs it
        # The stack's tally less the pools carrying an attribute is the tally of those
        # without it (tallies are sums), so each candidate costs only its removals.
        full = self._members_tally()
        index = self.ctx.index
        candidates = [members]
        tallies = [full]
        for attribute in _subset_order(tuple(attributes)):
            k = index.get(attribute, -1)  # -1: guest_limit (arch is never carried here)
            if k >= 0:
                without = [m for m in members if m.unit.sizes[k] is None]
            else:
                without = [m for m in members if m.unit.guest_limit is None]
            # An empty candidate scores 0/0 in rules.js (NaN), which never wins (often
            # every pool of a stack carries the attribute: no tally to count then).
            if not without:
                continue
            tally = full.copy()
            for m in members:
                unit = m.unit
                if (unit.sizes[k] if k >= 0 else unit.guest_limit) is not None:
                    tally.add(unit, m.available, -1)
            if not tally.covers(self._limit(without)):
                continue
            if original is None:
                original = _product_count(members)
            if _product_count(without) == original:
                candidates.append(without)
                tallies.append(tally)
        return candidates, tallies

    def prune(self) -> None:
        if not self.stackable or len(self.members) < 2:
            return  # the only pool of a group that is needed stays
        members = sorted(self.members, key=cmp_to_key(partial(_compare, self.scale)))
        self._sorted = tuple(members)
        tally = self._members_tally().copy()
        # How many of the stack's pools protect each offer (a plain dict: Counter.update
        # is Python code, called for every pool of every stack).
        counts: dict[Offer, int] = {}
        for m in members:
            for offer in m.protects:
                counts[offer] = counts.get(offer, 0) + 1
        needed = offered = len(counts)
        pruned: list[str] = []
        for i in range(len(members) - 1, -1, -1):
            m = members.pop(i)
            tally.add(m.unit, m.available, -1)
            for offer in m.protects:
                counts[offer] -= 1
                if not counts[offer]:
                    offered -= 1
            if members and offered == needed and tally.covers(self._limit(members)):
                pruned.append(m.view.id)
                continue
            # Breaks coverage or loses something needed: put it back (at the end).
            members.append(m)
            tally.add(m.unit, m.available)
            for offer in m.protects:
                if not counts[offer]:
                    offered += 1
                counts[offer] += 1
        self.members = members
        self._full = tally
        self.pruned = pruned

    # ---- metrics used to pick the best groups ------------------------------------------

    def average_priority(self) -> float:
        """The mean pool priority, as the nearest float (the explanation's figure).

        Integer true division is correctly rounded, so this is exactly the float of the
        exact mean (the scaled sum over the number of pools times the scale).
        """
        members = self.members
        if len(members) == 1:  # most groups: no generator for one pool
            return members[0].priority / self.scale
        return sum(m.priority for m in members) / (len(members) * self.scale)

    def priority_of(self, member: Member) -> float:
        """A pool's priority as the nearest float (see :meth:`average_priority`)."""
        return member.priority / self.scale

    def host_specific(self) -> int:
        """Number of host-specific (requires_host) pools."""
        return sum(1 for m in self.members if m.view.host_specific)

    def virt_only(self) -> int:
        """Number of virt_only pools."""
        return sum(1 for m in self.members if m.view.virt_only)

    def total_quantity(self) -> int:
        return sum(self.quantities().values())

    def quantities(self) -> dict[str, int]:
        if self._quantities is None:
            self._quantities = self._choose_quantities()
        return self._quantities

    def _choose_quantities(self) -> dict[str, int]:
        members = self.members
        limit = self._limit(members)
        result: dict[str, int] = {}
        if not self.stackable:
            m = members[0]
            covered = not entitlement_failures(self.ctx, m.unit, m.step, limit)
            if covered and m.step <= m.available:
                result[m.view.id] = m.step
            return result
        current = [m.available for m in members]
        full = self._members_tally().copy()
        for i, m in enumerate(members):
            rest = full.copy()
            rest.add(m.unit, current[i], -1)
            rest.add(m.unit, 0)  # the pool still enforces its attributes
            chosen = self._smallest(m, rest, limit)
            if chosen is None:
                # The reference leaves the last quantity it tried on the pool.
                last = (m.available // m.step) * m.step if m.available >= m.step else m.available
                new = last
            else:
                result[m.view.id] = chosen
                new = chosen
            full.add(m.unit, current[i], -1)
            full.add(m.unit, new)
            current[i] = new
        return result

    def _smallest(self, m: Member, rest: Tally, limit: int | None) -> int | None:
        ctx = self.ctx
        lower = m.step
        for attribute in rest.failures(limit):
            if attribute in ("arch", "guest_limit"):
                return None  # no quantity changes these
            k = ctx.additive.index(attribute)
            value = m.unit.sizes[k]
            if value is None or value <= 0:
                return None
            deficit = ctx.need[k] - rest.totals[k]
            steps = math.ceil(deficit / value)
            lower = max(lower, steps * m.unit.socket_multiplier if k == ctx.socket_index else steps)
        quantity = -(-lower // m.step) * m.step
        return quantity if quantity <= m.available else None


def build_groups(
    members: Sequence[Member], ctx: CoverageContext, attached: Attached, scale: int = 1
) -> list[GroupWork]:
    """One group per stacking_id (at the position of its first pool), one per other pool."""
    groups: list[GroupWork] = []
    stacks: dict[str, GroupWork] = {}
    for m in members:
        view = m.view
        if view.stacked:
            sid = view.stack_id or ""
            group = stacks.get(sid)
            if group is None:
                group = GroupWork(ctx, attached, True, view.stack_id, m, scale)
                stacks[sid] = group
                groups.append(group)
            else:
                group.members.append(m)
        else:
            groups.append(GroupWork(ctx, attached, False, None, m, scale))
    return groups
