"""``apportion solve`` keeps the cyclic collector off the input and each job's objects."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from apportion.cli.solve import collector_paused
from tests.support.processes import probe

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "launch_select.candidates.json"

# Counts every collection in the process from `main()` on (imports and settings included:
# the tests compare one job with many, so those cancel out).
PROBE = """
import gc, sys
from apportion.cli import main
runs = []
gc.callbacks.append(lambda phase, info: phase == "stop" and runs.append(info["generation"]))
sys.argv = ["apportion", "solve", "launch_select", sys.argv[1]]
sys.stdout = open("/dev/null", "w")
try:
    main()
except SystemExit:
    pass
print(len(runs), file=sys.stderr)
"""


def collections_while_solving(path: Path) -> int:
    return int(probe(PROBE, str(path)))


def test_solving_more_jobs_runs_no_more_collections(tmp_path: Path) -> None:
    job = json.loads(EXAMPLE.read_text())
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    one.write_text(json.dumps([job]))
    many.write_text(json.dumps([job] * 100))

    assert collections_while_solving(many) == collections_while_solving(one)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_paused_block_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_a_paused_block_resumes_the_collector_when_it_raises() -> None:
    assert gc.isenabled()
    with pytest.raises(ValueError, match="odd job"), collector_paused():
        raise ValueError("odd job")

    assert gc.isenabled()
