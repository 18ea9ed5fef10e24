"""Screenshots of the leaderboard site for the docs: the board and one plot, in headless Chromium.

    python scripts/site_screenshots.py [--results results] [--board docs/site_board.png]
                                       [--narrow docs/site_board_420.png]
                                       [--plot docs/site_plot.png] [--section kernel]
                                       [--tiers docs/board-tiers.png]

Builds the site from --results into a temporary folder (site/_build is left alone), opens it from
disk (file://) and saves the board's first screen in a 1,400 x 900 window (its figures drawn live),
the same at a phone's 420 x 900 (--narrow), and the first figure of --section (a mode's section of the
plots page), drawn live, with the tooltip of a point it hovers; then (--tiers) the board built with a
test's fake H100 submission beside the records (tests/fake_submission.py), at the table that holds its
submitted row. Needs chromium, chromium-driver and selenium (see suite/site/browser.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.support.ui import WebDriverWait

from suite import modes
from suite.site import build_site
from suite.site.browser import BrowserMissing, chromium, console_errors

LIVE = "return document.querySelectorAll('.chart.live').length === document.querySelectorAll('.chart').length"


def take(results: Path, board_png: Path, narrow_png: Path, plot_png: Path, section: str) -> None:
    with tempfile.TemporaryDirectory(prefix="suite-site-") as tmp:
        out = build_site(results, Path(tmp) / "site").out_dir
        with chromium(width=1400, height=900) as driver:
            driver.get((out / "index.html").resolve().as_uri())
            WebDriverWait(driver, 120).until(lambda d: d.execute_script(LIVE))  # the first screen's figures, live
            driver.save_screenshot(str(board_png))
            # A phone's width through the device metrics: a desktop window is never narrower than 500 px.
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": 420, "height": 900, "deviceScaleFactor": 1, "mobile": False})
            driver.get((out / "index.html").resolve().as_uri())
            WebDriverWait(driver, 120).until(lambda d: d.execute_script(LIVE))
            driver.save_screenshot(str(narrow_png))
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            driver.get((out / "plots.html").resolve().as_uri())
            WebDriverWait(driver, 120).until(lambda d: d.execute_script(LIVE))
            figures = driver.find_elements("css selector", f"section#{section} figure")
            if not figures:
                raise SystemExit(f"error: no figure in section {section!r} of the plots page")
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", figures[0])
            points = figures[0].find_elements("css selector", ".chart g.mark-symbol path")
            if points:  # a point's tooltip, as a reader hovering it sees
                ActionChains(driver).move_to_element(points[len(points) // 2]).perform()
            figures[0].screenshot(str(plot_png))
            errors = console_errors(driver)
            if errors:
                raise SystemExit("error: the browser console reported: " + "; ".join(errors))
    print(f"board: {board_png}\nboard at 420 px: {narrow_png}\nplot: {plot_png}")


def take_tiers(results: Path, tiers_png: Path) -> None:
    """The board with both tiers: the records as verified, a fake GPU submission of one of their cells."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's tests package
    from tests.fake_submission import make_submission

    with tempfile.TemporaryDirectory(prefix="suite-site-") as tmp:
        folder = Path(tmp) / "submissions" / "ada-h100"
        make_submission(folder)
        out = build_site(results, Path(tmp) / "site", submitted=(folder,)).out_dir
        with chromium(width=1400, height=900) as driver:
            driver.get((out / "index.html").resolve().as_uri())
            WebDriverWait(driver, 120).until(lambda d: d.execute_script(LIVE))
            badge = driver.find_element("css selector", ".tier-submitted")
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", badge)
            driver.save_screenshot(str(tiers_png))
    print(f"both tiers: {tiers_png}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Screenshots of the leaderboard site for the docs.")
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--board", type=Path, default=Path("docs/site_board.png"))
    parser.add_argument("--narrow", type=Path, default=Path("docs/site_board_420.png"))
    parser.add_argument("--plot", type=Path, default=Path("docs/site_plot.png"))
    parser.add_argument("--tiers", type=Path, default=None, help="also the board with a fake submission beside")
    parser.add_argument("--section", default="kernel", choices=[m.kind for m in modes.registry().values() if m.section])
    args = parser.parse_args()
    try:
        take(args.results, args.board, args.narrow, args.plot, args.section)
        if args.tiers:
            take_tiers(args.results, args.tiers)
    except BrowserMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
