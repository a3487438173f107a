"""`apportion demo`: the embedded default runs with no Redis at all."""

from __future__ import annotations

import itertools
import json
import re

from tests.acceptance.cli import apportion


def test_the_demo_runs_real_jobs_through_an_in_process_worker_without_redis() -> None:
    # Point Redis at a closed port: the demo must not need it.
    proc = apportion("demo", env={"APPORTION_REDIS_URL": "redis://127.0.0.1:1/0"})

    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "disks × spaces" in out
    assert "demo-partition-node1" in out
    assert "infeasible" in out
    assert "rejected" in out
    assert "result events" in out
    for kind in ("auto_attach", "guest_host_attach", "heal_org", "launch_select", "launch_outcome"):
        assert kind in out
    assert "failure-penalty dynamics" in out


def test_the_demo_publishes_one_event_per_job_even_when_a_job_is_sent_twice() -> None:
    proc = apportion("demo", "--json", env={"APPORTION_REDIS_URL": "redis://127.0.0.1:1/0"})

    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    job_ids = [e["job_id"] for e in data["events"]]
    answered = {e["job_id"] for e in data["envelopes"]}
    answered |= {f"demo-dynamics-{row['launch']}" for row in data["dynamics"]}
    # Some jobs were sent twice; each still has exactly one event.
    assert len(data["envelopes"]) > len({e["job_id"] for e in data["envelopes"]})
    assert len(job_ids) == len(set(job_ids))
    assert set(job_ids) == answered
    statuses = {e["job_id"]: e["status"] for e in data["envelopes"]}
    assert statuses["demo-partition-node1"] == "ok"
    assert statuses["demo-partition-too-small"] == "infeasible"
    assert statuses["demo-partition-malformed"] == "rejected"
    assert statuses["demo-attach-seed-example"] == "ok"
    assert statuses["demo-guest"] == "ok"
    assert statuses["demo-launch-policy"] == "ok"


def test_the_demo_shows_a_failing_account_losing_probability() -> None:
    proc = apportion("demo", "--json", env={"APPORTION_REDIS_URL": "redis://127.0.0.1:1/0"})

    rows = json.loads(proc.stdout)["dynamics"]
    # Every failure of the flaky account lowers its chance at the next launches.
    seen = [(r["failures_seen"], r["p_flaky"]) for r in rows]
    assert seen[-1][0] > seen[0][0]
    assert seen[-1][1] < seen[0][1]
    for (f1, p1), (f2, p2) in itertools.pairwise(seen):
        if f2 > f1:
            assert p2 < p1


def test_the_demos_sent_twice_recorded_once_step_shows_what_it_says() -> None:
    env = {"APPORTION_REDIS_URL": "redis://127.0.0.1:1/0"}
    text = apportion("demo", env=env).stdout
    data = json.loads(apportion("demo", "--json", env=env).stdout)

    # The step's title, and the lines under it up to the next step.
    after_title = text.split("(sent twice: recorded once)", 1)[1].split("\n", 1)[1]
    step = after_title.split("───", 1)[0]
    recorded = re.findall(r"recorded=(\w+)", step)
    times = re.search(r"in the failure history: (\d+) times?", step)
    # Its one answer, twice: recorded the first time; the history holds it once.
    assert recorded == ["True", "True"]
    assert times is not None
    assert times.group(1) == "1"
    event_id = next(e["job_id"] for e in data["envelopes"] if e["kind"] == "launch_outcome")
    answers = [e["result"] for e in data["envelopes"] if e["job_id"] == event_id]
    assert [a["recorded"] for a in answers] == [True, True]
    assert [f["event_id"] for f in data["launch_failures"]].count(event_id) == 1
