"""Launch selection: policy modules, priority groups and the dice (SPEC.md §2.3).

Pure: the failure counts, the clock and the seed are inputs. Entry point:
:func:`apply_policy`.
"""

from apportion.selection.policy import (
    PolicyOutcome,
    apply_policy,
    check_policy,
    failure_window_hours,
    parse_policy,
)

__all__ = [
    "PolicyOutcome",
    "apply_policy",
    "check_policy",
    "failure_window_hours",
    "parse_policy",
]
