"""The policy studio driven in a real browser (Debian's chromium, through Selenium).

One studio server (uvicorn, in a thread of this process) on the test redis-server, one
headless browser for the module, and one real Celery worker for the save test.
scripts/ensure-browser installs chromium and chromium-driver (scripts/test calls it).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
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
    running = server(studio, "127.0.0.1", port, header_timeout=10.0)
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


def test_moving_a_weight_slider_redraws_the_pie_within_100_ms(
    browser: Any, studio_url: str, tmp_path: Path
) -> None:
    upload_thousand_accounts(browser, studio_url, tmp_path)
    # Priority 2 accounts (acct0002, acct0005, ...) are the first group's.
    before = pies(browser)[0]["acct0002"]
    slider = 'input[data-account="acct0002"]'

    timings = [change(browser, slider, weight) for weight in (4, 6, 8, 9, 10, 7)]

    after = pies(browser)[0]["acct0002"]
    assert len(pies(browser)[0]) == 333  # the accounts of priority 2, each in the pie
    assert after > before
    assert all("error" not in t for t in timings)
    totals = [t["total_ms"] for t in timings]
    # From the input event to the redrawn pie, as the page measures it (server + draw).
    print("input to redrawn pie (ms):", [{k: round(v) for k, v in t.items()} for t in timings])
    assert statistics.median(totals) < 100, timings


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

    timings = [change(browser, slider, weight) for weight in (4, 6, 8, 9, 10, 7)]

    after = pies(browser)[0]
    assert after["acct0002"] > before["acct0002"]
    assert all("error" not in t for t in timings)
    totals = [t["total_ms"] for t in timings]
    print("with an expression, input to redrawn pie (ms):", [round(t) for t in totals])
    assert statistics.median(totals) < 100, timings


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
    assert text_of(browser, "#policy-source") == "gpu-studio v2"
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
