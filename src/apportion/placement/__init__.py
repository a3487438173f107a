"""Allocation candidates over nested provider trees (OpenStack Placement semantics).

``find_candidates(job, ctx)`` answers a Placement ``GET /allocation_candidates``
query over the job's providers; ``solve(job, ctx)`` wraps it as the
candidates-only launch_select solver (``policy: null``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from apportion.contracts.launch import LaunchSelectJob, LaunchSelectResult, cyclic_gc_paused
from apportion.errors import Infeasible, Problem
from apportion.limits import env_name
from apportion.placement.candidates import CandidateSet, find_candidates

if TYPE_CHECKING:
    from apportion.engine import Context

NO_CANDIDATES = "no allocation candidates"


def check_found(candidates: CandidateSet) -> None:
    """Raise :class:`Infeasible` when there is no candidate."""
    if not candidates.found:
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
        raise Infeasible(NO_CANDIDATES, problems)


def result_of(candidates: CandidateSet) -> LaunchSelectResult:
    """The wire result of ``candidates`` without a selection; Infeasible when empty."""
    check_found(candidates)
    return LaunchSelectResult(
        allocation_requests=candidates.build(),
        provider_summaries=candidates.provider_summaries,
        selection=None,
        extra=candidates.extra(),
    )


def solve(job: LaunchSelectJob, ctx: Context) -> LaunchSelectResult:
    """Candidates only: every allocation candidate, no selection (``policy`` is ignored)."""
    with cyclic_gc_paused():
        return result_of(find_candidates(job, ctx))


__all__ = ["NO_CANDIDATES", "CandidateSet", "check_found", "find_candidates", "result_of", "solve"]
