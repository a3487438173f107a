"""docs/contract.md works from the page: the producer and waiting caller it prints, in
Python (redis-py, no Celery) and in Node.js, are taken out of the document as they are
(by their ``<!-- example: NAME -->`` markers, never re-typed here), written to files and
run against a real worker and a real redis-server, as another team would run them.

The queue item the page shows is pushed as it is, and the fields it documents for the
result backend's JSON and the dead letters are the ones a worker writes.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apportion.kinds.builtin import BUILTIN
from bench.bench_placement import SIMPLE, numa_cloud
from tests.conftest import EXAMPLES, load_example
from tests.integration.test_interop import NODE_PRODUCER, _node
from tests.support.gen_docs import without_timing
from tests.support.processes import REPO, RedisServer, Worker, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.worker]

CONTRACT = (REPO / "docs" / "contract.md").read_text()
LANGUAGES = ["python", "node"]


def code_block(marker: str) -> str:
    """The code block right after ``<!-- example: marker -->`` in docs/contract.md."""
    match = re.search(
        rf"<!-- example: {re.escape(marker)} -->\n```[a-z]*\n(.*?)\n```\n", CONTRACT, re.DOTALL
    )
    assert match is not None, f"docs/contract.md has no code block marked {marker!r}"
    return match.group(1) + "\n"


def table(heading: str, first_column: str) -> set[str]:
    """The backticked names in the first column of the first table under ``heading``
    whose header starts with ``first_column``."""
    section = CONTRACT.split(heading + "\n", 1)[1]
    rows = section.split(f"| {first_column} |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return {name for row in rows for name in re.findall(r"`([^`]+)`", row.split(" | ", 1)[0])}


Run = Callable[[str, dict[str, Any]], subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def page_programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The command that runs each language's program, as the page prints it."""
    folder = tmp_path_factory.mktemp("from-the-page")
    (folder / "send_job.py").write_text(code_block("python-producer"))
    (folder / "send-job.mjs").write_text(code_block("node-producer"))
    node = _node()  # installs the npm `redis` client into examples/node-producer
    # What `npm install redis@4` beside the program gives: the same client.
    (folder / "node_modules").symlink_to(NODE_PRODUCER / "node_modules")
    return {
        "python": [sys.executable, str(folder / "send_job.py")],
        "node": [node, str(folder / "send-job.mjs")],
    }


@pytest.fixture
def run(
    page_programs: dict[str, list[str]],
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    worker: Worker,
    tmp_path: Path,
) -> Run:
    language: str = request.param

    def run(kind: str, job: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        job_file = tmp_path / f"{uuid.uuid4()}.json"
        job_file.write_text(json.dumps(job))
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPORTION_")}
        return subprocess.run(
            [*page_programs[language], kind, str(job_file)],
            cwd=tmp_path,
            env={**env, "APPORTION_REDIS_URL": redis_server.url},
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


def fresh(name: str) -> dict[str, Any]:
    job: dict[str, Any] = load_example(f"{name}.json")
    job["job_id"] = f"page-{uuid.uuid4()}"
    return job


@pytest.mark.parametrize("run", LANGUAGES, indirect=True)
def test_the_pages_producer_gets_the_examples_envelope_from_the_result_stream(run: Run) -> None:
    job = fresh("partition")

    proc = run("partition", job)

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["source"] == "stream"
    expected = json.loads((EXAMPLES / "partition.envelope.json").read_text())
    expected["job_id"] = job["job_id"]
    assert without_timing(out["envelope"]) == without_timing(expected)


@pytest.mark.parametrize("run", LANGUAGES, indirect=True)
def test_the_pages_producer_reads_a_big_envelope_the_stream_entry_refers_to(
    run: Run, redis_server: RedisServer
) -> None:
    # 100 hosts of 2 NUMA nodes and one sharing disk: 400 candidates, ~150 KB of JSON.
    job = {"job_id": f"page-{uuid.uuid4()}", "providers": numa_cloud(100), "request": SIMPLE}

    proc = run("launch_select", job)

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["source"] == "stream"
    assert out["envelope"]["status"] == "ok"
    assert len(out["envelope"]["result"]["allocation_requests"]) == 400
    # Kept once: in the result backend, which the stream entry names.
    client = redis_server.client()
    [(_, fields)] = [
        (i, f)
        for i, f in client.xrange("apportion:results:launch_select")
        if f[b"job_id"] == job["job_id"].encode()
    ]
    key = f"celery-task-meta-{out['task_id']}"
    assert b"envelope" not in fields
    assert fields[b"envelope_key"] == key.encode()
    assert json.loads(client.get(key))["result"] == out["envelope"]
    assert client.ttl(key) > 86_400 - 60  # as long as the stream keeps its entries


@pytest.mark.parametrize("run", LANGUAGES, indirect=True)
def test_the_pages_caller_reads_a_job_sent_again_from_the_result_backend(
    run: Run, redis_server: RedisServer
) -> None:
    job = fresh("partition")
    first = json.loads(run("partition", job).stdout)

    again = run("partition", job)

    # One entry per job_id on the stream: the second message's answer is its own, under
    # its own task id, in the result backend.
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["source"] == "backend"
    assert second["task_id"] != first["task_id"]
    assert without_timing(second["envelope"]) == without_timing(first["envelope"])


@pytest.mark.parametrize("run", LANGUAGES, indirect=True)
def test_the_pages_producer_gets_a_rejected_envelope_naming_the_field(run: Run) -> None:
    proc = run("partition", {"job_id": f"page-bad-{uuid.uuid4()}", "schema": "nope"})

    assert proc.returncode == 4, proc.stderr
    envelope = json.loads(proc.stdout)["envelope"]
    assert envelope["status"] == "rejected"
    assert envelope["error"]["code"] == "invalid_job"
    assert "schema" in {d["path"].split("[")[0] for d in envelope["error"]["details"]}


@pytest.mark.parametrize("run", LANGUAGES, indirect=True)
def test_the_pages_producer_reports_a_launch_outcome_without_a_time(run: Run) -> None:
    event = load_example("launch_outcome.json")
    event["event_id"] = f"page-evt-{uuid.uuid4()}"

    proc = run("launch_outcome", event)

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["source"] == "stream"
    assert out["envelope"]["job_id"] == event["event_id"]
    assert out["envelope"]["result"]["recorded"] is True


@pytest.mark.parametrize("run", ["python"], indirect=True)
def test_the_result_backends_json_has_exactly_the_fields_the_page_documents(
    run: Run, redis_server: RedisServer
) -> None:
    out = json.loads(run("partition", fresh("partition")).stdout)

    client = redis_server.client()
    try:
        stored = json.loads(client.get(f"celery-task-meta-{out['task_id']}") or b"null")
    finally:
        client.close()

    assert set(stored) == table("### Waiting for the answer", "field")
    assert stored["status"] == "SUCCESS"
    assert stored["result"] == out["envelope"]
    assert stored["task_id"] == out["task_id"]
    assert stored["traceback"] is None
    assert stored["children"] == []


def test_the_pages_queue_item_is_answered_as_printed(
    worker: Worker, redis_server: RedisServer
) -> None:
    item = json.loads(code_block("queue-item"))
    task_id = item["headers"]["id"]
    client = redis_server.client()
    try:
        client.delete(f"celery-task-meta-{task_id}")
        client.lpush(item["properties"]["delivery_info"]["routing_key"], json.dumps(item))
        wait_until(lambda: client.exists(f"celery-task-meta-{task_id}"), 60, what="the answer")
        stored = json.loads(client.get(f"celery-task-meta-{task_id}") or b"null")
    finally:
        client.close()

    assert stored["status"] == "SUCCESS"
    assert stored["result"]["job_id"] == "from-the-page-1"
    assert stored["result"]["status"] == "ok"
    # The body is the call the page says it is.
    call = json.loads(base64.b64decode(item["body"]))
    assert call[0][0]["job_id"] == "from-the-page-1"
    assert call[1:] == [{}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]


def test_an_item_without_the_required_properties_is_dead_lettered_as_the_page_says(
    worker: Worker, redis_server: RedisServer
) -> None:
    item = json.loads(code_block("queue-item"))
    task_id = str(uuid.uuid4())
    item["headers"]["id"] = task_id
    del item["properties"]["delivery_tag"]
    client = redis_server.client()
    try:
        client.lpush("partition", json.dumps(item))

        def buried() -> dict[str, str] | None:
            for _, raw in client.xrange("apportion:dead-letters"):
                fields = {k.decode(): v.decode(errors="replace") for k, v in raw.items()}
                if fields.get("task_id") == task_id:
                    return fields
            return None

        wait_until(lambda: buried() is not None, 60, what="the dead letter")
        letter = buried()
        assert letter is not None
        assert not client.exists(f"celery-task-meta-{task_id}")  # no answer: the page says so
    finally:
        client.close()

    assert letter["reason"] == "bad_properties"
    assert letter["reason"] in table("## Dead letters", "reason")
    assert set(letter) - {"message"} <= _dead_letter_fields()


def _dead_letter_fields() -> set[str]:
    section = CONTRACT.split("## Dead letters\n", 1)[1].split("\n| reason |", 1)[0]
    return set(re.findall(r"`([a-z_]+)`", section))


def test_every_reason_a_worker_dead_letters_with_is_in_the_pages_table() -> None:
    sources = "".join(
        (REPO / "workers" / "broker" / name).read_text() for name in ("gate.py", "transport.py")
    )
    reasons = set(re.findall(r'_Refused\(\s*"([a-z_]+)"', sources))
    reasons |= set(re.findall(r'Bury\(\s*"([a-z_]+)"', sources))
    reasons |= set(re.findall(r'reason="([a-z_]+)"', sources))

    assert {"bad_properties", "not_json", "quarantined", "undecodable"} <= reasons
    assert reasons - table("## Dead letters", "reason") == set()


def test_the_pages_programs_need_redis_and_nothing_else() -> None:
    tree = ast.parse(code_block("python-producer"))
    modules = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    node_program = code_block("node-producer")
    node_imports = set(re.findall(r'^import .* from "([^"]+)";$', node_program, re.M))

    assert modules - set(sys.stdlib_module_names) == {"redis"}
    assert {m for m in node_imports if not m.startswith("node:")} == {"redis"}


def test_the_pages_programs_know_every_kinds_queue() -> None:
    # The built-in kinds (a deployment's own kinds are its own producers' business).
    queues = {kind.name: kind.queue for kind in BUILTIN}
    python_queues = ast.literal_eval(
        code_block("python-producer").split("QUEUES = ", 1)[1].split("\n}\n", 1)[0] + "\n}"
    )
    node_queues = dict(
        re.findall(
            r"^  ([a-z_]+): \"([a-z_]+)\",$",
            code_block("node-producer").split("const QUEUES = {", 1)[1].split("};", 1)[0],
            re.M,
        )
    )

    assert python_queues == queues
    assert node_queues == queues


def test_the_pages_queue_item_passes_the_gate() -> None:
    from apportion.workers.broker.gate import Deliver, GateRules, inspect

    verdict = inspect(code_block("queue-item"), GateRules())

    assert isinstance(verdict, Deliver), verdict
    assert verdict.verdict is None


def test_the_pages_shell_recipe_sends_a_job_and_prints_its_stored_answer(
    worker: Worker, redis_server: RedisServer, tmp_path: Path
) -> None:
    script = tmp_path / "send-job.sh"
    script.write_text(code_block("shell-producer"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPORTION_")}

    proc = subprocess.run(
        ["bash", "-eu", str(script)],
        env={**env, "APPORTION_REDIS_URL": redis_server.url},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert proc.returncode == 0, proc.stderr
    stored = json.loads(proc.stdout.splitlines()[-1])
    assert stored["status"] == "SUCCESS"
    assert stored["result"]["job_id"] == "from-the-shell-1"
    assert stored["result"]["status"] == "ok"
