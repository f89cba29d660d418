"""The dashboard in a real headless browser: Debian's chromium driven by selenium.

Selenium uses the system's /usr/bin/chromedriver and /usr/bin/chromium
(Debian packages chromium and chromium-driver, which `make test` installs);
both paths are given, so selenium-manager never looks for a driver or a
browser, and SE_OFFLINE keeps it off the network all the same. One browser
serves the whole module. Every page is checked for console errors (the
browser log, goog:loggingPrefs); screenshots of each page land in
tests/artifacts/dashboard/ (ignored by git) for a person to look at.

Queues are made with redis-cli, as an operator would; what the page did is
checked with QSTAT.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.dashboard_support import DASHBOARD, DashboardClient
from tests.support import HOST, wait_for
from tests.web_support import running_http_server

os.environ.setdefault("SE_OFFLINE", "true")      # before selenium reads it

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.selenium_manager import SeleniumManager  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "dashboard"
WINDOW = (1280, 1000)
PAGE_TIMEOUT_S = 30
PASSWORD = "browser-s3cret"


def _no_selenium_manager(*args, **kwargs):
    raise AssertionError("selenium-manager was asked for a driver or a browser")


@pytest.fixture(scope="module")
def browser():
    for path in (CHROMIUM, CHROMEDRIVER):
        assert os.access(path, os.X_OK), \
            f"{path} is required (Debian packages chromium chromium-driver: make system-deps)"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions",
                     f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with pytest.MonkeyPatch.context() as patch:      # it would download: it must not run
        patch.setattr(SeleniumManager, "binary_paths", _no_selenium_manager)
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER),
                                  options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with running_http_server(tmp_path_factory.mktemp("browser")) as proc:
        yield proc


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    with running_http_server(tmp_path_factory.mktemp("locked"), PASSWORD) as proc:
        yield proc


def url(proc, path: str = DASHBOARD) -> str:
    return f"http://{HOST}:{proc.http_port}{path}"


def redis_cli(proc, *args: str) -> str:
    done = subprocess.run(["redis-cli", "-h", HOST, "-p", str(proc.port), *args],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def console_errors(driver) -> list[dict]:
    """The browser log since the last read, errors only."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def visit(driver, address: str, screenshot: str) -> None:
    """Load a page, save its screenshot, and check the console stayed clean."""
    driver.get(address)
    driver.save_screenshot(str(SCREENSHOTS / f"{screenshot}.png"))
    assert console_errors(driver) == [], f"console errors on {address}"


def qstat_pause(proc) -> str:
    reply = redis_cli(proc, "QSTAT", "emails").splitlines()
    return reply[reply.index("pause") + 1]


def test_every_page_loads_without_console_errors(browser, node):
    redis_cli(node, "ADDJOB", "emails", "hello <b>world</b>", "0")
    redis_cli(node, "CONFIG", "SET", "slowlog-log-slower-than", "0")
    job_id = redis_cli(node, "ADDJOB", "emails", "second", "0")
    visit(browser, url(node), "overview")
    assert browser.title == "Overview · disque-py"
    visit(browser, url(node, f"{DASHBOARD}queue?name=emails"), "queue")
    visit(browser, url(node, f"{DASHBOARD}job?id={quote(job_id, safe='')}"), "job")
    assert browser.find_element(By.ID, "body").text == "second"
    visit(browser, url(node, f"{DASHBOARD}latency"), "latency")
    assert browser.find_elements(By.CSS_SELECTOR, "#slowlog tr")


def test_a_queue_made_by_redis_cli_appears_with_its_length(browser, node):
    for i in range(3):
        redis_cli(node, "ADDJOB", "invoices", f"invoice {i}", "0")
    visit(browser, url(node), "overview-invoices")
    link = browser.find_element(By.LINK_TEXT, "invoices")
    row = link.find_element(By.XPATH, "./ancestor::tr")
    assert row.find_element(By.CSS_SELECTOR, ".queue-len").text == "3"
    link.click()
    assert browser.find_element(By.ID, "queue-name").text == "invoices"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#jobs tr")) == 1 + 3
    assert console_errors(browser) == []


def test_the_pause_action_works_through_the_page(browser, node):
    redis_cli(node, "ADDJOB", "emails", "x", "0")
    visit(browser, url(node, f"{DASHBOARD}queue?name=emails"), "queue-before-pause")
    browser.find_element(By.ID, "pause-all").click()
    wait_for(lambda: browser.find_elements(By.ID, "pause-state"), message="the paused page")
    assert qstat_pause(node) == "all"
    assert "paused: all" in browser.find_element(By.ID, "pause-state").text
    browser.save_screenshot(str(SCREENSHOTS / "queue-paused.png"))
    browser.find_element(By.ID, "pause-none").click()
    wait_for(lambda: not browser.find_elements(By.ID, "pause-state"), message="resumed")
    assert qstat_pause(node) == "none"
    assert console_errors(browser) == []


def test_a_forged_cross_site_post_is_refused(browser, node):
    redis_cli(node, "ADDJOB", "emails", "x", "0")
    visit(browser, url(node, f"{DASHBOARD}queue?name=emails"), "queue-before-forgery")
    # Another site's page posting to the dashboard: no CSRF token, and the
    # SameSite=Strict session cookie stays home.
    forged = (f'<form method="post" action="{url(node, DASHBOARD + "queue/pause")}">'
              '<input name="queue" value="emails"><input name="state" value="all"></form>'
              '<script>document.forms[0].submit()</script>')
    browser.get("data:text/html," + quote(forged))
    wait_for(lambda: "CSRF" in browser.page_source, message="the refusal")
    browser.save_screenshot(str(SCREENSHOTS / "forged-post.png"))
    assert qstat_pause(node) == "none"
    # The browser logs the refusal's 403: proof that the console checks see errors.
    assert any("403" in entry["message"] for entry in console_errors(browser))
    # The same forgery from a plain HTTP client that holds a session.
    client = DashboardClient(node.http_port)
    client.get()
    reply = client.post(f"{DASHBOARD}queue/pause", {"queue": "emails", "state": "all"})
    assert reply.status == 403
    assert qstat_pause(node) == "none"


def test_the_login_is_required_when_a_password_is_set(browser, locked):
    redis_cli(locked, "-a", PASSWORD, "--no-auth-warning", "ADDJOB", "secret-queue", "x", "0")
    visit(browser, url(locked), "login")
    assert browser.current_url == url(locked, f"{DASHBOARD}login")
    assert "secret-queue" not in browser.page_source
    field = browser.find_element(By.NAME, "password")
    field.send_keys("wrong")
    browser.find_element(By.ID, "login").click()
    wait_for(lambda: "Wrong password" in browser.page_source, message="the refusal")
    browser.get_log("browser")          # the 401 is logged: not a page error
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait_for(lambda: browser.current_url == url(locked), message="the overview")
    assert browser.find_element(By.LINK_TEXT, "secret-queue")
    browser.save_screenshot(str(SCREENSHOTS / "logged-in.png"))
    assert console_errors(browser) == []
