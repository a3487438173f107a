"""The studio's HTTP API: the engine's numbers, saves, and who may call it.

Starlette's TestClient against the real app, with the real PolicyStore on fakeredis
(the browser and a real worker are tests/browser/).
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from starlette.testclient import TestClient

from apportion.contracts.launch import LaunchSelectJob
from apportion.engine import Context, validate
from apportion.engine_settings import load_default_policy
from apportion.launch import solve
from apportion.limits import DEFAULT_LIMITS
from apportion.workers.policies.store import MAX_AUTHOR, MAX_COMMENT, PolicyStore
from apportion.workers.redis.keys import Keys
from apportion.workers.studio.app import Studio, StudioConfig, create_app
from apportion.workers.studio.guard import check_bind, check_origin
from apportion.workers.studio.recent import RecentJobs
from tests.conftest import EXAMPLES, load_example

ORIGIN = "http://127.0.0.1:8765"
SAME = {"X-Apportion-Studio": "1"}
UPLOAD = {**SAME, "Content-Type": "application/json"}
EXAMPLE = "example:launch_select.json"
TOKEN = "s3cret-token-for-tests"
DEFAULT = [
    {"module": "equal"},
    {"module": "weights"},
    {"module": "failure_penalty", "percent": 5, "window_hours": 6},
    {"module": "priority", "mode": "strict"},
]


def make_client(
    token: str | None = None, recent: RecentJobs | None = None, **config: Any
) -> tuple[TestClient, PolicyStore]:
    store = PolicyStore(fakeredis.FakeRedis())
    studio = Studio(
        StudioConfig(
            limits=DEFAULT_LIMITS,
            token=token,
            examples=EXAMPLES,
            config_policy=load_default_policy(),
            recent_jobs=None if recent is None else recent.jobs,
            **config,
        ),
        store,
    )
    return TestClient(create_app(studio), base_url=ORIGIN), store


@pytest.fixture
def client() -> TestClient:
    return make_client()[0]


def picked(client: TestClient, ident: str = EXAMPLE) -> dict[str, Any]:
    response = client.post("/api/deployables/select", json={"id": ident}, headers=SAME)
    assert response.status_code == 200, response.text
    summary: dict[str, Any] = response.json()
    return summary


def evaluate(client: TestClient, policy: Any, ident: str = EXAMPLE) -> Any:
    picked(client, ident)
    return client.post("/api/evaluate", json={"deployable": ident, "policy": policy}, headers=SAME)


def engine_selection(job: dict[str, Any]) -> Any:
    parsed = validate("launch_select", job)
    assert isinstance(parsed, LaunchSelectJob)
    return solve(parsed, Context())["selection"]


# ---- the numbers are the engine's ------------------------------------------------------


def test_the_example_shows_the_engines_groups_and_trace(client: TestClient) -> None:
    answer = evaluate(client, DEFAULT).json()

    assert [g["priority"] for g in answer["groups"]] == [0, 1]
    assert answer["groups"][0]["probabilities"] == pytest.approx(
        {"vsphere-a": 8 / 13, "vsphere-b": 5 / 13}
    )
    assert answer["groups"][1]["probabilities"] == {"ec2": 1.0}
    assert [step["module"] for step in answer["trace"]] == [m["module"] for m in DEFAULT]
    job = load_example("launch_select.json")
    selection = engine_selection(job)
    assert answer["groups"] == selection["groups"]
    assert answer["trace"] == selection["trace"]
    assert answer["chosen_account"] == selection["account"] == "vsphere-b"
    assert answer["no_chance"] == []
    assert answer["failures_source"] == "job"


def test_switching_off_failure_penalty_changes_the_trace(client: TestClient) -> None:
    without = [m for m in DEFAULT if m["module"] != "failure_penalty"]
    answer = evaluate(client, without).json()

    assert [step["module"] for step in answer["trace"]] == ["equal", "weights", "priority"]
    assert answer["groups"][0]["probabilities"] == pytest.approx(
        {"vsphere-a": 2 / 3, "vsphere-b": 1 / 3}
    )


def test_a_weight_moved_on_the_page_is_the_weights_modules_map(client: TestClient) -> None:
    policy = copy.deepcopy(DEFAULT)
    policy[1]["weights"] = {"vsphere-b": 2}
    answer = evaluate(client, policy).json()

    a, b = (answer["groups"][0]["probabilities"][x] for x in ("vsphere-a", "vsphere-b"))
    # Both weigh 2 now (0.4 each, ec2 0.2); vsphere-a's two failures cost it 10 points.
    assert (a, b) == pytest.approx((3 / 7, 4 / 7))


def test_accounts_that_lose_every_chance_are_listed_with_the_reason(client: TestClient) -> None:
    job = load_example("launch_select.json")
    job["exclude_accounts"] = ["ec2"]
    job["accounts"]["vsphere-b"]["enabled"] = False
    job["accounts"]["solo"] = {"priority": 10}
    job["providers"].append({**job["providers"][0], "uuid": "solo-host", "account": "solo"})
    up = client.post("/api/deployables/upload?name=t.json", content=json.dumps(job), headers=UPLOAD)
    ident = up.json()["id"]
    policy = [{"module": "equal"}, {"module": "expression", "expression": "$.id != 'solo'"}]

    answer = client.post(
        "/api/evaluate", json={"deployable": ident, "policy": policy}, headers=SAME
    ).json()

    assert answer["no_chance"] == [
        {"account": "ec2", "why": "excluded by the job (exclude_accounts)"},
        {"account": "solo", "why": "probability 0 from policy[1] (expression) on"},
        {"account": "vsphere-b", "why": "disabled (enabled: false)"},
    ]
    assert answer["groups"][0]["probabilities"] == {"solo": 0.0, "vsphere-a": 1.0}


def test_simulated_launches_are_what_jobs_with_those_seeds_are_given(client: TestClient) -> None:
    picked(client)
    answer = client.post(
        "/api/simulate",
        json={"deployable": EXAMPLE, "policy": DEFAULT, "launches": 40, "seed": 100},
        headers=SAME,
    ).json()

    job = load_example("launch_select.json")
    engine: Counter[str] = Counter()
    for seed in range(100, 140):
        engine[engine_selection({**job, "seed": seed})["account"]] += 1
    assert answer["counts"] == {"vsphere-a": engine["vsphere-a"], "vsphere-b": engine["vsphere-b"]}
    assert sum(answer["counts"].values()) == 40
    assert answer["expected"] == pytest.approx({"vsphere-a": 8 / 13, "vsphere-b": 5 / 13})


# ---- what the engine refuses ---------------------------------------------------------------


def test_a_hostile_expression_is_stopped_by_the_engines_limits(client: TestClient) -> None:
    policy = [
        {"module": "equal"},
        {"module": "expression", "expression": "range(0, 100000000).len()"},
    ]
    started = time.monotonic()
    response = evaluate(client, policy)

    assert time.monotonic() - started < 15  # the yaql time limit, not a hang
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "bad_expression"
    assert error["details"][0]["path"] == "policy[1].expression"
    assert "time limit" in error["details"][0]["message"]


def test_an_expression_reaching_for_python_internals_is_refused(client: TestClient) -> None:
    policy = [{"module": "equal"}, {"module": "expression", "expression": "$.__class__"}]
    response = evaluate(client, policy)

    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "policy[1].expression"


def test_a_policy_without_a_base_module_names_the_module(client: TestClient) -> None:
    response = evaluate(client, [{"module": "weights"}])

    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "policy[0].module"


def test_a_mistyped_parameter_is_refused_as_the_store_would(client: TestClient) -> None:
    response = evaluate(client, [{"module": "equal"}, {"module": "failure_penalty", "percnt": 5}])

    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "policy[1].percnt"


def test_simulations_are_bounded(client: TestClient) -> None:
    picked(client)
    for launches in (0, 10_001, "many", True):
        response = client.post(
            "/api/simulate",
            json={"deployable": EXAMPLE, "policy": DEFAULT, "launches": launches},
            headers=SAME,
        )
        assert response.status_code == 422
        assert response.json()["error"]["details"][0]["path"] == "launches"


def test_an_unknown_deployable_is_named(client: TestClient) -> None:
    response = client.post(
        "/api/evaluate", json={"deployable": "upload:nope", "policy": DEFAULT}, headers=SAME
    )
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "deployable"


# ---- uploads -------------------------------------------------------------------------------


def test_an_uploaded_job_is_validated_as_a_worker_validates_it(client: TestClient) -> None:
    job = load_example("launch_select.json")
    job["providers"][1]["inventories"]["VCPU"]["total"] = -1

    response = client.post("/api/deployables/upload", content=json.dumps(job), headers=UPLOAD)

    assert response.status_code == 422
    details = response.json()["error"]["details"]
    assert [d["path"] for d in details] == ["providers[1].inventories.VCPU.total"]


def test_an_upload_that_is_not_json_is_refused(client: TestClient) -> None:
    response = client.post("/api/deployables/upload", content=b"{not json", headers=UPLOAD)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "malformed_json"


def test_an_upload_over_the_size_limit_is_refused_unread() -> None:
    client, _ = make_client(max_upload_bytes=1000)
    job = json.dumps(load_example("launch_select.json"))

    response = client.post("/api/deployables/upload", content=job, headers=UPLOAD)

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert "1000 bytes" in response.json()["error"]["message"]


def test_an_uploaded_job_is_offered_again_and_evaluates(client: TestClient) -> None:
    job = load_example("launch_select.json")
    up = client.post(
        "/api/deployables/upload?name=mine.json", content=json.dumps(job), headers=UPLOAD
    )
    assert up.status_code == 200
    summary = up.json()
    assert summary["label"] == "uploaded: mine.json"
    assert summary["accounts"] == ["ec2", "vsphere-a", "vsphere-b"]
    assert summary["candidates"] == 4

    state = client.get("/api/state").json()
    assert {"id": summary["id"], "label": "uploaded: mine.json", "source": "upload"} in state[
        "loaded"
    ]
    response = client.post(
        "/api/evaluate", json={"deployable": summary["id"], "policy": DEFAULT}, headers=SAME
    )
    assert response.json()["groups"][0]["probabilities"] == pytest.approx(
        {"vsphere-a": 8 / 13, "vsphere-b": 5 / 13}
    )


def test_recent_launch_select_jobs_are_offered() -> None:
    recent = RecentJobs(fakeredis.FakeRedis(), Keys(), keep=2, max_bytes=100_000, ttl_seconds=60)
    job = load_example("launch_select.json")
    for n in range(3):
        assert recent.remember({**job, "job_id": f"recent-{n}"})
    assert not recent.remember({**job, "job_id": "huge", "pad": "x" * 100_000})
    client, _ = make_client(recent=recent)

    offered = [d for d in client.get("/api/state").json()["deployables"] if d["source"] == "recent"]

    assert [d["label"] for d in offered] == ["recent: recent-2", "recent: recent-1"]
    assert picked(client, offered[0]["id"])["job_id"] == "recent-2"


# ---- policies and saves ------------------------------------------------------------------


def test_a_pool_without_a_policy_shows_the_default_it_inherits() -> None:
    client, store = make_client()
    assert client.get("/api/policy?pool=gpu").json()["current"]["author"] == (
        "config/default_policy.yaml"
    )
    store.save("default", DEFAULT[:2], author="ops")

    answer = client.get("/api/policy?pool=gpu").json()

    assert answer["current"]["pool"] == "default"
    assert answer["current"]["version"] == 1
    assert answer["history"] == []


def test_a_save_writes_a_new_version_with_its_author_and_comment() -> None:
    client, store = make_client()
    for n in (1, 2):
        response = client.post(
            "/api/save",
            json={"pool": "gpu", "policy": DEFAULT, "author": "ana", "comment": f"try {n}"},
            headers=SAME,
        )
        assert response.status_code == 200, response.text
        assert response.json()["saved"]["version"] == n

    current = store.current("gpu")
    assert current is not None
    assert (current.version, current.author, current.comment) == (2, "ana", "try 2")
    assert current.policy == DEFAULT
    history = client.get("/api/policy?pool=gpu").json()["history"]
    assert [v["version"] for v in history] == [2, 1]
    assert "gpu" in client.get("/api/state").json()["pools"]


def test_a_save_the_store_refuses_names_the_field() -> None:
    client, store = make_client()
    response = client.post(
        "/api/save",
        json={"pool": "gpu", "policy": [{"module": "priority"}], "author": "ana"},
        headers=SAME,
    )
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "policy[0].module"
    bad_pool = client.post(
        "/api/save", json={"pool": "no spaces", "policy": DEFAULT, "author": "a"}, headers=SAME
    )
    assert bad_pool.json()["error"]["details"][0]["path"] == "pool"
    assert store.current("gpu") is None


# ---- security ----------------------------------------------------------------------------


def test_with_a_token_every_api_call_needs_it() -> None:
    client, store = make_client(token=TOKEN)
    save = {"pool": "gpu", "policy": DEFAULT, "author": "ana"}

    assert client.get("/api/state").status_code == 401
    assert client.get("/api/state", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/api/save", json=save, headers=SAME).status_code == 401
    assert store.current("gpu") is None

    auth = {**SAME, "Authorization": f"Bearer {TOKEN}"}
    assert client.get("/api/state", headers=auth).status_code == 200
    assert client.post("/api/save", json=save, headers=auth).status_code == 200
    # The page itself carries no data and loads without it.
    assert client.get("/").status_code == 200


@pytest.mark.parametrize(
    ("headers", "content_type", "status"),
    [
        ({}, "application/json", 403),  # no custom header: a form or a no-cors fetch
        (SAME, "application/x-www-form-urlencoded", 415),
        (SAME, "text/plain", 415),
        ({**SAME, "Origin": "https://evil.example"}, "application/json", 403),
        ({**SAME, "Origin": "null"}, "application/json", 403),
        ({**SAME, "Sec-Fetch-Site": "cross-site"}, "application/json", 403),
        ({**SAME, "Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"}, "application/json", 200),
    ],
)
def test_cross_site_changes_are_refused(
    headers: dict[str, str], content_type: str, status: int
) -> None:
    client, store = make_client()
    body = json.dumps({"pool": "gpu", "policy": DEFAULT, "author": "mallory"})

    response = client.post(
        "/api/save", content=body, headers={**headers, "Content-Type": content_type}
    )

    assert response.status_code == status
    assert (store.current("gpu") is not None) == (status == 200)


def test_a_loopback_studio_answers_only_loopback_host_names(client: TestClient) -> None:
    # DNS rebinding: a page on evil.example re-pointed at 127.0.0.1 sends its own Host.
    assert client.get("/api/state", headers={"Host": "evil.example:8765"}).status_code == 421
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
        assert client.get("/api/state", headers={"Host": host}).status_code == 200


def test_binding_beyond_loopback_needs_a_long_token() -> None:
    for host in ("127.0.0.1", "localhost", "::1"):
        check_bind(host, None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(ValueError, match="without a token"):
        check_bind("0.0.0.0", None)
    with pytest.raises(ValueError, match="without a token"):
        check_bind("192.0.2.10", None)
    with pytest.raises(ValueError, match="at least 16"):
        check_bind("127.0.0.1", "short")


def test_the_page_loads_nothing_from_outside_the_package(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "http://" not in page.text
    assert "https://" not in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "script-src 'self'" in csp
    static = Path(__file__).resolve().parents[3] / "workers/studio/static"
    for name in ("chart.umd.min.js", "studio.js", "studio.css"):
        assert client.get(f"/static/{name}").status_code == 200
        assert "//cdn" not in (static / name).read_text()
    assert "MIT License" in (static / "chart.js.LICENSE.md").read_text()


def test_the_command_refuses_a_public_address_without_a_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from apportion.cli import main

    monkeypatch.delenv("APPORTION_STUDIO_TOKEN", raising=False)
    # Refused before any connection: the Redis URL points nowhere.
    monkeypatch.setenv("APPORTION_REDIS_URL", "redis://127.0.0.1:1/0")

    assert main(["studio", "--host", "0.0.0.0"]) == 2
    assert "without a token" in capsys.readouterr().err


def test_an_unreachable_store_is_answered_503_saying_so() -> None:
    import redis

    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    studio = Studio(StudioConfig(limits=DEFAULT_LIMITS), PolicyStore(dead))
    client = TestClient(create_app(studio), base_url=ORIGIN)

    response = client.get("/api/state")

    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"
    assert "policy store is unavailable" in response.json()["error"]["message"]


def dead_redis() -> Any:
    import redis

    return redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)


def test_examples_are_offered_and_picked_while_the_recent_jobs_are_unreachable() -> None:
    recent = RecentJobs(dead_redis(), Keys(), keep=5, max_bytes=100_000, ttl_seconds=60)
    client, _ = make_client(recent=recent)

    state = client.get("/api/state")
    select = client.post("/api/deployables/select", json={"id": EXAMPLE}, headers=SAME)

    assert state.status_code == 200
    assert [d["source"] for d in state.json()["deployables"]] == ["example"] * len(
        state.json()["deployables"]
    )
    assert select.status_code == 200
    assert select.json()["accounts"] == ["ec2", "vsphere-a", "vsphere-b"]


def test_unreachable_recent_jobs_are_a_store_error() -> None:
    from apportion.errors import StoreUnavailable

    recent = RecentJobs(dead_redis(), Keys(), keep=5, max_bytes=100_000, ttl_seconds=60)

    with pytest.raises(StoreUnavailable, match="recent launch_select jobs are unavailable"):
        recent.jobs()


def test_evaluating_without_a_policy_asks_for_the_modules(client: TestClient) -> None:
    for body in ({"deployable": EXAMPLE, "policy": None}, {"deployable": EXAMPLE}):
        picked(client)
        response = client.post("/api/evaluate", json=body, headers=SAME)

        assert response.status_code == 422
        problem = response.json()["error"]["details"][0]
        assert problem["path"] == "policy"
        assert problem["message"] == (
            "the studio evaluates the policy it is sent: a list of modules is required"
        )


def test_author_and_comment_are_bounded_as_the_store_bounds_them() -> None:
    client, store = make_client()

    def save(author: str, comment: str) -> Any:
        body = {"pool": "gpu", "policy": DEFAULT, "author": author, "comment": comment}
        return client.post("/api/save", json=body, headers=SAME)

    assert save("a" * MAX_AUTHOR, "c" * MAX_COMMENT).status_code == 200
    too_long_author = save("a" * (MAX_AUTHOR + 1), "")
    too_long_comment = save("ana", "c" * (MAX_COMMENT + 1))

    assert too_long_author.json()["error"]["details"] == [
        {"path": "author", "message": f"at most {MAX_AUTHOR} characters"}
    ]
    assert too_long_comment.json()["error"]["details"] == [
        {"path": "comment", "message": f"at most {MAX_COMMENT} characters"}
    ]
    assert [v.version for v in store.history("gpu")] == [1]


def test_the_history_lists_the_newest_50_versions_without_their_policies() -> None:
    client, store = make_client()
    for n in range(1, 56):
        store.save("gpu", DEFAULT[: 1 + n % 4], author="ana", comment=f"try {n}")

    history = client.get("/api/policy?pool=gpu").json()["history"]
    three = client.get("/api/policy?pool=gpu&limit=3").json()["history"]

    assert [v["version"] for v in history] == list(range(55, 5, -1))
    assert history[0] == {
        "version": 55,
        "author": "ana",
        "comment": "try 55",
        "saved_at": pytest.approx(time.time(), abs=60),
    }
    assert [v["version"] for v in three] == [55, 54, 53]
    for limit in ("0", "1001", "many", "-1", "%C2%B2"):
        refused = client.get(f"/api/policy?pool=gpu&limit={limit}")
        assert refused.status_code == 422
        assert refused.json()["error"]["details"][0]["path"] == "limit"


def test_one_version_is_fetched_with_its_policy() -> None:
    client, store = make_client()
    for n in (1, 2):
        store.save("gpu", DEFAULT[: n + 1], author="ana", comment=f"try {n}")

    first = client.get("/api/policy/version?pool=gpu&version=1")
    missing = client.get("/api/policy/version?pool=gpu&version=9")

    assert first.status_code == 200
    assert (first.json()["version"], first.json()["policy"]) == (1, DEFAULT[:2])
    assert first.json()["comment"] == "try 1"
    assert missing.status_code == 422
    assert missing.json()["error"]["details"][0] == {
        "path": "version",
        "message": "pool 'gpu' keeps no version 9",
    }


PUBLIC = "https://studio.example.com"


@pytest.mark.parametrize(
    ("public_origin", "host", "status"),
    [
        # nginx's default: the upstream's address as Host, the browser's Origin.
        (None, "127.0.0.1:8765", 403),
        (PUBLIC, "127.0.0.1:8765", 200),
        # A proxy passing the browser's Host on (proxy_set_header Host $host).
        (PUBLIC, "studio.example.com", 200),
        (None, "studio.example.com", 421),
    ],
)
def test_behind_a_reverse_proxy_the_public_origin_is_same_origin(
    public_origin: str | None, host: str, status: int
) -> None:
    client, store = make_client(public_origin=public_origin)
    body = {"pool": "gpu", "policy": DEFAULT, "author": "ana"}

    response = client.post("/api/save", json=body, headers={**SAME, "Origin": PUBLIC, "Host": host})
    other = client.post(
        "/api/save", json=body, headers={**SAME, "Origin": "https://evil.example", "Host": host}
    )

    assert response.status_code == status
    assert other.status_code in (403, 421)
    assert (store.current("gpu") is not None) == (status == 200)


def test_a_public_origin_is_scheme_host_and_port() -> None:
    assert check_origin("https://Studio.example.com/") == PUBLIC
    assert check_origin("http://10.0.0.5:8765") == "http://10.0.0.5:8765"
    for bad in ("studio.example.com", "https://studio.example.com/studio", "ftp://x", "https://"):
        with pytest.raises(ValueError, match="scheme://host"):
            check_origin(bad)


def never_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that gets as far as serving returns at once instead of blocking."""
    monkeypatch.setattr("apportion.workers.studio.serve.serve", lambda *args: None)


def test_the_command_refuses_examples_that_are_not_a_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from apportion.cli import main

    monkeypatch.setenv("APPORTION_REDIS_URL", "redis://127.0.0.1:1/0")
    never_served(monkeypatch)

    assert main(["studio", "--examples", str(tmp_path / "nonexistent")]) == 2
    assert f"--examples {tmp_path / 'nonexistent'} is not a directory" in capsys.readouterr().err


def test_the_command_refuses_a_public_origin_that_is_not_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from apportion.cli import main

    monkeypatch.setenv("APPORTION_REDIS_URL", "redis://127.0.0.1:1/0")
    never_served(monkeypatch)
    monkeypatch.setenv("APPORTION_STUDIO_PUBLIC_ORIGIN", "studio.example.com")

    assert main(["studio"]) == 2
    assert "must be scheme://host[:port]" in capsys.readouterr().err


# ---- the dry run before a save, bounded memory (issue 32) -------------------------------

DIVIDES_BY_ZERO = [{"module": "equal"}, {"module": "expression", "expression": "$.x / 0"}]


def test_a_version_rejecting_every_deployable_is_answered_409_with_the_report() -> None:
    client, store = make_client()
    body = {"pool": "gpu", "policy": DIVIDES_BY_ZERO, "author": "ana"}

    refused = client.post("/api/save", json=body, headers=SAME)

    assert refused.status_code == 409
    answer = refused.json()
    assert answer["error"]["code"] == "dry_run_refused"
    assert (answer["dry_run"]["tried"], answer["dry_run"]["rejected"]) == (2, 2)
    assert [d["label"] for d in answer["dry_run"]["deployables"]] == [
        "examples/launch_select.candidates.json",
        "examples/launch_select.json",
    ]
    assert {d["code"] for d in answer["dry_run"]["deployables"]} == {"bad_expression"}
    assert store.current("gpu") is None

    forced = client.post("/api/save", json={**body, "force": True}, headers=SAME)

    assert forced.status_code == 200, forced.text
    assert forced.json()["saved"]["version"] == 1
    assert forced.json()["dry_run"]["refuses"] is True


def test_a_good_version_is_saved_with_its_dry_run_report() -> None:
    client, _ = make_client()

    saved = client.post(
        "/api/save", json={"pool": "gpu", "policy": DEFAULT, "author": "ana"}, headers=SAME
    )

    assert saved.status_code == 200, saved.text
    assert saved.json()["dry_run"]["summary"] == (
        "dry run on pool 'gpu': ok on 2, rejected by 0 of 2 deployables"
    )


def test_computed_deployables_are_bounded_and_an_upload_let_go_is_computed_again() -> None:
    job = load_example("launch_select.json")
    size = len(json.dumps({**job, "job_id": "j-0"}).encode())
    # Room for two computed jobs of this size, never a third.
    studio = Studio(
        StudioConfig(
            limits=DEFAULT_LIMITS, examples=EXAMPLES, loaded_bytes=2 * size + 10, uploads_kept=3
        ),
        PolicyStore(fakeredis.FakeRedis()),
    )
    client = TestClient(create_app(studio), base_url=ORIGIN)
    ids = []
    for n in range(4):
        body = json.dumps({**job, "job_id": f"j-{n}"}).encode()
        answer = client.post("/api/deployables/upload", content=body, headers=UPLOAD)
        assert answer.status_code == 200, answer.text
        ids.append(answer.json()["id"])
        assert len(studio.in_memory()) <= 2
    assert studio.in_memory() == ids[2:]

    state = client.get("/api/state").json()
    # Three uploads' text kept on disk, the oldest gone.
    assert [d["id"] for d in state["loaded"]] == ids[1:]
    # The second upload was let go from memory, and is computed again from disk.
    again = client.post(
        "/api/evaluate", json={"deployable": ids[1], "policy": DEFAULT}, headers=SAME
    )
    assert again.status_code == 200, again.text
    assert studio.in_memory() == [ids[3], ids[1]]
    gone = client.post("/api/evaluate", json={"deployable": ids[0], "policy": DEFAULT},
                       headers=SAME)  # fmt: skip
    assert gone.status_code == 422
    assert "pick one again" in gone.json()["error"]["message"]
