"""Allocation candidates over nested provider trees (OpenStack Placement semantics).

``find_candidates(job, ctx)`` answers a Placement ``GET /allocation_candidates``
query over the job's providers; ``solve(job, ctx)`` wraps it as the
candidates-only launch_select solver (``policy: null``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from apportion.contracts.launch import LaunchSelectJob, LaunchSelectResult, launch_result
from apportion.errors import Infeasible, Problem
from apportion.limits import env_name
from apportion.placement.candidates import SHOWN_UNUSABLE, CandidateSet, find_candidates

if TYPE_CHECKING:
    from apportion.context import Context

NO_CANDIDATES = "no allocation candidates"


def check_found(candidates: CandidateSet) -> None:
    """Raise :class:`Infeasible` when there is no candidate, naming what may explain it."""
    if candidates.found:
        return
    problems = []
    if candidates.search_exhausted:
        problems.append(
            Problem(
                "request",
                "the search stopped after its budget of choices without finding a "
                "candidate; narrow the request (or raise "
                f"{env_name('max_candidate_search_steps')})",
            )
        )
    # An inventory of a requested class that fits nothing may be why nothing was found.
    unusable = [u for u in candidates.forest.unusable if u.resource_class in candidates.requested]
    problems += [
        Problem(f"providers[{u.provider}].inventories.{u.resource_class}", u.reason)
        for u in unusable[:SHOWN_UNUSABLE]
    ]
    raise Infeasible(NO_CANDIDATES, problems)


def result_of(candidates: CandidateSet) -> LaunchSelectResult:
    """The wire result of ``candidates`` without a selection; Infeasible when empty."""
    check_found(candidates)
    return launch_result(
        candidates.build(), candidates.provider_summaries, None, candidates.extra()
    )


def solve(job: LaunchSelectJob, ctx: Context) -> LaunchSelectResult:
    """Candidates only: every allocation candidate, no selection (``policy`` is ignored)."""
    return result_of(find_candidates(job, ctx))


__all__ = ["NO_CANDIDATES", "CandidateSet", "check_found", "find_candidates", "result_of", "solve"]
