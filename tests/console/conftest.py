"""The console's fixtures: a real netpeerd (in this process, on real OVN)
serving ``console_listen`` on loopback, and Debian's Chromium driven by
Playwright. Chromium is the system's (``apt-get install chromium``): none
is downloaded, and a missing one fails the test loudly."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tests.support import Netpeerd, start_netpeerd

CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Chromium is not installed: `apt-get install -y --no-install-recommends chromium` "
                    "(scripts/setup.sh does it); the console's tests need a real browser")
    return path


@pytest.fixture(scope="session")
def browser_context():
    """One Chromium for the session, with a fresh profile directory removed afterwards."""
    from playwright.sync_api import sync_playwright
    profile = tempfile.mkdtemp(prefix="np-chromium-")
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile, executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 900})
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser(browser_context):
    """A page of its own, with no cookie left from another test."""
    browser_context.clear_cookies()
    page = browser_context.new_page()
    try:
        yield page
    finally:
        page.close()
        browser_context.clear_cookies()


@pytest.fixture
def console(ovn, state_dir: Path) -> Iterator[Netpeerd]:
    """netpeerd with its console on 127.0.0.1 (a free port: ``console_url``)."""
    daemon = start_netpeerd(ovn, state_dir, console_listen="127.0.0.1:0")
    try:
        yield daemon
    finally:
        daemon.stop()


def console_url(netpeerd: Netpeerd) -> str:
    return f"http://127.0.0.1:{netpeerd.daemon.console_server.port}"


def sign_in(page, netpeerd: Netpeerd, token: str) -> None:
    page.goto(console_url(netpeerd) + "/signin")
    page.fill("#token", token)
    page.click("#signin")
    page.wait_for_load_state("domcontentloaded")
