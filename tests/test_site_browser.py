"""The built site in real headless Chromium, opened from disk: no console errors, a click on a
column header sorts the board, the filters hide rows, every figure is drawn live (vega-embed from
the build's assets) in place of its static SVG, hovering a point shows its values, a legend click
shows one series alone, links resolve; a board of the CPU board's shape fits a 1,400-pixel window
without horizontal scrolling, at 1,400, 1,280 and 420 pixels (a phone), with no legend or axis text drawn
below 10 px (a figure wider than a phone scrolls inside its box rather than shrink), and shows its first
figure on the first screen above its first table.

Marked `external` (it needs Debian's chromium and chromium-driver): .ci/run installs them and runs
these tests after the default run. Never skipped: without Chromium, its driver or selenium it fails
saying what to install. About 12-20 s on a 2-core machine, most of it starting the browser once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.support.ui import WebDriverWait

from suite.record_store import write_record
from suite.site import build_site
from suite.site.browser import chromium, console_errors
from tests.test_site import write_fixture_results
from tests.test_site_board import cpu_board

pytestmark = pytest.mark.external


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:  # BrowserMissing (not a skip) when chromium or selenium is absent
        yield driver


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    return build_site(write_fixture_results(root / "results"), root / "out").out_dir


def board_values(driver, table, column: int) -> list[str]:
    """The data-value of ``column`` in each row of our part of a board table, top to bottom."""
    return driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll(':scope > tbody:not(.reference) > tr'))"
        ".map(r => r.children[arguments[1]].dataset.value)", table, column)


def test_board_renders_sorts_and_filters(browser, site, tmp_path):
    browser.get((site / "index.html").as_uri())
    assert console_errors(browser) == []
    lra = next(t for t in browser.find_elements("css selector", "table.board") if "listops" in t.text)
    headers = lra.find_elements("css selector", "thead th")
    listops = next(i for i, th in enumerate(headers) if th.text.startswith("listops"))
    # Rows in methods.CANONICAL_ORDER, then by name; the script-named method ran no LRA task.
    assert board_values(browser, lra, listops) == ["45.0000", "32.0000"]
    headers[listops].click()
    assert board_values(browser, lra, listops) == ["32.0000", "45.0000"]
    assert headers[listops].get_attribute("aria-sort") == "ascending"
    headers[listops].click()
    assert board_values(browser, lra, listops) == ["45.0000", "32.0000"]
    assert headers[listops].get_attribute("aria-sort") == "descending"
    mqar = next(t for t in browser.find_elements("css selector", "table.board") if "listops" not in t.text)
    mqar_head = mqar.find_elements("css selector", "thead th")
    assert board_values(browser, mqar, 1) == ["90.0000", "80.0000", "50.0000"]
    mqar_head[1].click()  # a row with no value would sort last; each table sorts on its own
    assert board_values(browser, mqar, 1) == ["50.0000", "80.0000", "90.0000"]
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


def all_figures_live(driver) -> bool:
    return driver.execute_script("const all = document.querySelectorAll('.chart'), live = '.chart.live';"
                                 "return all.length > 0 && document.querySelectorAll(live).length === all.length")


def test_every_plot_draws(browser, site, tmp_path):
    browser.get((site / "plots.html").as_uri())
    WebDriverWait(browser, 60).until(all_figures_live)
    sizes = browser.execute_script(
        "return Array.from(document.querySelectorAll('.chart.live')).map(chart => {"
        "  const svg = chart.querySelector('svg.marks'), box = svg.getBBox();"
        "  const marks = svg.querySelectorAll('g.mark-symbol path, g.mark-line path');"
        "  return [marks.length, box.width, box.height, chart.querySelectorAll('img').length,"
        "          Array.from(marks).filter(m => m.getBBox().width > 0 || m.getBBox().height > 0).length];"
        "})")
    assert len(sizes) >= 10
    for marks, width, height, static_left, drawn in sizes:
        assert marks > 0 and drawn > 0 and width > 300 and height > 200 and static_left == 0
    browser.find_element("css selector", "section#kernel figure").screenshot(str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").stat().st_size > 5_000
    assert console_errors(browser) == []


def tooltip(driver) -> str:
    """The text of vega-tooltip's box once it shows."""
    WebDriverWait(driver, 10).until(lambda d: d.execute_script(
        "const t = document.getElementById('vg-tooltip-element');"
        "return t !== null && t.classList.contains('visible')"))
    return driver.find_element("id", "vg-tooltip-element").text


def test_hovering_a_point_shows_its_values(browser, site):
    browser.get((site / "plots.html").as_uri())
    WebDriverWait(browser, 60).until(all_figures_live)
    figure = browser.find_element("css selector", "section#kernel .chart.live")  # kernel: fwd vs N
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", figure)
    labels = {p: p.get_attribute("aria-label") or ""
              for p in figure.find_elements("css selector", "g.mark-symbol path")}
    point = next(p for p, label in labels.items() if "series: softmax · sdpa" in label and "x: 1024;" in label)
    ActionChains(browser).move_to_element(point).perform()
    shown = tooltip(browser).splitlines()
    # SDPA inside linear's record: 0.5e-9 N^2 s at N = 1024, with its p10-p90 band (0.9x to 1.2x).
    assert shown[:3] == ["series softmax · sdpa", "N (sequence length) 1K", "fwd (s) 524 us"], shown
    assert "p10-p90 472 us to 629 us" in shown[3]
    assert console_errors(browser) == []


def test_a_legend_click_shows_that_series_alone(browser, site):
    browser.get((site / "plots.html").as_uri())
    WebDriverWait(browser, 60).until(all_figures_live)
    figure = browser.find_element("css selector", "section#kernel .chart.live")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", figure)

    def opacity(series: str) -> set[str]:
        return {p.get_attribute("opacity") or "1" for p in figure.find_elements("css selector", "g.mark-symbol path")
                if f"series: {series};" in (p.get_attribute("aria-label") or "")}

    assert opacity("linear · chunk") == opacity("softmax · sdpa") == {"1"}
    legend = figure.find_elements("css selector", "g.role-legend-label text")
    entry = next(e for e in legend if e.text == "linear · chunk")
    ActionChains(browser).move_to_element(entry).click().perform()
    WebDriverWait(browser, 5).until(lambda d: opacity("softmax · sdpa") != {"1"})
    assert opacity("linear · chunk") == {"1"} and all(float(v) < 0.5 for v in opacity("softmax · sdpa"))
    assert console_errors(browser) == []


def test_without_javascript_every_figure_is_its_static_svg(browser, site):
    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.get((site / "plots.html").as_uri())
        images = browser.execute_script  # scripts are off for the page, not for the driver
        # With scripting off the parser reads <noscript> as markup: the page says the figures are static.
        assert "JavaScript is off" in images("return document.querySelector('noscript p.noscript').textContent")
        shown = images("return Array.from(document.querySelectorAll('.chart')).map(c => {"
                       "  const img = c.querySelector('img');"
                       "  const loaded = img !== null && img.complete;"
                       "  return [c.classList.contains('live'), loaded, img ? img.naturalWidth : 0];"
                       "})")
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
    assert len(shown) >= 10
    assert all(not live and loaded and width > 300 for live, loaded, width in shown), shown


def test_run_page_links_resolve_offline(browser, site):
    browser.get((site / "runs.html").as_uri())
    browser.find_element("css selector", "table.runs tbody tr a").click()
    assert "Reproduce" in browser.page_source
    browser.find_element("link text", "raw record (JSON)").click()
    assert '"schema": 1' in browser.find_element("tag name", "body").text
    assert console_errors(browser) == []


@pytest.fixture(scope="module")
def cpu_site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cpu-site")
    for record in cpu_board():
        write_record(record, root / "results")
    return build_site(root / "results", root / "out").out_dir


# Per figure: its box, the drawing inside it, and whether the box scrolls (a clipped figure would).
FIGURE_BOXES = """
return Array.from(document.querySelectorAll('figure.chart-figure')).map(f => {
  const chart = f.querySelector('.chart'), drawing = chart.querySelector('svg') || chart.querySelector('img');
  const box = chart.getBoundingClientRect(), drawn = drawing.getBoundingClientRect();
  return {left: box.left, right: box.right, top: box.top + window.scrollY, drawn_right: drawn.right,
          scrolls: chart.scrollWidth > chart.clientWidth + 1, shown: drawn.width > 200};
});"""


# Every legend and axis text of the live figures, with the size it is drawn at on screen: its font size
# times the scale its SVG is drawn at (a figure scaled down to a narrow window shrinks its text).
CHART_TEXT = """
return Array.from(document.querySelectorAll('.chart.live svg g.role-axis text, .chart.live svg g.role-legend text'))
  .filter(t => t.textContent.trim() !== '')
  .map(t => { const m = t.getScreenCTM();
              return [t.textContent, parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b)]; });"""
SMALLEST_TEXT = 10  # px: below it a legend or axis label cannot be read


@pytest.mark.parametrize("width", [1400, 1280, 420])
def test_the_board_fits_the_window_and_leads_with_its_figures(browser, cpu_site, tmp_path, width):
    # A phone's width through the device metrics: a desktop Chromium window is never narrower than 500 px.
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    try:
        browser.get((cpu_site / "index.html").as_uri())
        WebDriverWait(browser, 60).until(all_figures_live)
        inner, scroll = browser.execute_script(
            "return [window.innerWidth, document.documentElement.scrollWidth]")
        assert inner == width and scroll <= inner, (inner, scroll)  # no horizontal scrolling
        figures = browser.execute_script(FIGURE_BOXES)
        # Every figure's box lies inside the window; a figure wider than a phone's window scrolls inside
        # its box (never scaled down, never the page); at a desktop's width none needs to.
        assert figures and all(f["shown"] and f["left"] >= 0 and f["right"] <= inner + 1 for f in figures), figures
        assert all(f["drawn_right"] <= f["right"] + 1 or f["scrolls"] for f in figures), figures  # none clipped
        assert width < 1280 or not any(f["scrolls"] for f in figures), figures
        texts = browser.execute_script(CHART_TEXT)
        smallest = sorted(texts, key=lambda t: t[1])[:5]
        assert len(texts) > 20 and smallest[0][1] >= SMALLEST_TEXT, smallest
        table_top, tables = browser.execute_script(
            "return [document.querySelector('table.board').getBoundingClientRect().top + window.scrollY,"
            "        document.querySelectorAll('table.board').length]")
        assert figures[0]["top"] < min(table_top, 900), (figures[0], table_top)  # on the first screen
        assert tables == 2  # recall, then ListOps short
        lead = browser.find_element("css selector", "section.lead")
        assert "mqar" in lead.text and "best sub-quadratic" in lead.text and "equal state" in lead.text
        browser.save_screenshot(str(tmp_path / f"first-screen-{width}.png"))
        assert console_errors(browser) == []
        browser.find_element("css selector", "table.board a.curve").click()  # a cell's validation curves
        WebDriverWait(browser, 60).until(all_figures_live)
        assert "Validation curves" in browser.title and console_errors(browser) == []
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        browser.set_window_size(1400, 1000)
