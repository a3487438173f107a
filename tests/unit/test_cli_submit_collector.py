"""``apportion submit`` reads its jobs as ``apportion solve`` does: the collector paused."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.processes import probe

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "launch_select.candidates.json"

# Counts every collection in the process from `main()` until the jobs are sent (imports
# and settings included: the test compares one job with many, so those cancel out). The
# send itself is replaced: no Redis is needed to read.
PROBE = """
import gc, sys
import apportion.workers.submit as submit
from apportion.cli import main
runs = []
gc.callbacks.append(lambda phase, info: phase == "stop" and runs.append(info["generation"]))

def send(settings, task_name, jobs, **options):
    print(len(runs), len(jobs), options["plain"], file=sys.stderr)
    raise SystemExit(0)

submit.send = send
sys.argv = ["apportion", "submit", "launch_select", sys.argv[1]]
main()
"""


def collections_before_sending(path: Path) -> tuple[int, int, bool]:
    runs, jobs, plain = probe(PROBE, str(path)).split()
    return int(runs), int(jobs), plain == "True"


def test_reading_more_jobs_runs_no_more_collections_and_they_go_out_as_plain_json(
    tmp_path: Path,
) -> None:
    job = json.loads(EXAMPLE.read_text())
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    one.write_text(json.dumps([job]))
    many.write_text(json.dumps([job] * 200))

    runs_one, _, _ = collections_before_sending(one)
    runs_many, jobs, plain = collections_before_sending(many)

    assert (runs_many, jobs, plain) == (runs_one, 200, True)


def test_a_job_the_text_does_not_vouch_for_goes_out_through_kombus_encoder(
    tmp_path: Path,
) -> None:
    job = json.loads(EXAMPLE.read_text())
    escaped = tmp_path / "escaped.json"
    # A ':' written as an escape: orjson's quick bounds step aside, the strict decoder reads it.
    escaped.write_text(json.dumps(job).replace('"job_id": "', '"job_id": "a\\u003a', 1))

    assert collections_before_sending(escaped)[1:] == (1, False)
