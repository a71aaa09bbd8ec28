"""The status page in a real headless browser (Debian's chromium, driven by selenium
through chromedriver): the token given once in the address, a live session that
appears without a reload, a finished episode's transcript. Screenshots are saved under
test-artifacts/ for a human to look at."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from tests.monitoring.conftest import (
    CODING,
    PROTOCOL,
    Episode,
    read_db,
    recording_server,
    wait_for_episode,
)
from tests.servers import ROOT, LiveServer
from tests.waiting import wait_until

TOKEN = "status-page-token-4b1e"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("needs Debian's chromium and chromium-driver (scripts/test.sh installs them)")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    # Chromium's singleton socket folder (org.chromium.Chromium.*) goes under TMPDIR and
    # outlived every run in /tmp
    env = {**os.environ, "TMPDIR": str(tmp_path_factory.mktemp("chromium"))}
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, env=env), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def token_server(tmp_path: Path, bundled_images: None) -> Iterator[LiveServer]:
    server, _ = recording_server([CODING, PROTOCOL], tmp_path, token=TOKEN)
    server.db = tmp_path / "episodes.sqlite3"  # type: ignore[attr-defined]
    yield server
    server.stop()


def test_status_page_in_a_browser(browser: webdriver.Chrome, token_server: LiveServer) -> None:
    server, auth = token_server, {"Authorization": f"Bearer {TOKEN}"}
    ARTIFACTS.mkdir(exist_ok=True)
    finished = Episode(server, "protocol", headers=auth)
    finished.create()
    finished.call("echo", text="hello from the transcript")
    finished.call("submit", answer="0")
    finished.delete()
    wait_for_episode(server.db, finished.sid, calls=2)  # type: ignore[attr-defined]

    assert httpx.get(f"{server.url}/").status_code == 401  # no token, no page
    browser.get(f"{server.url}/?token={TOKEN}")
    assert TOKEN not in browser.current_url  # the token left the address bar
    assert "orsbox" in browser.title
    assert "No live sessions" in browser.find_element(By.ID, "live").text

    live = Episode(server, "coding", headers=auth)  # appears while the page is open
    live.create()
    live.call("bash", command="echo busy")
    row = wait_until(
        lambda: next(
            (r.text for r in browser.find_elements(By.CSS_SELECTOR, "#live tr.session")), None
        ),
        15,
        message="the live session appears without a reload",
    )
    assert live.sid[:8] in row and "coding" in row and "ready" in row and "orsbox-" in row
    browser.save_screenshot(str(ARTIFACTS / "status-page.png"))

    link = browser.find_element(
        By.CSS_SELECTOR, f'a[href="/ui/episodes/{_episode_id(server, finished.sid)}"]'
    )
    link.click()
    transcript = browser.find_element(By.TAG_NAME, "body").text
    assert "hello from the transcript" in transcript and "Correct!" in transcript
    assert "#1 echo" in transcript and "#2 submit" in transcript
    facts = {
        row.find_element(By.TAG_NAME, "th").text: row.find_element(By.TAG_NAME, "td").text
        for row in browser.find_elements(By.CSS_SELECTOR, "table tr")
        if row.find_elements(By.TAG_NAME, "th") and row.find_elements(By.TAG_NAME, "td")
    }
    assert facts["final reward"] == "1" and facts["finished"] == "yes", facts
    assert "train 0: what is 0+0?" in transcript  # the prompt
    browser.save_screenshot(str(ARTIFACTS / "episode-transcript.png"))
    live.delete()


def _episode_id(server: LiveServer, sid: str) -> str:
    return read_db(server.db, "SELECT id FROM episodes WHERE session_id = ?", sid)[0]["id"]  # type: ignore[attr-defined]
