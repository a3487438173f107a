"""launch_select answers that fit the envelope limit (``APPORTION_LIMITS__MAX_ENVELOPE_BYTES``).

An answer can be hundreds of times its job: with many isolated groups each candidate
carries one allocation per group, up to the candidate cap. Building it all and
refusing it afterwards would spend the memory anyway, so the candidates are
cut *before* they are built: the first few are built and measured, the cut is placed
where the answer would reach the limit, and only that many are built. The result says
so in ``extra``: ``truncated: true``, ``valid_candidates`` (how many the search found
and the policy weighed: probabilities and the dice saw them all), ``returned`` and
``max_envelope_bytes``. The chosen candidate is always among those returned (last, if
it came after the cut; ``selection.chosen`` points at it), and ``provider_summaries``
cover the trees of the returned candidates only, as they cover those of all the
candidates found when nothing is cut.

A job whose answer fits is built whole; the measuring costs one small probe of at most
``PROBE`` candidates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from apportion.codec import encode
from apportion.placement.candidates import CandidateSet
from apportion.placement.summaries import provider_summaries

PROBE = 32
# The envelope around the result (job_id up to 256 characters, kind, status, engine
# version, timing) and the rest of the result's keys.
SLACK = 4096
# Candidates differ in size (provider uuids, mappings): the cut keeps this much room.
MARGIN = 0.9


@dataclasses.dataclass(frozen=True, slots=True)
class Fitted:
    """The answer's candidates, built: all of them, or the first that fit."""

    requests: list[Any]
    provider_summaries: dict[str, Any]
    chosen: int | None  # the chosen candidate's index among those returned
    note: dict[str, Any]  # what goes into the result's `extra` (empty when nothing was cut)


def size_of(value: Any) -> int:
    """Bytes of ``value`` (plain JSON data) as compact JSON, written by the envelope's codec."""
    return len(encode(value))


def _subset(
    candidates: CandidateSet, keep: Sequence[int], *, summaries: bool = True
) -> CandidateSet:
    """The candidates at ``keep``, with the provider summaries of their trees only
    (the rule the search applies to what it found); ``summaries=False``: the whole
    set's summaries kept, for a part that is only measured."""
    found = candidates.found.take(keep)
    kept = candidates.provider_summaries
    if summaries and candidates.forest is not None:
        kept = provider_summaries(candidates.forest, found.providers())
    return dataclasses.replace(candidates, found=found, provider_summaries=kept)


def _kept(total: int, n: int, chosen: int | None) -> list[int]:
    keep = list(range(max(1, min(total, n))))
    if chosen is not None and chosen >= len(keep):
        keep[-1] = chosen  # the dice's choice is always returned
    return keep


def fit(
    candidates: CandidateSet,
    limit: int,
    *,
    selection: Any = None,
    per_account: Any = None,
    costs: Sequence[float] | None = None,
    chosen: int | None = None,
) -> Fitted:
    """The candidates built, cut if needed so that the result stays under ``limit``
    bytes of JSON (``selection``: the rest of the result that counts)."""
    total = len(candidates.found)

    def built(part: CandidateSet, keep: Sequence[int] | None) -> list[Any]:
        if per_account is None or costs is None:
            return part.build()
        return part.build(per_account, [costs[i] for i in keep] if keep is not None else costs)

    budget = (limit - SLACK - size_of(selection)) * MARGIN
    k = min(PROBE, total)
    if total <= k:
        return Fitted(built(candidates, None), candidates.provider_summaries, chosen, {})
    # Only the probe's candidates are measured: its own summaries are needed only when
    # the answer must be cut.
    probe = _subset(candidates, range(k), summaries=False)
    each = (size_of(built(probe, range(k))) + k) / k  # a comma between candidates
    full = size_of(candidates.provider_summaries)
    if each * total + full <= budget:
        return Fitted(built(candidates, None), candidates.provider_summaries, chosen, {})
    n = _first_cut(candidates, k, each, full, budget)
    fitting: tuple[list[int], CandidateSet, list[Any]] | None = None
    for _ in range(4):  # the estimate, then corrections from the real size
        keep = _kept(total, n, chosen)
        part = _subset(candidates, keep)
        requests = built(part, keep)
        size = size_of(requests) + size_of(part.provider_summaries)
        if size <= budget:
            fitting = (keep, part, requests)
            if size >= budget * 0.8 or len(keep) >= total - 1:
                break
        elif len(keep) == 1:
            fitting = (keep, part, requests)  # cannot be cut further: the worker refuses it
            break
        n = int(len(keep) * budget / size)
    if fitting is None:  # every correction overshot: take the smallest tried
        n = int(len(keep) * budget / size)
        keep = _kept(total, n, chosen)
        part = _subset(candidates, keep)
        fitting = (keep, part, built(part, keep))
    keep, part, requests = fitting
    note = {
        "truncated": True,
        "valid_candidates": total,
        "returned": len(keep),
        "max_envelope_bytes": limit,
    }
    at = keep.index(chosen) if chosen is not None else None
    return Fitted(requests, part.provider_summaries, at, note)


def _first_cut(candidates: CandidateSet, k: int, each: float, full: int, budget: float) -> int:
    """How many candidates the first cut keeps (``each``: a candidate's bytes, from the
    first ``k``; ``full``: the bytes of every tree's summaries).

    The summaries grow with the trees the kept candidates touch, at most to all of
    them: counted whole when they are small next to the budget, else per candidate as
    the probe's own summaries are.
    """
    if full <= budget / 2:
        return int((budget - full) / each)
    probe = _subset(candidates, range(k))
    return int(budget / (each + size_of(probe.provider_summaries) / k))


def rechosen(selection: Any, chosen: int | None) -> Any:
    """``selection`` with ``chosen`` pointing at the same candidate after a cut."""
    if selection is None or chosen is None:
        return selection
    return {**selection, "chosen": chosen}


__all__ = ["Fitted", "fit", "rechosen", "size_of"]
