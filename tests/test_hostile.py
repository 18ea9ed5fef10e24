"""Hostile input (issue 47): what a pull request, a forged record or an odd file can do to
`validate` and the site. Each case asserts one clear line naming the input, the exit code, that
nothing already written changed, and that the board's cells are unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from suite import records
from suite.site.runs import load_runs
from suite.validate import main as validate
from tests.fake_submission import make_submission, write

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
