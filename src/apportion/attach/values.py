"""Reading syspurpose values with the reference's conventions.

Candlepin keeps every attribute and fact as a string; the numbers among them are checked
at the edge (:mod:`apportion.contracts.attach_checks`), so the engines read them as they
are.
"""

from __future__ import annotations


def split_values(raw: str | None) -> frozenset[str]:
    """A syspurpose value list: comma separated, trimmed, compared case-insensitively."""
    if raw is None:
        return frozenset()
    return frozenset(part.strip().lower() for part in raw.split(",") if part.strip())
