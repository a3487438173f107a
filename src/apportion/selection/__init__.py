"""Launch selection: policy modules, priority groups and the dice.

Pure: the failure counts, the clock and the seed are inputs. Entry points:
:func:`apply_policy` (over built AllocationRequests) and :func:`choose` (over a
:class:`Pool`, what launch_select runs before it builds each request once).
"""

from apportion.selection.policy import (
    Choice,
    PolicyOutcome,
    Pool,
    apply_policy,
    check_policy,
    choose,
    failure_window_hours,
    parse_policy,
)

__all__ = [
    "Choice",
    "PolicyOutcome",
    "Pool",
    "apply_policy",
    "check_policy",
    "choose",
    "failure_window_hours",
    "parse_policy",
]
