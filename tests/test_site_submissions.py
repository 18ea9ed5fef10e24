"""A board from several folders: the project's records (verified) and a submission folder of a fake
GPU machine (tests/fake_submission.py), with hostile records in it. Every row says its tier; the
submitted runs never share a cell with the project's; what the submitter wrote reaches the page
as text; records whose names would leave their folder, and malformed ones, are skipped with a line
naming them while the rest builds. The browser test (marked external) filters by tier in Chromium."""

from __future__ import annotations

import copy
import csv
import json
import shutil
from pathlib import Path

import pytest

from suite.site import build_site
from tests.fake_submission import BOARD, CELL, make_submission, write

SCRIPT_SUBMITTER = "Ada <script>alert('submitter')</script>"
SCRIPT_ERROR = "<script>alert('error')</script>"


def hostile_submission(folder: Path) -> dict[str, Path]:
    """The fake GPU submission, its submitter a script, plus a failed run whose error is a script,
    a record whose run id climbs out of the folder, and a truncated file."""
    paths = make_submission(folder, submitter=SCRIPT_SUBMITTER)
    record = json.loads(paths[0].read_text())
    failed = copy.deepcopy(record)
    failed.update(status="error", error=SCRIPT_ERROR, run_id=record["run_id"][:-1] + "9")
    escaping = copy.deepcopy(record)
    escaping["run_id"] = "../../../../escaped"
    escape = folder / "train" / CELL[0] / CELL[1] / "escape.json"
    escape.write_text(json.dumps(escaping))
    truncated = folder / "train" / CELL[0] / CELL[1] / "truncated.json"
    truncated.write_text(paths[1].read_text()[:300])
    return {"failed": write(folder, failed), "escape": escape, "truncated": truncated}


def project_results(folder: Path) -> Path:
    """A finished board's ListOps point, pinned (tests/data/board_listops/)."""
    shutil.copytree(BOARD / "train" / CELL[0], folder / "train" / CELL[0])
    shutil.copy(BOARD / "train" / "BOARD_COMMIT", folder / "train")
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiers")
    hostile = hostile_submission(root / "ada-h100")
    report = build_site(project_results(root / "results"), root / "out", submitted=(root / "ada-h100",))
    return report, hostile


def test_rows_say_their_tier_and_the_tiers_never_share_a_cell(built):
    report, _ = built
    html = (report.out_dir / "index.html").read_text()
    assert 'data-tier="submitted" data-hardware="NVIDIA H100 80GB HBM3"' in html
    # One submitted row (the submission's one cell) and every method's verified row, in the accuracy
    # table and in the cost table.
    assert html.count('class="tier tier-submitted"') == 2
    assert html.count('class="tier tier-verified"') >= 2 * 7
    assert '<select data-filter="tier">' in html and '<select data-filter="hardware">' in html
    assert "Throughput and memory compare only within one hardware class" in html
    assert "verified: run by the project at suite commit d846858003a3, the board&#39;s pinned commit" in html
    with open(report.out_dir / "records.csv") as f:
        rows = list(csv.DictReader(f))
    submitted = [r for r in rows if r["tier"] == "submitted"]
    assert len(submitted) == 4 and {r["hardware"] for r in submitted} == {"NVIDIA H100 80GB HBM3"}
    assert {r["added"] for r in submitted} == {"2026-12-03"}
    assert all(r["record"].startswith("submitted/ada-h100/") for r in submitted)
    assert len(rows) == len(list((BOARD / "train" / CELL[0]).rglob("*.json"))) + 4
    verified = len(rows) - 4  # the footer names where the records came from: no submitted one is "under results/"
    assert f"from {len(rows)} record(s): {verified} of the project&#39;s and 4 submitted in 1 folder(s)" in html


def test_what_a_submitter_wrote_is_text_and_bad_records_are_skipped_by_name(built):
    report, hostile = built
    pages = {p: p.read_text() for p in report.out_dir.rglob("*.html")}
    assert not any("<script>alert" in text for text in pages.values())  # every field escaped
    escaped_error = "&lt;script&gt;alert(&#39;error&#39;)&lt;/script&gt;"
    assert any(escaped_error in text for text in pages.values())
    assert any("&lt;script&gt;alert(&#39;submitter&#39;)" in text for text in pages.values())
    escape, truncated = str(hostile["escape"]), str(hostile["truncated"])
    assert [p for p in report.problems if escape in p] == [
        f"{escape}: field 'run_id' is '../../../../escaped': as a path it would leave its folder (expected "
        "letters, digits and _ . + -, at most 128, starting with a letter or digit); skipped"]
    assert any(truncated in p and "not a readable JSON record" in p for p in report.problems)
    assert len(report.problems) == 2
    assert not (report.out_dir.parent / "escaped").exists()
    assert not list(report.out_dir.rglob("escape*"))


@pytest.mark.external
def test_the_tier_filter_in_the_browser_and_no_injected_script_runs(built):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.support.ui import Select

    from suite.site.browser import chromium, console_errors

    report, _ = built
    with chromium() as driver:
        driver.get((report.out_dir / "index.html").as_uri())
        assert console_errors(driver) == []
        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.text  # noqa: B018 (no injected alert() ran)

        def shown(tier: str) -> int:
            return driver.execute_script(
                "return Array.from(document.querySelectorAll('table.board tbody tr[data-tier]'))"
                ".filter(r => !r.hidden && r.dataset.tier === arguments[0]).length", tier)

        assert shown("verified") >= 7 and shown("submitted") == 1
        tier = Select(driver.find_element("css selector", 'select[data-filter="tier"]'))
        tier.select_by_value("submitted")
        assert (shown("verified"), shown("submitted")) == (0, 1)
        tag = driver.find_element("css selector", "table.board tr[data-tier=submitted] .tier-submitted")
        assert "<script>alert('submitter')</script>" in tag.text  # shown as text, not run
        tier.select_by_value("verified")
        assert shown("verified") >= 7 and shown("submitted") == 0
        tier.select_by_value("")
        hardware = Select(driver.find_element("css selector", 'select[data-filter="hardware"]'))
        hardware.select_by_value("NVIDIA H100 80GB HBM3")
        assert (shown("verified"), shown("submitted")) == (0, 1)
        failed = next(p for p in report.out_dir.glob("runs/*9.html"))
        driver.get(failed.as_uri())
        assert "<script>alert('error')</script>" in driver.find_element("css selector", "table.kv").text
        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.text  # noqa: B018
        assert console_errors(driver) == []


def test_a_submission_without_submission_json_builds_as_its_warning_says(tmp_path):
    """Issue 46: the warning says the submission is shown without a submitter; the build then went on
    to stop on the missing field. It builds, and the rows say submitted, by nobody."""
    folder = tmp_path / "anon-h100"
    make_submission(folder)
    (folder / "submission.json").unlink()
    report = build_site(project_results(tmp_path / "results"), tmp_path / "out", submitted=(folder,))
    assert any("submission.json: missing; the submission is shown without a submitter or date" in p
               for p in report.problems)
    html = (report.out_dir / "index.html").read_text()
    assert html.count('class="tier tier-submitted"') == 2 and "submitted by" not in html


def test_a_submitted_run_of_a_released_suite_names_its_version_where_it_has_no_commit(tmp_path):
    """A run of the suite installed from its wheel or an index release records the version and no
    commit (issue 46), and validate takes that version in place of a commit: the row's provenance
    names the release instead of saying "suite commit not recorded"."""
    from suite.site.pages import tier_title
    from suite.site.runs import load_runs

    folder = tmp_path / "wheel-h100"
    for path in make_submission(folder):
        record = json.loads(path.read_text())
        record["env"].update(git_commit=None, git_dirty=None)
        path.write_text(json.dumps(record))
    (tmp_path / "results").mkdir()
    runs, _ = load_runs(tmp_path / "results", submitted=(folder,))
    titles = {tier_title(run) for run in runs}
    assert titles == {"submitted by Ada Lovelace, added 2026-12-03, suite release 0.1.0 (installed as a package: no "
                      "commit); not rerun by the project. Machine: NVIDIA H100 80GB HBM3; torch 2.13.0+cu124, "
                      "triton 3.9.0, fla 0.6.0, cuda 12.4, driver 550.54.15"}
