"""The built site in real headless Chromium, opened from disk: no console errors, a click on a
column header sorts the board, the filters hide rows, every plot draws something, links resolve.

Marked `external` (it needs Debian's chromium and chromium-driver): .ci/run installs them and runs
these tests after the default run. Never skipped: without Chromium, its driver or selenium it fails
saying what to install. About 12-20 s on a 2-core machine, most of it starting the browser once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.site import build_site
from suite.site.browser import chromium, console_errors
from tests.test_site import write_fixture_results

pytestmark = pytest.mark.external


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:  # BrowserMissing (not a skip) when chromium or selenium is absent
        yield driver


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    return build_site(write_fixture_results(root / "results"), root / "out").out_dir


def board_values(driver, column: int) -> list[str]:
    """The data-value of ``column`` in each row of our part of the board, top to bottom."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('table.board > tbody:not(.reference) > tr'))"
        ".map(r => r.children[arguments[0]].dataset.value)", column)


def test_board_renders_sorts_and_filters(browser, site, tmp_path):
    browser.get((site / "index.html").as_uri())
    assert console_errors(browser) == []
    headers = browser.find_elements("css selector", "table.board thead th")
    listops = next(i for i, th in enumerate(headers) if th.text.startswith("listops"))
    # Rows by method name: the script-named one (no ListOps run), linear, softmax.
    assert board_values(browser, listops) == ["", "32.0000", "45.0000"]
    headers[listops].click()
    assert board_values(browser, listops) == ["32.0000", "45.0000", ""]  # a missing value sorts last
    assert headers[listops].get_attribute("aria-sort") == "ascending"
    headers[listops].click()
    assert board_values(browser, listops) == ["45.0000", "32.0000", ""]
    assert headers[listops].get_attribute("aria-sort") == "descending"
    # The published rows sort among themselves, under their label: Reformer has LRA's best ListOps.
    reference_rows = browser.find_elements("css selector", "tbody.reference tr")
    assert "Reported by the paper" in reference_rows[0].text and reference_rows[1].text.startswith("Reformer")
    browser.save_screenshot(str(tmp_path / "board.png"))
    assert (tmp_path / "board.png").stat().st_size > 10_000
    assert console_errors(browser) == []


def test_filters_hide_other_devices(browser, site):
    browser.get((site / "runs.html").as_uri())
    rows = browser.find_elements("css selector", "table.runs tbody tr")
    browser.find_element("css selector", "select[data-filter='device'] option[value='Test GPU']").click()
    shown = [r.text for r in rows if r.is_displayed()]
    assert len(shown) == 2 and all("kernel" in text for text in shown) and len(rows) > 10
    browser.find_element("css selector", "select[data-filter='device'] option[value='']").click()
    assert all(r.is_displayed() for r in rows)


def test_every_plot_draws(browser, site, tmp_path):
    browser.get((site / "plots.html").as_uri())
    sizes = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg.plot')).map(svg => {"
        "  const shapes = svg.querySelectorAll('circle, polyline');"
        "  const box = svg.getBBox();"
        "  return [shapes.length, box.width, box.height,"
        "          Array.from(shapes).filter(s => s.getBBox().width > 0 || s.getBBox().height > 0).length];"
        "})")
    assert len(sizes) >= 10
    for shapes, width, height, drawn in sizes:
        assert shapes > 0 and drawn > 0 and width > 100 and height > 100
    browser.find_element("css selector", "section#kernel figure").screenshot(str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").stat().st_size > 5_000
    assert console_errors(browser) == []


def test_run_page_links_resolve_offline(browser, site):
    browser.get((site / "runs.html").as_uri())
    browser.find_element("css selector", "table.runs tbody tr a").click()
    assert "Reproduce" in browser.page_source
    browser.find_element("link text", "raw record (JSON)").click()
    assert '"schema": 1' in browser.find_element("tag name", "body").text
    assert console_errors(browser) == []
