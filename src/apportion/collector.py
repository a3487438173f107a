"""The cyclic garbage collector paused around a job: one policy for every path.

Decoding a job, validating it, solving it and encoding its answer each allocate tens of
thousands of containers that stay alive until the job is answered and hold no reference
cycle (tests/unit/test_no_cycles.py): the collections those allocations trigger walk
them again and again and free nothing, at a cost that grows with the job. So every path
that runs a job pauses the collector for it, the same way: ``apportion solve``
(apportion/cli/solve.py), a worker's pool child (tasks/jobs.py) and the JSON decoding of
messages and results (workers/results/fast_json.py). What a job leaves behind is freed
by reference counting when it is answered, and any cycle at the collector's next pass.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector's state is restored after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


__all__ = ["collector_paused"]
