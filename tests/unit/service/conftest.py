"""Fixtures for every test of this folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apportion.workers.results import answers


@pytest.fixture(autouse=True)
def no_soft_limit_hold_left() -> Iterator[None]:
    """A job task run in the test process holds the soft time limit from publishing on
    (answers.hold_soft_limit); a worker releases it at ``task_postrun``, which a test
    calling the task does not send. Released here so that no later test in the same
    process finds the limit held (or SIGUSR1 replaced)."""
    yield
    answers.release_soft_limit()
