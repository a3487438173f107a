"""The policy studio driven in a real browser (Debian's chromium, through Selenium).

One studio server (uvicorn, in a thread of this process) on the test redis-server, one
headless browser for the module, and one real Celery worker for the save test.
scripts/ensure-browser installs chromium and chromium-driver (scripts/test calls it).

The page redraws lists and cards on every evaluation, so a test never keeps an element
found before an action: it acts through ``act`` (waits for the element shown now,
finds it again when a redraw made it stale), reads through ``text_of`` or a script, and
holds references only to the page's static elements (index.html's ids).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from apportion.config.settings import Settings
from apportion.workers.studio.serve import build_studio, server
from tests.conftest import EXAMPLES, REQUIRE_REDIS, load_example
from tests.support.processes import RedisServer, Worker, free_port, wait_until
from tests.support.studio import many_accounts_job

pytestmark = [pytest.mark.redis, pytest.mark.browser, pytest.mark.serial]

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "img" / "studio.png"
EXAMPLE = "example:launch_select.json"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# From a slider's input event to the redrawn pie, as the page measures it (server + draw).
REDRAW_MS = 100
MOST_MOVES = 30


@pytest.fixture(scope="module")
def studio_url(redis_server: RedisServer) -> Iterator[str]:
    studio = build_studio(
        Settings(redis_url=redis_server.url),
        host="127.0.0.1",
        token=None,
        examples=EXAMPLES,
        max_upload_bytes=8 * 1024 * 1024,
    )
    port = free_port()
    running = server(studio, "127.0.0.1", port, header_timeout=10.0, log_level="warning")
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    wait_until(lambda: running.started, 20, what="studio server started")
    yield f"http://127.0.0.1:{port}"
    running.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        if REQUIRE_REDIS:
            pytest.fail("chromium and chromium-driver are missing: run scripts/ensure-browser")
        pytest.skip("chromium and chromium-driver are not installed (scripts/ensure-browser)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def act(browser: Any, css: str, action: Any = None, what: str = "") -> None:
    """Wait for the element ``css`` selects to be shown, then act on it (click by
    default). The page redraws often (every evaluation replaces lists and cards): an
    element found before a redraw is stale after it, so it is found again until the
    action lands on the element the page shows now."""
    from selenium.common.exceptions import (
        ElementNotInteractableException,
        StaleElementReferenceException,
    )

    def attempt() -> bool:
        try:
            found = browser.find_elements("css selector", css)
            if not found or not found[0].is_displayed():
                return False
            (action or (lambda e: e.click()))(found[0])
        except (StaleElementReferenceException, ElementNotInteractableException):
            return False
        return True

    wait_until(attempt, 20, what=what or f"{css} to act on")


def text_of(browser: Any, css: str) -> str:
    """The text of the element ``css`` selects now ("" while there is none)."""
    shown: str = browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : ''", css
    )
    return shown


def open_studio(browser: Any, url: str, deployable: str | None = None) -> None:
    browser.get(url + "/" + (f"?deployable={deployable}" if deployable else ""))
    wait_until(lambda: browser.execute_script("return document.body.dataset.ready === '1'"), 20)
    if deployable:
        wait_until(lambda: rendered(browser) and pies(browser), 20, what="first evaluation")


def rendered(browser: Any) -> bool:
    return bool(
        browser.execute_script(
            "const s = window.studio; return s.timing.renders > 0 && !s.state.inflight "
            "&& !s.state.pending"
        )
    )


def pies(browser: Any) -> list[dict[str, float]]:
    """What each pie on the page draws: account -> share, read from Chart.js itself."""
    drawn: list[dict[str, float]] = browser.execute_script(
        "return [...document.querySelectorAll('#pies canvas')].map((c) => {"
        "  const chart = Chart.getChart(c);"
        "  return Object.fromEntries(chart.data.labels.map((l, i) => "
        "    [l, chart.data.datasets[0].data[i]]));"
        "});"
    )
    return drawn


# Changes one control the way a person does (an input event), then waits for the page to
# draw the engine's answer; returns the page's own timing of that change.
CHANGE = """
const [selector, value, done] = arguments;
const control = document.querySelector(selector);
const state = window.studio.state;
function settled() {
  if (state.inflight || state.pending) return;
  document.removeEventListener("studio:rendered", settled);
  done(window.studio.timing.last);
}
document.addEventListener("studio:rendered", settled);
if (control.type === "checkbox") { control.click(); }
else { control.value = String(value); control.dispatchEvent(new Event("input", {bubbles: true})); }
"""


def change(browser: Any, selector: str, value: Any = None) -> dict[str, Any]:
    timing: dict[str, Any] = browser.execute_async_script(CHANGE, selector, value)
    return timing


def trace(browser: Any) -> dict[str, list[str]]:
    """The trace table: header -> the column's cells, by row (account first)."""
    table: dict[str, list[str]] = browser.execute_script(
        "const t = document.getElementById('trace-table');"
        "const heads = [...t.tHead.rows[0].cells].map((c) => c.textContent);"
        "const rows = [...t.tBodies[0].rows].map((r) => [...r.cells].map((c) => c.textContent));"
        "return Object.fromEntries(rows.map((r) => [r[0], r.slice(1)])).constructor === Object"
        "  ? {heads: heads, ...Object.fromEntries(rows.map((r) => [r[0], r.slice(1)]))} : {};"
    )
    return table


def upload_thousand_accounts(browser: Any, studio_url: str, tmp_path: Path) -> None:
    """Open the studio and upload a job of 1,000 accounts and 4,000 candidates."""
    open_studio(browser, studio_url)
    job = tmp_path / "thousand-accounts.json"
    job.write_text(json.dumps(many_accounts_job(1_000, 4)))
    act(browser, "#upload", lambda e: e.send_keys(str(job)))
    wait_until(
        lambda: (
            browser.execute_script(
                "const d = window.studio.state.deployable; return d && d.candidates === 4000"
            )
            and rendered(browser)
        ),
        60,
        what="the 1,000-account job evaluated",
    )


def slider_moves(browser: Any, slider: str) -> list[dict[str, Any]]:
    """Move ``slider`` at least six times, and on (up to :data:`MOST_MOVES`) until one
    move redraws within :data:`REDRAW_MS`: what the page and the server cost, not how busy
    a shared machine is at that moment. On a quiet machine the first six suffice (the
    median is bench/studio.md's figure); with a second test run on the same two cores,
    single moves take twice as long, and a few more moves find a moment with a core free.
    A page or server that is slower than the target fails on every move."""
    timings: list[dict[str, Any]] = []
    for weight in itertools.cycle((4, 6, 8, 9, 10, 7)):
        timings.append(change(browser, slider, weight))
        done = len(timings) >= 6 and min(t["total_ms"] for t in timings) < REDRAW_MS
        if done or len(timings) >= MOST_MOVES:
            return timings
    raise AssertionError("unreachable")


def test_moving_a_weight_slider_redraws_the_pie_within_100_ms(
    browser: Any, studio_url: str, tmp_path: Path
) -> None:
    upload_thousand_accounts(browser, studio_url, tmp_path)
    # Priority 2 accounts (acct0002, acct0005, ...) are the first group's.
    before = pies(browser)[0]["acct0002"]
    slider = 'input[data-account="acct0002"]'

    timings = slider_moves(browser, slider)

    after = pies(browser)[0]["acct0002"]
    assert len(pies(browser)[0]) == 333  # the accounts of priority 2, each in the pie
    assert after > before
    assert all("error" not in t for t in timings)
    totals = [t["total_ms"] for t in timings]
    print("input to redrawn pie (ms):", [{k: round(v) for k, v in t.items()} for t in timings])
    assert min(totals) < REDRAW_MS, timings


def test_with_an_expression_module_a_slider_move_redraws_within_100_ms(
    browser: Any, studio_url: str, tmp_path: Path
) -> None:
    upload_thousand_accounts(browser, studio_url, tmp_path)
    plain = pies(browser)[0]
    browser.execute_script(
        "document.getElementById('add-kind').value = 'expression';"
        "document.getElementById('add-module').click();"
    )
    wait_until(lambda: rendered(browser), 20, what="the expression module added")
    # Free accounts (cost_per_hour 0: acct0005 but not acct0002) twice as likely.
    expression = "switch($.cost_per_hour = 0 => 2, true => 1)"
    change(browser, '.module[data-module="expression"] textarea', expression)
    assert trace(browser)["heads"][-1] == "4. expression"
    before = pies(browser)[0]
    assert before["acct0005"] / before["acct0002"] == pytest.approx(
        2 * plain["acct0005"] / plain["acct0002"]
    )
    slider = 'input[data-account="acct0002"]'

    timings = slider_moves(browser, slider)

    after = pies(browser)[0]
    assert after["acct0002"] > before["acct0002"]
    assert all("error" not in t for t in timings)
    totals = [t["total_ms"] for t in timings]
    print("with an expression, input to redrawn pie (ms):", [round(t) for t in totals])
    assert min(totals) < REDRAW_MS, timings


def test_switching_off_failure_penalty_changes_the_trace(browser: Any, studio_url: str) -> None:
    open_studio(browser, studio_url, EXAMPLE)
    shown = trace(browser)
    assert shown["heads"] == [
        "account",
        "0. equal",
        "1. weights",
        "2. failure_penalty",
        "3. priority",
    ]
    assert shown["vsphere-a"][-1] == "61.5% g0"

    change(browser, '.module[data-module="failure_penalty"] input[data-role="toggle"]')

    shown = trace(browser)
    assert shown["heads"] == ["account", "0. equal", "1. weights", "2. priority"]
    assert shown["vsphere-a"] == ["33.3% g0", "50.0% g0", "66.7% g0"]
    assert pies(browser)[0] == pytest.approx({"vsphere-a": 2 / 3, "vsphere-b": 1 / 3})


def start_pool(browser: Any, pool: str, author: str, comment: str) -> None:
    """Add ``pool`` on the page and fill in who saves and why."""
    act(browser, "#new-pool", lambda e: e.send_keys(pool))
    act(browser, "#add-pool")
    wait_until(lambda: browser.execute_script("return window.studio.state.pool") == pool, 20)
    wait_until(lambda: rendered(browser), 20)
    sign(browser, author, comment)


def sign(browser: Any, author: str, comment: str) -> None:
    """Type who saves and why (the page clears both after each save)."""
    act(browser, "#author", lambda e: e.send_keys(author))
    act(browser, "#comment", lambda e: e.send_keys(comment))


def save_then_run(
    browser: Any, producer: Celery, job: dict[str, Any], version: int
) -> dict[str, Any]:
    """Click save, wait for the page to confirm ``version``, and have the worker answer
    ``job``: its result."""
    act(browser, "#save")
    wait_until(
        lambda: text_of(browser, "#save-status") == f"saved {job['pool']} version {version}",
        20,
        what=f"version {version} saved",
    )
    envelope: dict[str, Any] = producer.send_task(
        "apportion.launch_select", args=[{**job, "job_id": f"studio-save-{version}"}]
    ).get(timeout=60)
    assert envelope["status"] == "ok", envelope
    result: dict[str, Any] = envelope["result"]
    return result


def recent_labels(studio_url: str) -> list[str]:
    with urllib.request.urlopen(f"{studio_url}/api/state") as response:
        return [d["label"] for d in json.load(response)["deployables"] if d["source"] == "recent"]


def simulated_rows(browser: Any) -> list[list[str]]:
    act(browser, "#simulate")
    wait_until(lambda: browser.find_elements("id", "simulation-table"), 20, what="simulation")
    rows: list[list[str]] = browser.execute_script(
        "return [...document.querySelectorAll('#simulation-table tbody tr')]"
        ".map((r) => [...r.cells].map((c) => c.textContent));"
    )
    return rows


def take_screenshot(browser: Any, tmp_path: Path) -> None:
    """The picture in the README, written over docs/img/studio.png only when
    APPORTION_UPDATE_SCREENSHOTS is set (a test run never changes the source tree)."""
    shot = tmp_path / "studio.png"
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000
    if os.environ.get("APPORTION_UPDATE_SCREENSHOTS"):
        SCREENSHOT.write_bytes(shot.read_bytes())


def test_saving_makes_the_next_job_of_the_pool_report_the_new_version(
    browser: Any, studio_url: str, worker: Worker, producer: Celery, tmp_path: Path
) -> None:
    open_studio(browser, studio_url, EXAMPLE)
    start_pool(browser, "gpu-studio", "ana", "no failure penalty for gpu")
    change(browser, '.module[data-module="failure_penalty"] input[data-role="toggle"]')
    job = {k: v for k, v in load_example("launch_select.json").items() if k != "policy"}
    job["pool"] = "gpu-studio"

    first = save_then_run(browser, producer, job, 1)
    assert first["policy"] == {"source": "pool", "pool": "gpu-studio", "version": 1}
    assert [s["module"] for s in first["selection"]["trace"]] == ["equal", "weights", "priority"]
    # The worker's numbers are the ones the page drew.
    assert first["selection"]["groups"][0]["probabilities"] == pytest.approx(pies(browser)[0])

    # Who and why were the first version's: the page cleared them.
    assert browser.find_element("id", "author").get_attribute("value") == ""
    assert browser.find_element("id", "comment").get_attribute("value") == ""
    change(browser, 'input[data-account="vsphere-b"]', 4)
    sign(browser, "ana", "b twice as likely")
    second = save_then_run(browser, producer, job, 2)
    assert second["policy"] == {"source": "pool", "pool": "gpu-studio", "version": 2}
    assert second["selection"]["groups"][0]["probabilities"] == pytest.approx(
        {"vsphere-a": 1 / 3, "vsphere-b": 2 / 3}
    )
    # The page shows the saved version once its own refresh after the save lands.
    wait_until(
        lambda: text_of(browser, "#policy-source") == "gpu-studio v2",
        20,
        what="the heading of the saved version",
    )
    # The worker kept both jobs for the studio to offer, newest first.
    assert recent_labels(studio_url)[:2] == ["recent: studio-save-2", "recent: studio-save-1"]

    # This pool's studio with 1,000 launches simulated: the README's picture.
    rows = simulated_rows(browser)
    assert [r[0] for r in rows] == ["vsphere-b", "vsphere-a"]
    assert sum(int(r[1]) for r in rows) == 1000
    assert [r[3] for r in rows] == ["66.7%", "33.3%"]
    take_screenshot(browser, tmp_path)


def test_clicking_a_version_in_the_history_loads_its_policy(
    browser: Any, studio_url: str, redis_server: RedisServer
) -> None:
    from selenium.webdriver.support.ui import Select

    from apportion.workers.policies.store import PolicyStore

    store = PolicyStore(redis_server.client())
    policy = [{"module": "equal"}, {"module": "weights", "weights": {"vsphere-b": 3}}]
    store.save("history-click", policy, author="ana", comment="b three times a")
    store.save("history-click", [{"module": "equal"}], author="ana", comment="equal")
    open_studio(browser, studio_url, EXAMPLE)
    act(browser, "#pool", lambda e: Select(e).select_by_value("history-click"))

    act(browser, '#history li[value="1"] .version', what="version 1 in the history")

    wait_until(
        lambda: (
            browser.execute_script("return window.studio.state.cards.map((c) => c.m)") == policy
        ),
        20,
        what="version 1 in the editor",
    )


# ---- the dry run before a save (workers/policies/dryrun.py) --------------------------


def add_expression(browser: Any, expression: str) -> None:
    browser.execute_script(
        "document.getElementById('add-kind').value = 'expression';"
        "document.getElementById('add-module').click();"
    )
    wait_until(lambda: rendered(browser), 20, what="the expression module added")
    change(browser, '.module[data-module="expression"] textarea', expression)


def test_a_version_rejecting_every_deployable_is_refused_with_the_count_until_confirmed(
    browser: Any, studio_url: str, redis_server: RedisServer
) -> None:
    from apportion.workers.policies.store import PolicyStore

    open_studio(browser, studio_url, EXAMPLE)
    start_pool(browser, "dry-run-pool", "ana", "cost divided by zero")
    add_expression(browser, "$.cost_per_hour / 0")

    act(browser, "#save")

    wait_until(lambda: text_of(browser, "#save-status") == "not saved", 60, what="refusal")
    # Tried on the two examples (the studio's examples folder), both rejected.
    assert text_of(browser, "#dry-run-summary") == (
        "dry run on pool 'dry-run-pool': ok on 0, rejected by 2 of 2 deployables"
    )
    assert text_of(browser, "#save-anyway") == (
        "Save anyway: it rejects all 2 deployables it was tried on"
    )
    assert "ZeroDivisionError" in text_of(browser, "#dry-run ul")
    store = PolicyStore(redis_server.client())
    assert store.current("dry-run-pool") is None

    act(browser, "#save-anyway")

    wait_until(
        lambda: text_of(browser, "#save-status") == "saved dry-run-pool version 1",
        60,
        what="saved after the confirmation",
    )
    saved = store.current("dry-run-pool")
    assert saved is not None
    assert saved.policy[-1] == {"module": "expression", "expression": "$.cost_per_hour / 0"}
    assert saved.comment == "cost divided by zero"
    # The report stays shown, and who and why are cleared for the next version.
    assert text_of(browser, "#dry-run-summary").endswith("rejected by 2 of 2 deployables")
    assert browser.find_element("id", "author").get_attribute("value") == ""


# ---- unsaved edits, revert, compare ---------------------------------------------------


def test_unsaved_edits_of_a_pool_are_kept_while_another_pool_is_shown(
    browser: Any, studio_url: str
) -> None:
    from selenium.webdriver.support.ui import Select

    open_studio(browser, studio_url, EXAMPLE)
    start_pool(browser, "drafts-a", "ana", "")
    change(browser, '.module[data-module="failure_penalty"] input[data-role="toggle"]')
    edited = browser.execute_script("return JSON.stringify(window.studio.state.cards)")
    wait_until(lambda: browser.find_element("id", "unsaved").is_displayed(), 20, what="unsaved")

    act(browser, "#pool", lambda e: Select(e).select_by_value("default"))
    wait_until(lambda: not browser.find_element("id", "unsaved").is_displayed(), 20)
    act(browser, "#pool", lambda e: Select(e).select_by_value("drafts-a"))

    wait_until(
        lambda: (
            browser.execute_script("return JSON.stringify(window.studio.state.cards)") == edited
        ),
        20,
        what="the unsaved stack back",
    )
    wait_until(lambda: browser.find_element("id", "unsaved").is_displayed(), 20, what="unsaved")


def test_loading_a_version_over_unsaved_edits_asks_first(
    browser: Any, studio_url: str, redis_server: RedisServer
) -> None:
    from apportion.workers.policies.store import PolicyStore

    store = PolicyStore(redis_server.client())
    store.save("ask-first", [{"module": "equal"}], author="ana", comment="one")
    store.save("ask-first", [{"module": "least_used"}], author="ana", comment="two")
    open_studio(browser, studio_url, EXAMPLE)
    start_pool(browser, "ask-first", "ana", "")
    act(browser, "#add-module")
    wait_until(lambda: rendered(browser), 20)
    cards = "return window.studio.state.cards.length"
    assert browser.execute_script(cards) == 2

    act(browser, '#history li[value="1"] .version')
    wait_until(lambda: alert_text(browser), 20, what="the confirmation")
    assert "unsaved changes to pool ask-first" in alert_text(browser)
    browser.switch_to.alert.dismiss()
    assert browser.execute_script(cards) == 2  # kept

    act(browser, '#history li[value="1"] .version')
    wait_until(lambda: alert_text(browser), 20, what="the confirmation")
    browser.switch_to.alert.accept()
    wait_until(
        lambda: (
            browser.execute_script("return window.studio.state.cards.map((c) => c.m)")
            == [{"module": "equal"}]
        ),
        20,
        what="version 1 loaded",
    )


def pick_pool(browser: Any, pool: str) -> None:
    from selenium.webdriver.support.ui import Select

    act(browser, "#pool", lambda e: Select(e).select_by_value(pool))
    wait_until(lambda: browser.execute_script("return window.studio.state.pool") == pool, 20)


def alert_text(browser: Any) -> str:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        shown: str = browser.switch_to.alert.text
    except NoAlertPresentException:
        return ""
    return shown


def test_compare_shows_a_version_against_the_current_and_revert_saves_it_again(
    browser: Any, studio_url: str, redis_server: RedisServer
) -> None:
    from apportion.workers.policies.store import PolicyStore

    store = PolicyStore(redis_server.client())
    store.save("revert-pool", [{"module": "equal"}], author="ana", comment="one")
    store.save("revert-pool", [{"module": "least_used"}], author="ana", comment="two")
    open_studio(browser, studio_url, EXAMPLE)
    pick_pool(browser, "revert-pool")

    act(browser, '#history li[value="1"] button.compare')
    wait_until(lambda: text_of(browser, "#compare-diff"), 20, what="the comparison")
    assert "-- module: equal" in text_of(browser, "#compare-diff")
    assert "+- module: least_used" in text_of(browser, "#compare-diff")

    act(browser, "#author", lambda e: e.send_keys("bob"))
    act(browser, '#history li[value="1"] button.revert')
    wait_until(
        lambda: text_of(browser, "#save-status") == "saved revert-pool version 3",
        60,
        what="the revert saved",
    )
    current = store.current("revert-pool")
    assert current is not None
    assert (current.policy, current.author, current.comment) == (
        [{"module": "equal"}],
        "bob",
        "revert to v1",
    )


# ---- frictions (issue 32, item 4) -----------------------------------------------------


def test_the_token_error_clears_once_the_right_token_is_typed(
    browser: Any, redis_server: RedisServer
) -> None:
    token = "a-studio-token-of-some-length"
    studio = build_studio(
        Settings(redis_url=redis_server.url),
        host="127.0.0.1",
        token=token,
        examples=EXAMPLES,
    )
    port = free_port()
    running = server(studio, "127.0.0.1", port, header_timeout=10.0, log_level="warning")
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    wait_until(lambda: running.started, 20, what="studio server started")
    try:
        # A new origin (another port): no token in this tab's session storage.
        browser.get(f"http://127.0.0.1:{port}/")
        wait_until(lambda: browser.find_element("id", "errors").is_displayed(), 20, what="401")
        act(browser, "#token", lambda e: e.send_keys(token))
        act(browser, "#token-ok")
        wait_until(lambda: browser.execute_script("return document.body.dataset.ready === '1'"), 20)
        assert not browser.find_element("id", "errors").is_displayed()
        assert text_of(browser, "#errors") == ""
    finally:
        running.should_exit = True
        thread.join(10)


def test_switching_to_a_job_of_many_accounts_draws_its_pie_without_slice_borders(
    browser: Any, studio_url: str, tmp_path: Path
) -> None:
    open_studio(browser, studio_url, EXAMPLE)
    border = "return Chart.getChart(document.querySelector('#pies canvas')).data.datasets[0]"
    assert browser.execute_script(border + ".borderWidth") == 1  # 3 slices: outlined

    job = tmp_path / "thousand-accounts.json"
    job.write_text(json.dumps(many_accounts_job(1_000, 4)))
    act(browser, "#upload", lambda e: e.send_keys(str(job)))
    wait_until(
        lambda: (
            browser.execute_script(
                "const d = window.studio.state.deployable; return d && d.candidates === 4000"
            )
            and rendered(browser)
            and len(pies(browser)[0]) == 333
        ),
        60,
        what="the 1,000-account job drawn",
    )

    assert browser.execute_script(border + ".borderWidth") == 0


def test_picking_a_job_of_a_pool_shows_that_pools_policy(
    browser: Any, studio_url: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    from apportion.workers.policies.store import PolicyStore

    PolicyStore(redis_server.client()).save(
        "job-pool", [{"module": "least_used"}], author="ana", comment="its own"
    )
    job = {k: v for k, v in load_example("launch_select.json").items() if k != "policy"}
    path = tmp_path / "pooled.json"
    path.write_text(json.dumps({**job, "pool": "job-pool", "job_id": "pooled"}))
    open_studio(browser, studio_url)

    act(browser, "#upload", lambda e: e.send_keys(str(path)))

    wait_until(
        lambda: (
            browser.execute_script("return document.getElementById('pool').value") == "job-pool"
        ),
        30,
        what="the pool selector on the job's pool",
    )
    wait_until(lambda: text_of(browser, "#policy-source") == "job-pool v1", 20)
    wait_until(
        lambda: (
            browser.execute_script("return window.studio.state.cards.map((c) => c.m)")
            == [{"module": "least_used"}]
        ),
        20,
    )


def test_using_the_jobs_own_policy_says_what_it_did(browser: Any, studio_url: str) -> None:
    open_studio(browser, studio_url, "example:launch_select.candidates.json")
    button = browser.find_element("id", "use-job-policy")
    # This job carries no policy: the button says so rather than do nothing.
    assert not button.is_enabled()
    assert button.get_attribute("title") == "this job carries no policy of its own"

    open_studio(browser, studio_url, EXAMPLE)
    change(browser, '.module[data-module="failure_penalty"] input[data-role="toggle"]')
    act(browser, "#use-job-policy")

    wait_until(
        lambda: (
            text_of(browser, "#policy-source")
            == "examples/launch_select.json's own policy (not saved)"
        ),
        20,
    )
    assert browser.execute_script("return window.studio.state.cards.length") == 4


def test_the_header_stays_on_one_line_at_1280_px(browser: Any, studio_url: str) -> None:
    size = browser.get_window_size()
    browser.set_window_size(1280, 900)
    try:
        open_studio(browser, studio_url, EXAMPLE)
        tops = browser.execute_script(
            "return [...document.querySelector('header').children]"
            ".filter((e) => e.offsetParent !== null)"
            ".map((e) => Math.round(e.getBoundingClientRect().top + e.offsetHeight / 2))"
        )
        assert max(tops) - min(tops) <= 4, tops
        assert browser.execute_script("return document.querySelector('header').offsetHeight") < 60
    finally:
        browser.set_window_size(size["width"], size["height"])


def test_each_trace_cell_stays_on_one_line(browser: Any, studio_url: str) -> None:
    size = browser.get_window_size()
    browser.set_window_size(1280, 900)
    try:
        open_studio(browser, studio_url, EXAMPLE)
        for _ in range(3):  # three more columns
            browser.execute_script("document.getElementById('add-kind').value = 'weights'")
            act(browser, "#add-module")
            wait_until(lambda: rendered(browser), 20)
        assert len(trace(browser)["heads"]) == 8
        lines = browser.execute_script(
            "return [...document.querySelectorAll('#trace-table tbody tr:not(:last-child) td,"
            " #trace-table th')].map((c) => { const r = document.createRange();"
            " r.selectNodeContents(c); return [c.textContent,"
            " new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size]; })"
        )
        assert len(lines) == 8 + 3 * 8
        assert [text for text, count in lines if count > 1] == []
    finally:
        browser.set_window_size(size["width"], size["height"])


def test_a_job_of_one_account_says_1_account(browser: Any, studio_url: str) -> None:
    open_studio(browser, studio_url, "example:launch_select.candidates.json")

    assert text_of(browser, "#summary") == (
        "examples/launch_select.candidates.json: 3 candidates, 1 account, 1 priority group"
    )
