"""Sample sizes for the property tests that compare a quick route with the slow one it
stands in for (yaql's own evaluation, the walk with paths, a search, highs, auto_attach
one consumer at a time).

Each draws a sample sized for a run of the whole suite on two cores, and hypothesis
draws a fresh one every run. `pytest --hypothesis-profile=deep` (registered in
tests/conftest.py) draws ten times as many, as after a change to a quick route.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings

# The number of examples hypothesis draws by default: a profile that changes it scales
# every comparison's sample alike.
HYPOTHESIS_DEFAULT_EXAMPLES = 100


def comparison(examples: int, **options: Any) -> settings:
    """Hypothesis settings drawing ``examples`` examples, scaled by the active profile."""
    scale = settings.default.max_examples / HYPOTHESIS_DEFAULT_EXAMPLES
    return settings(max_examples=max(1, round(examples * scale)), **options)
