"""The greedy selection's tie-break order, each criterion isolated with fixed priorities."""

from __future__ import annotations

from apportion.attach.compliance import CoverageContext, Tally
from apportion.attach.facts import consumer_profile
from apportion.attach.groups import Attached, GroupWork, Member, Offer
from apportion.attach.pools import view_pool
from apportion.attach.select import select
from apportion.contracts.attach import Consumer, Pool
from tests.unit.attach.support import consumer, pool

CTX = CoverageContext(consumer_profile(Consumer.model_validate(consumer(guest=True))))
NO_ATTACHED = Attached(by_stack={}, limits=())
_positions = iter(range(10_000))


def member(
    pool_id: str,
    priority: int,
    offers: set[Offer],
    *,
    virt_only: bool = False,
    host: bool = False,
    stack: str | None = None,
) -> Member:
    attrs: dict[str, str] = {}
    if virt_only or host:
        attrs["virt_only"] = "true"
    if host:
        attrs["requires_host"] = "h"
    pattrs = {"stacking_id": stack, "multi-entitlement": "yes"} if stack else {}
    view = view_pool(
        Pool.model_validate(pool(pool_id, attrs=attrs, pattrs=pattrs)), next(_positions)
    )
    return Member(view, CTX.unit(view), 5, 1, priority, frozenset(offers), frozenset(offers))


def group(*members: Member) -> GroupWork:
    first = members[0]
    stack = first.view.stack_id
    g = GroupWork(CTX, NO_ATTACHED, stack is not None, stack, first)
    g.members.extend(members[1:])
    return g


P1: Offer = ("product", "p1")
P2: Offer = ("product", "p2")
ROLE: Offer = ("role", "server")


def picked(groups: list[GroupWork], needed: set[Offer], products_first: bool = False) -> list[str]:
    return [p.group.key for p in select(groups, set(needed), [], products_first)]


# Groups are given in scan order (the reverse of the input order), as run_attach does.


def test_the_seed_profile_picks_the_group_covering_most_products_first() -> None:
    a = group(member("a", 9000, {P1}, host=True))
    b = group(member("b", 100, {P1, P2}))
    picks = select([b, a], {P1, P2}, [], products_first=True)
    assert [p.group.key for p in picks] == ["pool:b"]
    assert picks[0].decided_by == "products_covered"


def test_candlepin_profiles_never_compare_the_number_of_products_covered() -> None:
    # Scan b, a: b leads; a has more host-specific pools and replaces it although it
    # covers one product to b's two. Next round only b offers p2.
    a = group(member("a", 9000, {P1}, host=True))
    b = group(member("b", 100, {P1, P2}))
    assert picked([b, a], {P1, P2}) == ["pool:a", "pool:b"]


def test_host_specific_pools_beat_a_higher_average_priority() -> None:
    a = group(member("a", 100, {P1}, host=True))
    b = group(member("b", 900, {P1}))
    picks = select([b, a], {P1}, [])
    assert [p.group.key for p in picks] == ["pool:a"]
    assert picks[0].decided_by == "host_specific_pools"


def test_a_virt_only_group_that_leads_on_its_average_does_not_make_others_skip() -> None:
    # Scan a, b: a leads (the first group always does, here by its average); b has fewer
    # virt_only pools, but no group has won on the virt_only rule, so b challenges and
    # wins on its higher average.
    a = group(member("a", 100, {P1}, virt_only=True))
    b = group(member("b", 200, {P1}))
    assert picked([a, b], {P1}) == ["pool:b"]
    assert picked([b, a], {P1}) == ["pool:b"]


def test_once_a_group_wins_on_virt_only_groups_with_fewer_virt_only_pools_are_skipped() -> None:
    # Scan c, a, b: c leads; a ties c on the average and wins on virt_only; b, with fewer
    # virt_only pools than a, is skipped despite its higher average.
    c = group(member("c", 100, {P1}))
    a = group(member("a", 100, {P1}, virt_only=True))
    b = group(member("b", 200, {P1}))
    picks = select([c, a, b], {P1}, [])
    assert [p.group.key for p in picks] == ["pool:a"]
    assert picks[0].runner_up == "pool:b"
    assert (picks[0].decided_by or "").startswith("virt_only_pools (the runner-up")


def test_virt_only_pools_decide_between_equal_priorities() -> None:
    a = group(member("a", 100, {P1}, virt_only=True))
    b = group(member("b", 100, {P1}))
    picks = select([b, a], {P1}, [])
    assert [p.group.key for p in picks] == ["pool:a"]
    assert picks[0].decided_by == "virt_only_pools"


def test_a_smaller_total_quantity_wins_next() -> None:
    two = group(member("t1", 100, {P1}, stack="two"), member("t2", 100, {P1}, stack="two"))
    one = group(member("o1", 100, {P1}, stack="one"))
    picks = select([one, two], {P1}, [])
    assert [p.group.key for p in picks] == ["stack:one"]
    assert picks[0].decided_by == "total_quantity"


def test_an_unstacked_pool_beats_a_stack_of_one() -> None:
    stacked = group(member("s", 100, {P1}, stack="s"))
    single = group(member("u", 100, {P1}))
    for order in ([stacked, single], [single, stacked]):
        picks = select(order, {P1}, [])
        assert [p.group.key for p in picks] == ["pool:u"]
        assert picks[0].decided_by == "unstacked"


def test_a_stack_providing_a_needed_role_displaces_an_unstacked_group_met_before_it() -> None:
    # rules.js: at a tie, "stacked best, unstacked challenger" and "challenger provides a
    # needed role or addon" are tried in turn; the unstacked rule is not a comparison.
    single = group(member("u", 100, {P1, ROLE}))
    stacked = group(member("s", 100, {P1, ROLE}, stack="s"))
    assert picked([single, stacked], {P1, ROLE}) == ["stack:s"]
    assert picked([stacked, single], {P1, ROLE}) == ["pool:u"]


def test_providing_a_needed_role_breaks_the_last_tie() -> None:
    with_role = group(member("r", 100, {P1, ROLE}))
    without = group(member("n", 100, {P1}))
    picks = select([without, with_role], {P1, ROLE}, [])
    assert [p.group.key for p in picks] == ["pool:r"]
    assert picks[0].decided_by == "provides_role_or_addon"


def test_a_challenger_providing_a_needed_role_wins_a_tie_even_against_one_that_does_too() -> None:
    first = group(member("first", 100, {P1, ROLE}))
    second = group(member("second", 100, {P1, ROLE}))
    assert picked([first, second], {P1, ROLE}) == ["pool:second"]


def test_on_an_exact_tie_the_group_met_first_wins() -> None:
    later = group(member("later", 100, {P1}))
    earlier = group(member("earlier", 100, {P1}))
    picks = select([later, earlier], {P1}, [])  # visit order: reverse input order
    assert [p.group.key for p in picks] == ["pool:later"]
    assert picks[0].decided_by is not None
    assert picks[0].decided_by.startswith("input order")


def test_once_a_host_specific_group_leads_groups_with_fewer_are_skipped() -> None:
    host = group(member("host", 100, {P1}, host=True))
    wide = group(member("wide", 100, {P1, P2}))
    # Met first, the host-specific group leads and the wider group is skipped this round;
    # it is still picked next round for p2.
    for products_first in (False, True):
        picks = select([host, wide], {P1, P2}, [], products_first)
        assert [p.group.key for p in picks] == ["pool:host", "pool:wide"]
        assert (picks[0].decided_by or "").startswith("host_specific_pools (the runner-up")
    # Met second, it cannot displace the wider group when products count first (seed).
    assert picked([wide, host], {P1, P2}, products_first=True) == ["pool:wide"]
    assert picked([wide, host], {P1, P2}) == ["pool:host", "pool:wide"]


def test_groups_offering_nothing_needed_are_never_picked() -> None:
    a = group(member("a", 100, {P1}))
    assert picked([a], {P2}) == []


def test_partial_stacks_are_picked_first_even_if_worse() -> None:
    partial = group(member("partial", 1, {P1}, stack="s"))
    better = group(member("better", 900, {P1}))
    picks = select([better, partial], {P1}, ["s"])
    assert [p.group.key for p in picks] == ["stack:s"]
    assert picks[0].reason == "completes a partial stack"


def test_the_tally_counts_sockets_in_whole_instances() -> None:
    view = view_pool(
        Pool.model_validate(
            pool("i", pattrs={"sockets": "2", "instance_multiplier": "2", "stacking_id": "s"})
        ),
        0,
    )
    physical = CoverageContext(consumer_profile(Consumer.model_validate(consumer(sockets="8"))))
    tally = Tally(physical)
    tally.add(physical.unit(view), 7)  # 7 − 7 mod 2 = 6 entitlements → 3 instances → 6 sockets
    assert tally.totals[physical.socket_index] == 6
    assert tally.failures(None) == ["sockets"]
