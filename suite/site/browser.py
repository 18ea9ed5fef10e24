"""Headless Chromium driven by Selenium, for the site's screenshots and its browser test.

Needs Debian's ``chromium`` and ``chromium-driver`` (or any Chrome plus a matching chromedriver on
PATH) and the ``selenium`` package. The browser is started isolated: a fresh profile, no network
services of its own, so a page that works here works offline.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
INSTALL_HINT = "apt-get install -y chromium chromium-driver; pip install selenium"


class BrowserMissing(RuntimeError):
    """Chromium, its driver or selenium is not installed."""


def find_browser() -> tuple[str, str]:
    """Paths of the Chromium binary and of chromedriver; BrowserMissing says what to install."""
    browser = next((p for p in map(shutil.which, BROWSERS) if p), None)
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        missing = " and ".join(n for n, p in (("chromium", browser), ("chromedriver", driver)) if not p)
        raise BrowserMissing(f"{missing} not found on PATH; install with: {INSTALL_HINT}")
    return browser, driver


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator:
    """A Selenium WebDriver on headless Chromium with a fresh profile, closed on exit."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        raise BrowserMissing(f"selenium is not importable ({exc}); install with: {INSTALL_HINT}") from exc
    browser, driver_path = find_browser()
    with tempfile.TemporaryDirectory(prefix="suite-site-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = browser
        for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
        try:
            yield driver
        finally:
            driver.quit()


def console_errors(driver) -> list[str]:
    """The browser console's errors since the last call (SEVERE entries)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
