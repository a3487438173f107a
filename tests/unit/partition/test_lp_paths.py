"""The direct HiGHS call and scipy's public linprog solve the same LP to the same optimum."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from apportion.contracts.partition import PartitionJob
from apportion.engine import Context
from apportion.partition import dynamic, lp, model, schema
from tests.unit.partition.test_properties import jobs


def _problem(data: dict[str, Any]) -> model.Problem:
    limits = Context().limits
    parsed = schema.parse(PartitionJob.model_validate(data), limits)
    return model.build(parsed.disks, dynamic.resolve(parsed, limits).spaces)


@pytest.mark.skipif(lp._HIGHS is None, reason="this scipy has no direct HiGHS binding")
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs())
def test_the_direct_highs_path_reaches_linprogs_optimum(generated: Any) -> None:
    data = generated[0]
    try:
        problem = _problem(data)
    except Exception:  # rejected schemas never reach the LP
        return
    upper, equal = lp.upper_rows(problem), lp.equality_rows(problem)

    direct = lp.linprog(problem, upper, equal)
    public = lp.linprog_public(problem, upper, equal)

    assert (direct is None) == (public is None)
    if direct is not None and public is not None:
        assert float(problem.objective @ direct) == pytest.approx(
            float(problem.objective @ public), rel=1e-9, abs=1e-6
        )
        assert np.all(direct >= -1e-7)
