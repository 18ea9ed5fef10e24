"""Hostile input (issue 47): what a pull request, a forged record or an odd file can do to
`validate` and the site. Each case asserts one clear line naming the input, the exit code, that
nothing already written changed, and that the board's cells are unchanged."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from suite import records
from suite.records import MAX_FILE_BYTES
from suite.site.runs import load_runs
from suite.validate import main as validate
from tests.fake_submission import committed_cell, make_submission, write

RUN_COMMIT = committed_cell()[0]["env"]["git_commit"]  # the commit the fake submission ran at
PAYLOAD = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\nclass PwnAttention: name = 'pwnm'\n"


def named_method(record: dict, name: str, import_path: str) -> dict:
    """``record`` as a run of method ``name`` whose code is at ``import_path``, hash and run id made to match."""
    record = json.loads(json.dumps(record))
    record["method"]["name"] = record["config"]["method"]["name"] = name
    record["method"]["import_path"] = import_path
    record["config_hash"] = records.record_config_hash(record)
    record["run_id"] = f"{record['run_id'][:-8]}{name[:4]:0<8}"
    return record


def snapshot(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture
def planted(tmp_path):
    """A submission holding a payload module and a record naming it (a file on the path, and a
    stdlib module whose import prints); the marker file the payload writes if it ever runs."""
    folder = tmp_path / "submissions" / "mallory"
    paths = make_submission(folder)
    marker = tmp_path / "payload-ran"
    (folder / "payload.py").write_text(PAYLOAD.format(marker=str(marker)))
    victim = json.loads(paths[0].read_text())
    forged = [write(folder, named_method(victim, "pwnm", "payload:PwnAttention")),
              write(folder, named_method(victim, "zen", "this:X"))]
    return folder, marker, forged


def test_validate_never_imports_a_module_a_record_names(planted, monkeypatch, capsys):
    folder, marker, forged = planted
    monkeypatch.syspath_prepend(str(folder))  # the payload is importable: only validate's restraint keeps it out
    monkeypatch.delitem(sys.modules, "this", raising=False)
    before = snapshot(folder)
    assert validate(["--submission", str(folder)]) == 1
    out = capsys.readouterr().out
    assert not marker.exists() and "this" not in sys.modules and "Beautiful is better" not in out
    for path, name in zip(forged, ("pwnm", "zen")):
        [line] = [line for line in out.splitlines() if line.startswith(f"{path}: ")]
        assert f"method.name: unknown method {name!r} (validate imports no module a record names)" in line
    assert snapshot(folder) == before


def test_python_m_validate_from_the_submission_folder_never_runs_its_payload(planted):
    folder, marker, forged = planted
    done = subprocess.run([sys.executable, "-m", "suite.validate", "--submission", "."], cwd=folder,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert not marker.exists() and "Beautiful is better" not in done.stdout + done.stderr
    assert sum("unknown method" in line for line in done.stdout.splitlines()) == len(forged)


def test_the_site_never_imports_a_module_a_record_names(planted, monkeypatch):
    folder, marker, forged = planted
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "this", raising=False)
    runs, _ = load_runs(folder.parent.parent / "none", (folder,))
    assert {run.file for run in runs} >= set(forged)  # read as records, shown as submitted
    assert not marker.exists() and "this" not in sys.modules


# -- files that are not what they are named: links, FIFOs, devices, huge files ------------------------

SECRET = "cafe" * 10  # what a linked-to file holds (it reads as a commit): never printed


def link_to_secret(path: Path) -> None:
    secret = path.parents[2] / "secret.txt"
    secret.write_text(SECRET + "\n")
    path.symlink_to(secret)


def sparse(size: int):
    def make(path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(size)  # 200 MB that take no disk
    return make


# name: (the file's path under a folder of records, how it is made, the reason given for it)
SPECIAL_FILES = {
    "BOARD_COMMIT linked to a secret": ("train/BOARD_COMMIT", link_to_secret, "a symbolic link"),
    "BOARD_COMMIT a FIFO": ("train/BOARD_COMMIT", os.mkfifo, "a FIFO"),
    "BOARD_COMMIT holding no commit": ("train/BOARD_COMMIT", lambda p: p.write_text("TOPSECRET token\n"),
                                       "does not hold a commit (40 hexadecimal digits)"),
    "a FIFO named .json": ("train/listops_short/softmax/fifo.json", os.mkfifo, "a FIFO"),
    "a record linked to /dev/zero": ("train/listops_short/softmax/zero.json", lambda p: p.symlink_to("/dev/zero"),
                                     "a symbolic link"),
    "a 200 MB record": ("train/listops_short/softmax/huge.json", sparse(200 * 2**20),
                        f"209,715,200 bytes, above the cap of {MAX_FILE_BYTES:,} bytes"),
}
SUBMISSION_FILES = {
    "submission.json linked to a secret": ("submission.json", link_to_secret, "a symbolic link"),
    "submission.json a FIFO": ("submission.json", os.mkfifo, "a FIFO"),
}


def within(seconds: int):
    """Fail, rather than hang the test run, when the code under test blocks (a FIFO opened for reading)."""
    def expired(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("case", {**SPECIAL_FILES, **SUBMISSION_FILES})
def test_validate_refuses_a_special_file_in_one_line_without_reading_it(case, tmp_path, capsys):
    folder = tmp_path / "submissions" / "mallory"
    make_submission(folder)
    relative, make, reason = {**SPECIAL_FILES, **SUBMISSION_FILES}[case]
    (folder / relative).unlink(missing_ok=True)
    make(folder / relative)
    before = snapshot(folder)
    with contextlib.contextmanager(within)(10):
        code = validate(["--submission", str(folder)])
    out = capsys.readouterr().out
    assert code == 1
    [line] = out.splitlines()  # the valid records beside it give none
    assert line.startswith(f"{folder / relative}: file: {reason}"), line
    assert SECRET[:12] not in out and "TOPSECRET" not in out
    assert snapshot(folder) == before


@pytest.mark.parametrize("case", SPECIAL_FILES)
def test_the_site_skips_a_special_file_with_one_warning_and_keeps_its_cells(case, tmp_path):
    results = tmp_path / "results"
    make_submission(results)
    (results / "submission.json").unlink()
    (results / "train" / "BOARD_COMMIT").write_text(RUN_COMMIT + "\n")
    shown, problems = load_runs(results)
    assert problems == []
    relative, make, reason = SPECIAL_FILES[case]
    (results / relative).unlink(missing_ok=True)
    make(results / relative)
    with contextlib.contextmanager(within)(10):
        runs, problems = load_runs(results)
    [problem] = problems
    assert str(results / relative) in problem and reason in problem, problem
    assert SECRET[:12] not in problem and "TOPSECRET" not in problem
    assert [run.file for run in runs] == [run.file for run in shown]  # the cells hold the same runs
