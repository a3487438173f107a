"""Which Redis URLs the settings accept, what they make of them, and misspelt variables."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from apportion.config.celeryconfig import celery_config
from apportion.config.settings import Settings
from apportion.engine_settings import known_settings
from apportion.setting_names import settings_of, unknown_variables
from apportion.workers.app import create_app, require_gate
from apportion.workers.redis.client import error_text, make_redis, redact_url
from tests.acceptance.cli import apportion

REPO = Path(__file__).resolve().parents[3]
# Everything but the tests themselves, which set misspelt names on purpose.
PRODUCT_PATHS = ("workers", "src", "config", "tasks", "bench", "scripts", "examples")
PRODUCT_PATHS += ("tests/support", "Dockerfile", "Procfile", "docker-compose.yml", ".ci")

SENTINELS = "sentinel://:s3cret@h1:26379/0;sentinel://:s3cret@h2:26379;sentinel://:s3cret@h3:26379"


def test_a_misspelt_variable_is_refused_with_the_closest_known_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APPORTION_REDIS_ULR", "redis://cache:6379/0")

    with pytest.raises(ValidationError, match="did you mean APPORTION_REDIS_URL\\?"):
        Settings()


@pytest.mark.parametrize(
    ("variable", "closest"),
    [
        ("APPORTION_LIMITS__MAX_POLS", "APPORTION_LIMITS__MAX_POOLS"),
        ("APPORTION_SENTINEL_MASTR", "APPORTION_SENTINEL_MASTER"),
        ("APPORTION_LOG_FORMATT", "APPORTION_LOG_FORMAT"),
        ("APPORTION_TIMELIMITS__PARTITION__HARD", "APPORTION_TIME_LIMITS__PARTITION__HARD"),
    ],
)
def test_nested_and_read_elsewhere_names_are_suggested_too(variable: str, closest: str) -> None:
    assert unknown_variables({variable: "1"}, known_settings()) == [
        f"unknown environment variable {variable}; did you mean {closest}?"
    ]


def test_every_name_the_project_reads_is_known() -> None:
    environ = dict.fromkeys(
        [
            "APPORTION_REDIS_URL",
            "APPORTION_SENTINEL_MASTER",
            "APPORTION_LIMITS__MAX_POOLS",
            "APPORTION_TIME_LIMITS__PARTITION__HARD",
            "APPORTION_SIMULATED_FAILURE_RATES__EC2",
            "APPORTION_KIND_MODULES",
            "APPORTION_LOG_FORMAT",
            "APPORTION_LOG_CELERY_TASK_LINES",
            "APPORTION_REQUIRE_REDIS",
            "APPORTION_GOLDEN_RECORD",
            "OTHER_TOOL_SETTING",
        ],
        "1",
    )
    assert unknown_variables(environ, known_settings()) == []


def test_the_names_apportion_solve_knows_are_exactly_the_workers_settings() -> None:
    # `apportion solve` cannot import the worker's settings: a field added to them must be
    # named in setting_names.SERVICE_SETTINGS, or solve refuses a valid worker environment.
    assert settings_of(Settings) == known_settings()


def test_every_apportion_variable_named_outside_the_tests_is_known() -> None:
    # A variable the project reads outside Settings (logging, the test harnesses,
    # whatever comes next) must be listed in apportion/setting_names.py READ_ELSEWHERE, or
    # the worker and `apportion solve` refuse to start wherever it is set.
    named = subprocess.run(
        ["git", "grep", "-ohE", "APPORTION_[A-Z0-9_]*[A-Z0-9]", "--", *PRODUCT_PATHS],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()

    assert unknown_variables(dict.fromkeys(named, ""), known_settings()) == []


def test_sentinel_urls_need_the_master_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPORTION_REDIS_URL", SENTINELS)

    with pytest.raises(ValidationError, match="set APPORTION_SENTINEL_MASTER") as refused:
        Settings()
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "sentinel://h1:26379;sentinel://h2:26379",
        "sentinel://h1:26379/3;sentinel://h2:26379",
        "sentinel://h1:26379/3;sentinel://h2:26379/3",
        "sentinel://h1:26379;sentinel://h2:26379/0",
        "sentinel://:pw@h1:26379/0?socket_timeout=5;sentinel://:pw@h2:26379/00",
    ],
)
def test_a_sentinel_list_may_name_its_database_on_the_first_url_or_on_every_one(
    url: str,
) -> None:
    assert Settings(redis_url=url, sentinel_master="apportion").redis_url == url


def test_a_database_named_only_after_the_first_sentinel_url_is_refused() -> None:
    # Every client reads the database from the first URL: db 2 would become db 0.
    url = "sentinel://h1:26379;sentinel://h2:26379;sentinel://h3:26379/2"

    with pytest.raises(ValidationError, match="read from the first sentinel URL") as refused:
        Settings(redis_url=url, sentinel_master="apportion")
    assert "a later URL names another one: write it on the first URL" in str(refused.value)


@pytest.mark.parametrize(
    ("url", "refusal"),
    [
        # An unescaped "/" in a password makes the rest of it look like the database.
        ("sentinel://:pa/ss@h1:26379/0;sentinel://:pa/ss@h2:26379/0", "database must be a number"),
        # Read only when a client first connects, so refused at start-up instead.
        ("redis://:pa55@cache:63x9/0", "a port must be a number from 1 to 65535"),
        ("redis://:pa55@cache:0/0", "a port must be a number from 1 to 65535"),
        ("redis://:pa55@cache:70000/0", "a port must be a number from 1 to 65535"),
        ("sentinel://:pa55@h1:26379/0;sentinel://h2:2637o", "a port must be a number from 1"),
    ],
)
def test_a_url_no_client_could_read_is_refused_without_repeating_it(url: str, refusal: str) -> None:
    with pytest.raises(ValidationError, match=refusal) as refused:
        Settings(redis_url=url, sentinel_master="apportion")
    assert "ss@h" not in str(refused.value)
    assert "pa55" not in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "amqp://guest:s3cret@rabbit//",
        "memory://",
        "unix:///var/run/redis.sock",
        "redis://h:6379/0;sentinel://h:26379",
        "rediss://:s3cret@h:6380/0",
    ],
)
def test_urls_without_a_gated_transport_or_a_certificate_check_are_refused(url: str) -> None:
    with pytest.raises(ValidationError, match="APPORTION_REDIS_URL") as refused:
        Settings(redis_url=url)
    assert "s3cret" not in str(refused.value)


def test_sentinel_settings_reach_the_broker_the_result_backend_and_the_transport() -> None:
    settings = Settings(redis_url=SENTINELS, sentinel_master="mymaster", sentinel_password="sp")
    conf = celery_config(settings)

    assert conf["broker_transport"] == "apportion.workers.broker.transport:SentinelTransport"
    for options in (conf["broker_transport_options"], conf["result_backend_transport_options"]):
        assert options["master_name"] == "mymaster"
        assert options["sentinel_kwargs"]["password"] == "sp"
    require_gate(create_app(settings))  # a worker on it starts


def test_a_worker_refuses_a_broker_whose_transport_has_no_gate() -> None:
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0"))
    app.conf.broker_transport = None  # kombu's own Redis transport

    with pytest.raises(RuntimeError, match="refusing to start"):
        require_gate(app)


def test_apportions_own_clients_ask_the_sentinels_for_the_master() -> None:
    client = make_redis(SENTINELS, sentinel_master="mymaster", sentinel_password="sp")
    pool = client.connection_pool

    assert pool.service_name == "mymaster"
    assert [
        (c.connection_pool.connection_kwargs["host"]) for c in pool.sentinel_manager.sentinels
    ] == [
        "h1",
        "h2",
        "h3",
    ]
    assert pool.connection_kwargs["password"] == "s3cret"
    assert pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs["password"] == "sp"


def test_printed_urls_never_carry_a_password() -> None:
    assert redact_url(SENTINELS) == (
        "sentinel://:***@h1:26379/0;sentinel://:***@h2:26379;sentinel://:***@h3:26379"
    )
    assert redact_url("rediss://app:pw@h:6380/0?ssl_cert_reqs=required&password=pw") == (
        "rediss://app:***@h:6380/0?ssl_cert_reqs=required&password=***"
    )
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"


def test_a_missing_master_is_one_short_line() -> None:
    long = Exception("No master found for 'mymaster' : <redis.client.Redis(...)> - network")
    assert error_text(long) == (
        "No master found for 'mymaster': no sentinel answered with a reachable master"
    )


@pytest.mark.parametrize(
    "command", [["worker", "-c", "1"], ["health"], ["submit", "partition", "-"]]
)
def test_the_worker_and_the_commands_stop_at_start_up_on_a_misspelt_variable(
    command: list[str],
) -> None:
    env = {"APPORTION_REDIS_ULR": "redis://:s3cret@cache:6379/0"}

    proc = apportion(*command, stdin="{}", env=env, timeout=60)

    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(
        "unknown environment variable APPORTION_REDIS_ULR; did you mean APPORTION_REDIS_URL?"
    )
    assert "Traceback" not in proc.stderr
    assert "s3cret" not in proc.stdout + proc.stderr


def test_submit_says_it_cannot_reach_the_broker_when_no_sentinel_answers() -> None:
    env = {
        "APPORTION_REDIS_URL": "sentinel://:s3cret@127.0.0.1:1;sentinel://:s3cret@127.0.0.1:2/0",
        "APPORTION_SENTINEL_MASTER": "mymaster",
    }

    proc = apportion("submit", "partition", "-", "--connect-retries", "1", stdin="{}", env=env)

    assert proc.returncode == 1
    assert proc.stderr.startswith(
        "apportion submit: cannot reach the broker at "
        "sentinel://:***@127.0.0.1:1;sentinel://:***@127.0.0.1:2/0: "
        "No master found for 'mymaster': no sentinel answered with a reachable master"
    )
    assert "Traceback" not in proc.stderr
    assert "s3cret" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "url",
    [
        "redis://cache:6379?db=2",
        "redis://cache:6379/0?socket_timeout=5&db=2",
        "sentinel://h1:26379?db=2;sentinel://h2:26379",
    ],
)
def test_a_database_given_as_a_query_option_is_refused_for_the_urls_path(url: str) -> None:
    # redis-py and Celery's backend would use db 2, kombu's Connection raises TypeError.
    with pytest.raises(ValidationError, match=r"write the database as the URL's path"):
        Settings(broker_url=url, sentinel_master="apportion")


def test_kombu_refuses_a_database_query_option_that_redis_py_takes() -> None:
    # Why the settings refuse ?db=: the two clients disagree about it.
    from kombu import Connection

    assert make_redis("redis://cache:6379/0?db=2").connection_pool.connection_kwargs["db"] == 2
    with pytest.raises(TypeError):
        Connection("redis://cache:6379/0?db=2")
