"""The loaded dice: which account, then which of its candidates.

The seed rolls "a random number between 1 and 100" and launches on the lucky
account. Here the roll is a float u in [0, 1) from :class:`random.Random` — seeded
from the job's ``seed`` (reproducible; an int seed and its absolute value give the
same stream, as in CPython's ``random.seed``), or from OS entropy without one. The
accounts of the group are laid out in canonical order (sorted ids) on [0, 1), each
taking its probability as width; the account whose interval holds u wins.

Within the winning account a second draw from the same generator takes one of the
account's candidates uniformly, keeping Placement's order as the enumeration. So a
candidate's reported ``probability`` (the account's probability shared evenly
among its candidates) is exactly its chance of being chosen within its group, and
launches spread over an account's hosts instead of always hitting the first.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence


def new_rng(seed: int | None) -> random.Random:
    return random.Random(seed)


def roll_account(rng: random.Random, group: Mapping[str, float]) -> tuple[str, float]:
    """(winner, roll) within one non-empty group {account: p} in canonical order."""
    roll = rng.random()
    cumulative = 0.0
    last = next(iter(group))
    for account, p in group.items():
        if p <= 0:
            continue
        last = account
        cumulative += p
        if roll < cumulative:
            return account, roll
    # Rounding can leave the sum a hair under 1 and the roll above it: the last
    # account with a positive probability owns that sliver.
    return last, roll


def pick_candidate(rng: random.Random, candidates: Sequence[int]) -> int:
    """One of ``candidates`` (request indices of one account), uniformly."""
    # Always draw, even for one candidate, so the stream a seed produces does not
    # depend on how many candidates an account happens to have.
    u = rng.random()
    return candidates[min(int(u * len(candidates)), len(candidates) - 1)]
