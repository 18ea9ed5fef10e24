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
import time
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tasks
from methods import AttentionMethod, contract, registry
from methods.registry import REGISTRY
from suite import record_store, records, submission
from suite.board import main as board_main
from suite.check_method import main as check_method
from suite.records import MAX_FILE_BYTES
from suite.schema import INT_LIMIT
from suite.site.__main__ import main as site_main
from suite.site.board import board_rows, conflict_messages, off_protocol_messages
from suite.site.runs import load_runs
from suite.validate import check_file as validate_file
from suite.validate import main as validate
from tests.fake_submission import BOARD, committed_cell, make_submission, write
from tests.outside_methods import StatelessSoftmax
from tests.test_bad_input import BUDGET, cli, composed, refusal  # noqa: F401 (cli: a fixture)

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
    "submission.json linked to /dev/zero": ("submission.json", lambda p: p.symlink_to("/dev/zero"), "a symbolic link"),
    "submission.json a FIFO": ("submission.json", os.mkfifo, "a FIFO"),
    "a 200 MB submission.json": ("submission.json", sparse(200 * 2**20),
                                 f"209,715,200 bytes, above the cap of {MAX_FILE_BYTES:,} bytes"),
}


class StillBlocked(BaseException):
    """Raised in code under test that blocks: not an OSError (as TimeoutError is), so no ``except
    OSError`` in that code can take it for an unreadable file and let a hang pass as a refusal."""


@contextlib.contextmanager
def within(seconds: int):
    """Fail, rather than hang the test run, when the code under test blocks (a FIFO opened for reading)."""
    def expired(signum, frame):
        raise StillBlocked(f"still blocked after {seconds} s")
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
    with within(10):
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
    with within(10):
        runs, problems = load_runs(results)
    [problem] = problems
    assert str(results / relative) in problem and reason in problem, problem
    assert SECRET[:12] not in problem and "TOPSECRET" not in problem
    assert [run.file for run in runs] == [run.file for run in shown]  # the cells hold the same runs


@pytest.mark.parametrize("case", SUBMISSION_FILES)
def test_the_install_step_refuses_a_special_submission_json_in_one_line(case, tmp_path):
    """CI's install step (``python -m suite.submission install``, before validate) reads submission.json
    with the same reader: a link, a FIFO or a huge file is one line, never followed, blocked on or read."""
    folder = tmp_path / "submissions" / "mallory"
    make_submission(folder)
    relative, make, reason = SUBMISSION_FILES[case]
    (folder / relative).unlink()
    make(folder / relative)
    with within(10):
        packages, lines = submission.read_packages(folder)
    assert packages == []
    [line] = lines
    assert line.startswith(f"{folder / relative}: file: {reason}"), line
    assert SECRET[:12] not in line


def test_a_sweeps_resume_check_skips_a_fifo_with_one_warning(tmp_path):
    results = tmp_path / "results"
    paths = make_submission(results)
    (results / "submission.json").unlink()  # a results folder holds records only
    fifo = results / "train" / "listops_short" / "softmax" / "fifo.json"
    os.mkfifo(fifo)
    with within(10), pytest.warns(UserWarning) as warned:
        found = [path for path, _ in record_store.iter_records(results)]
    assert found == sorted(paths)
    [warning] = warned
    expected = f"a regular file of at most {MAX_FILE_BYTES:,} bytes"
    assert str(warning.message) == f"skipping {fifo}: a FIFO; expected {expected}"


# -- records that would move a cell ------------------------------------------------------------------

def forged_copy(edit, rehash: bool = True):
    """A copy of a seed's record, as a file of its own (new run id), edited by ``edit``; its config
    hash recomputed unless the forger did not."""
    def make(record: dict) -> dict:
        record = json.loads(json.dumps(record))
        edit(record)
        if rehash:
            record["config_hash"] = records.record_config_hash(record)
        record["run_id"] = f"20261203T130000Z_{record['config_hash'][:8]}_f0f0f0f0"
        return record
    return make


def set_at(*path, value):
    def edit(record: dict) -> None:
        node = record
        for key in path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return edit


# name: (the forged record made from seed 0's, what the site says of it, what validate says). A
# majority class is a function of the data: ListOps's comes from tasks/lra/baselines.json, computed
# from the data of that exact config; a recall task's follows from its config (below).
FORGED = {
    "an ok record without its accuracy": (forged_copy(set_at("metrics", "test_accuracy", value=KeyError)),
                                          "field 'metrics.test_accuracy': missing from an ok train record",
                                          "field 'metrics.test_accuracy': missing from an ok train record"),
    "a baseline edited to 0.99": (forged_copy(set_at("metrics", "baseline_accuracy", value=0.99)),
                                  "field 'metrics.baseline_accuracy' is 0.99, not its task's 0.152 (from its task's "
                                  "config)",
                                  "metrics.baseline_accuracy: 0.99 is not its task's baseline; expected 0.152"),
    "an lr edited, hash not recomputed": (forged_copy(set_at("config", "budget", "lr", value=0.02), rehash=False),
                                          "config_hash", "config_hash: "),
    "a fourth seed, hash recomputed": (forged_copy(lambda r: (set_at("config", "seed", value=3)(r),
                                                              set_at("env", "seed", value=3)(r))),
                                       "seed 3 is not one of the seeds of the cpu board's protocol (0, 1, 2)",
                                       "config.seed: 3 is not a seed of the cpu board's protocol"),
    "a method renamed at the top only": (forged_copy(set_at("method", "name", value="linear")),
                                         "field 'method.name' is 'linear' but 'config.method.name' is 'softmax'",
                                         "field 'method.name' is 'linear' but 'config.method.name' is 'softmax'"),
}


def cell_of(runs) -> tuple:
    """The board cell of the records' configuration: its values, mean, verdict and baseline."""
    [row] = [row for row in board_rows(runs) if row.method == "softmax" and row.tier == "verified"]
    [cell] = row.cells.values()
    return cell.values(), cell.verdict(), cell.baseline()


def site_messages(runs, problems) -> list[str]:
    return problems + conflict_messages(runs) + off_protocol_messages(runs)


@pytest.mark.parametrize("case", FORGED)
def test_a_forged_record_moves_no_cell_and_is_named_by_the_site(case, tmp_path):
    results = tmp_path / "results"
    paths = make_submission(results)
    (results / "submission.json").unlink()
    before_runs, problems = load_runs(results)
    assert problems == [] and len(cell_of(before_runs)[0]) == 3
    make, says, _ = FORGED[case]
    forged = write(results, make(json.loads(paths[0].read_text())))
    before = snapshot(results)
    runs, problems = load_runs(results)
    [message] = site_messages(runs, problems)
    assert str(forged.relative_to(results)) in message and says in message, message
    assert cell_of(runs) == cell_of(before_runs)
    assert snapshot(results) == before


@pytest.mark.parametrize("case", [c for c, (_, _, says) in FORGED.items() if says is not None])
def test_a_forged_record_is_one_line_of_validate(case, tmp_path, capsys):
    folder = tmp_path / "submission"
    paths = make_submission(folder)
    make, _, says = FORGED[case]
    forged = write(folder, make(json.loads(paths[0].read_text())))
    before = snapshot(folder)
    assert validate(["--submission", str(folder)]) == 1
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{forged}: ") and says in line, line
    assert snapshot(folder) == before


MQAR_RECORD = Path(__file__).resolve().parent / "data" / "recall" / "mqar_softmax.json"  # a CPU board record


@pytest.mark.parametrize("stated", [0.99, 0.5, None])
def test_a_recall_records_baseline_is_its_tasks_own_in_validate_and_the_site(stated, tmp_path):
    """Chance in a recall task follows from its config (1 / pairs in MQAR: tasks.baseline), so
    validate knows it without any verified record, and the site refuses a record that states
    another one, even where it is the only record of its task."""
    record = json.loads(MQAR_RECORD.read_text())
    pairs = record["config"]["task"]["num_kv_pairs"]
    assert record["metrics"]["baseline_accuracy"] == tasks.baseline("mqar", record["config"]["task"]) == 1 / pairs
    if stated is not None:
        record["metrics"]["baseline_accuracy"] = stated
    path = write(tmp_path / "results", record)
    _, problems = validate_file(path, submission=False)
    runs, said = load_runs(tmp_path / "results")
    if stated is None:
        assert not [p for p in problems if p.field == "metrics.baseline_accuracy"] and len(runs) == 1
        return
    assert [str(p) for p in problems if p.field == "metrics.baseline_accuracy"] == [
        f"{path}: metrics.baseline_accuracy: {stated!r} is not its task's baseline; expected {1 / pairs!r}, as the "
        "task's config defines it"]
    assert runs == [] and said == [f"{path}: field 'metrics.baseline_accuracy' is {stated!r}, not its task's "
                                   f"{1 / pairs!r} (from its task's config); skipped"]


def test_a_majority_of_forged_majority_class_baselines_refuses_the_forgeries_not_the_honest_record(tmp_path):
    """Issue 47, input 9 on ListOps: the baseline is read from the table of the task's data
    (tasks/lra/baselines.json), not voted by the records, so two forged records of three are the two
    refused, and the cell keeps its honest baseline."""
    results = tmp_path / "results"
    paths = make_submission(results)
    (results / "submission.json").unlink()
    honest = cell_of(load_runs(results)[0])
    for path in paths[1:3]:
        record = json.loads(path.read_text())
        record["metrics"]["baseline_accuracy"] = 0.99
        path.write_text(json.dumps(record))
    runs, problems = load_runs(results)
    assert sorted(p.split(":")[0] for p in problems) == sorted(map(str, paths[1:3]))
    assert [r.file for r in runs if r.method == "softmax"] == [paths[0]] and cell_of(runs)[2] == honest[2] == 0.152
    assert [validate_file(p, submission=False)[1][0].field for p in paths[1:3]] == ["metrics.baseline_accuracy"] * 2


def no_test_size(record: dict) -> None:
    del record["task"]["num_test"], record["config"]["budget"]["num_test"]
    record["config_hash"] = records.record_config_hash(record)  # an edit of the config, hashed again


@pytest.mark.parametrize("edit, field, why", [
    (lambda r: r["metrics"].update(stopped_early=False, steps=6000), "metrics.stopped_early",
     "is false, but metrics.val_curve reaches budget.target_val_accuracy 0.99 before budget.max_steps, where the run "
     "stops"),
    (lambda r: r["metrics"].update(val_curve=[[s, min(a, 0.9)] for s, a in r["metrics"]["val_curve"]],
                                   val_accuracy=0.9), "metrics.stopped_early",
     "is true, but the best validation accuracy 0.9 is below budget.target_val_accuracy 0.99"),
    (lambda r: r["metrics"].update(val_curve=[[s, min(a, 0.9)] for s, a in r["metrics"]["val_curve"]]),
     "metrics.stopped_early", "is true, but no point of metrics.val_curve reaches budget.target_val_accuracy 0.99"),
    (lambda r: r["metrics"].update(steps=6000), "metrics.stopped_early", "is true, but metrics.steps 6000 is "
     "budget.max_steps"),
    (lambda r: r["metrics"].update(stopped_early=False, val_accuracy=0.9,
                                   val_curve=[[s, min(a, 0.9)] for s, a in r["metrics"]["val_curve"]]),
     "metrics.stopped_early", "is false, but metrics.steps 2200 is below budget.max_steps 6000"),
    (no_test_size, "task.num_test", "states no test size (nor budget.num_test): the comparison test needs it"),
], ids=["stopped-false-at-target", "stopped-below-target", "curve-below-target", "stopped-at-max-steps",
        "not-stopped-short", "no-test-size"])
def test_a_record_whose_early_stop_contradicts_its_curve_or_that_has_no_test_size_is_left_out(edit, field, why,
                                                                                              tmp_path):
    """The site ranks solved cells by their early stop and tests every gap with the test set's size:
    a record whose early-stop fields contradict its curve or steps, or that states no test size, is
    named by validate with its path and left out of every comparison by the site."""
    record = json.loads(MQAR_RECORD.read_text())
    assert records.train_problems(record) == []  # the record as written passes
    edit(record)
    path = write(tmp_path / "results", record)
    _, problems = validate_file(path, submission=False)
    assert [str(p) for p in problems if p.field == field] == [
        f"{path}: {field}: {why}; expected a record as suite/training.py writes it"]
    runs, said = load_runs(tmp_path / "results")
    assert runs == [] and said == [f"{path}: {field} {why}; skipped"]


def test_a_submitted_copy_that_disagrees_with_a_verified_run_is_shown_apart_and_marked(tmp_path):
    results, submitted = tmp_path / "results", tmp_path / "submissions" / "mallory"
    paths = make_submission(results)
    (results / "submission.json").unlink()
    make_submission(submitted)
    for path in sorted(submitted.rglob("*.json"))[1:]:
        path.unlink()
    copy = json.loads(paths[0].read_text())
    copy["metrics"]["test_accuracy"] = 0.99  # the same run (config hash and seed), a better number
    write(submitted, copy)
    verified, _ = load_runs(results)
    runs, problems = load_runs(results, (submitted,))
    [message] = site_messages(runs, problems)
    assert message.startswith("conflict: the submitted record ") and "test_accuracy=0.99" in message
    assert "the verified row shows the verified one, the submitted row of mallory shows it marked 'disputed'" in message
    assert cell_of(runs) == cell_of(verified)  # the verified cell is as it was
    [row] = [row for row in board_rows(runs) if row.tier == "submitted"]
    [cell] = row.cells.values()
    assert [r.metric("test_accuracy") for r in cell.disputed] == [0.99]


def test_two_submission_folders_of_one_origin_are_refused(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    for name in ("S2 x", "S2_x"):
        make_submission(tmp_path / name)
    code = site_main(["--results", str(results), "--out", str(tmp_path / "site"),
                      "--submitted", str(tmp_path / "S2 x"), "--submitted", str(tmp_path / "S2_x")])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "site").exists()
    [line] = err.splitlines()
    assert "share the origin 'S2_x'" in line and "rename one" in line, err


# -- names that would become paths, and the contract kit ---------------------------------------------

class OutsideName(StatelessSoftmax):
    name = "../../../outside"


class ScriptName(StatelessSoftmax):
    name = "<script>x"


class Nameless(AttentionMethod):
    impls = ("naive",)


class RaisingInit(StatelessSoftmax):
    name = "raising_init"

    def __init__(self, *args, **kwargs):
        raise RuntimeError("boom in __init__")


class NeverReturns(StatelessSoftmax):
    name = "never_returns"

    def _forward_sdpa(self, q, k, v, causal):
        while q.shape[2] == 1 and causal and q.dtype == torch.float32:  # one case never returns (the rest run)
            pass
        return super()._forward_sdpa(q, k, v, causal)


# name: (check-method's argument list, what its one line says)
CHECK_METHOD = {
    "a class named ../../../outside": ([f"{__name__}:OutsideName"], "has name '../../../outside'; expected a lower"),
    "a class named <script>": ([f"{__name__}:ScriptName"], "has name '<script>x'; expected a lower"),
    "a class without a name": ([f"{__name__}:Nameless"], f"{__name__}:Nameless has name None"),
    "a class whose __init__ raises": ([f"{__name__}:RaisingInit"], "method class raising_init cannot be built "
                                      "(head_dim=16): RuntimeError: boom in __init__"),
    "favor with 10^8 features": (["favor", "--options", '{"num_features": 100000000}'],
                                 "--options num_features=100000000 is beyond the kit's bound, 65536"),
    "options nested 5,000 deep": (["favor", "--options", '{"a": ' + "[" * 5000 + "]" * 5000 + "}"],
                                  "--options is nested too deeply to read; expected an object of option values"),
    "a number nested in an option": (["favor", "--options", '{"num_features": 8, "x": {"sizes": [4, 1e9]}}'],
                                     "--options x.sizes[1]=1000000000.0 is beyond the kit's bound, 65536"),
}


@pytest.mark.parametrize("case", CHECK_METHOD)
def test_check_method_refuses_a_bad_class_or_option_in_one_line(case, registry_kept, capsys):
    argv, says = CHECK_METHOD[case]
    code = check_method(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith("error: ") and says in line, line
    assert "../../../outside" not in REGISTRY and "<script>x" not in REGISTRY


def test_a_check_that_never_returns_is_stopped_at_its_limit():
    started = time.monotonic()
    with pytest.raises(contract.ContractError, match=r"did not finish in 0.2 s \(the kit's limit per check\)"):
        with contract.time_limit(0.2):
            while True:
                pass
    assert time.monotonic() - started < 5


@pytest.mark.slow  # the whole contract on a method, one of whose checks waits out the limit
def test_a_method_that_never_returns_fails_that_check_and_the_kit_goes_on(registry_kept):
    failures = contract.check_method(NeverReturns, seconds=10)  # not less: a check's first import may take seconds
    assert [str(f) for f in failures] == ["never_returns path sdpa B=2 N=1 D=5 E=3 chunk=16 float32 causal: did not "
                                          "finish in 10 s (the kit's limit per check)"]


def test_no_record_is_written_outside_results_dir(tmp_path):
    record = json.loads(sorted((BOARD / "train").rglob("*.json"))[0].read_text())
    record["method"]["name"] = record["config"]["method"]["name"] = "../../../outside"
    with pytest.raises(records.RecordError, match=r"field 'method.name' is '../../../outside'; expected a lower"):
        record_store.write_record(record, tmp_path / "results")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_no_record_is_written_through_a_link_out_of_results_dir(tmp_path):
    """A name may be an identifier and the path still leave results_dir: a folder on the way that is a
    link to elsewhere. The writer resolves the path first and refuses it."""
    results, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    elsewhere.mkdir()
    results.mkdir()
    (results / "train").symlink_to(elsewhere, target_is_directory=True)
    record = json.loads(sorted((BOARD / "train").rglob("*.json"))[0].read_text())
    with pytest.raises(records.RecordError, match=r"its path '.*' leads outside results_dir$"):
        record_store.write_record(record, results)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_the_registry_the_tasks_and_the_records_hold_one_name_rule():
    assert registry.NAME.pattern == records.NAME.pattern == tasks.NAME.pattern
    assert registry.NAME_RULE == records.NAME_RULE == tasks.NAME_RULE


# -- the config: what a run reads from outside it, and the bounds it shares with the record ----------

# name: (the command's arguments, with a preset folder for {preset}; what its one line says)
CONFIGS = {
    "oc.env in a searchpath preset": (("hydra.searchpath=[file://{preset}]", "experiment=leak"),
                                      "budget.lr=${oc.env:WT47_LR,0.001} reads an environment variable into the "
                                      "config, and so into the record"),
    "another resolver on the command line": (("budget.name=${oc.create:x}",),
                                             "budget.name=${oc.create:x} uses the resolver 'oc.create', which reads "
                                             "from outside the config"),
    "a count beyond 64 bits": ((f"budget.max_steps={2**63}",),
                               f"budget.max_steps must be in [1, {INT_LIMIT}], got {2**63}"),
    "a 5,000-character results_dir": ((f"results_dir=/tmp/{'x' * 5000}",), "results_dir must be a path of at most "
                                      "4095 bytes, each folder's name at most 255, got '/tmp/xxxx"),
    "a run of a method class named ../../../outside": ((f"method={__name__}:OutsideName", "task=mqar"),
                                                       f"method class {__name__}:OutsideName has name "
                                                       "'../../../outside'; expected a lower"),
}


@pytest.mark.parametrize("case", CONFIGS)
def test_a_value_from_outside_the_config_or_beyond_a_record_is_refused_before_any_run(
        case, cli, tmp_path, monkeypatch):  # noqa: F811 (cli: the fixture imported above)
    preset = tmp_path / "presets"
    (preset / "experiment").mkdir(parents=True)
    (preset / "experiment" / "leak.yaml").write_text("# @package _global_\nbudget:\n  lr: ${oc.env:WT47_LR,0.001}\n")
    monkeypatch.setenv("WT47_LR", "0.002")
    args, says = CONFIGS[case]
    code, err = cli(*(a.replace("{preset}", str(preset)) for a in args))
    assert code == 2 and "Traceback" not in err, err
    [line] = err.splitlines()
    assert line.startswith("error: ") and says in line, line
    assert not (tmp_path / "results").exists()


COUNTS = ("max_steps", "batch_size", "eval_every", "eval_batches", "num_train", "num_val", "num_test", "warmup_steps")


@settings(max_examples=100, deadline=None)
@given(key=st.sampled_from(COUNTS), count=st.integers(min_value=-2, max_value=2**70))
@example(key="max_steps", count=2**63).via("the issue's input")
@example(key="num_train", count=2**63 - 1).via("the largest a record holds")
def test_every_count_the_config_accepts_a_record_can_hold(key, count):
    config = composed("task=mqar")
    config["budget"] = {**BUDGET, key: count}
    lines = refusal(config)
    if (0 if key == "warmup_steps" else 1) <= count <= INT_LIMIT:
        assert lines is None and records.unrepresentable(config) is None
    else:
        assert lines and all(f"budget.{key} must be" in line for line in lines), lines


def test_the_valid_keys_are_each_named_once(cli):  # noqa: F811 (cli: the fixture imported above)
    code, err = cli("+zzzz=1")
    assert code == 2
    [line] = err.splitlines()
    valid = line.partition("valid top-level keys: ")[2].split(", ")
    assert valid and len(valid) == len(set(valid)), line


def test_a_board_file_of_broken_yaml_is_one_line(tmp_path, capsys):
    board = tmp_path / "broken.yaml"
    board.write_text("points: [a, b\nbudget: cpu\n")
    assert board_main([str(board)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == f"error: board {board}: not valid YAML at line 2, column 7 (expected ',' or ']', but got ':')"


@pytest.mark.parametrize("where", ["top", "metrics"])
def test_a_record_holds_extra_keys_inside_its_objects_but_none_at_its_top(where, tmp_path, capsys):
    """What the README says of extra keys (the issue found it promised them at the top, where the
    schema refuses them): one line of validate at the top, accepted inside an object."""
    folder = tmp_path / "submission"
    paths = make_submission(folder)
    record = json.loads(paths[0].read_text())
    (record if where == "top" else record["metrics"])["extra_note"] = "x"
    paths[0].write_text(json.dumps(record))
    code = validate(["--submission", str(folder)])
    lines = capsys.readouterr().out.splitlines()
    if where == "metrics":
        assert code == 0 and lines == []
        return
    assert code == 1
    [line] = lines
    assert line.startswith(f"{paths[0]}: schema: field 'extra_note': Extra inputs are not permitted"), line


def test_a_bidirectional_control_in_a_device_name_is_one_line_of_validate(tmp_path, capsys):
    folder = tmp_path / "submission"
    paths = make_submission(folder)
    record = json.loads(paths[0].read_text())
    record["env"]["device_name"] = "NVIDIA H100\u202e08"  # reads as another device on a page
    paths[0].write_text(json.dumps(record))
    assert validate(["--submission", str(folder)]) == 1
    lines = capsys.readouterr().out.splitlines()  # (its cell's other runs name another device, too)
    said = "env.device_name: holds the bidirectional control character U+202E; expected plain text"
    assert f"{paths[0]}: {said}" in lines
    assert all(line.startswith(f"{paths[0]}: ") for line in lines), lines
    # The site leaves it out with that reason, rather than splitting its cell between two "devices".
    runs, problems = load_runs(folder)
    assert paths[0] not in [r.file for r in runs] and len(runs) == len(paths) - 1
    assert f"{paths[0]}: env.device_name holds the bidirectional control character U+202E; skipped" in problems


def test_records_of_one_run_on_two_machines_are_two_rows_and_no_conflict(tmp_path):
    """Runs of one config hash in different rows (here: two hardware classes) are never said to hide each other."""
    results = tmp_path / "results"
    paths = make_submission(results)
    (results / "submission.json").unlink()
    other = json.loads(paths[0].read_text())
    other["env"]["hardware"]["device_model"] = other["env"]["device_name"] = "NVIDIA A100-SXM4-80GB"
    other["metrics"]["test_accuracy"] = 0.99
    other["run_id"] = other["run_id"][:-8] + "a100a100"
    write(results, other)
    runs, problems = load_runs(results)
    assert site_messages(runs, problems) == []
    shown = {row.hardware: [r.metric("test_accuracy") for r in cell.runs]
             for row in board_rows(runs) for cell in row.cells.values()}
    assert shown["NVIDIA A100-SXM4-80GB"] == [0.99] and len(shown["NVIDIA H100 80GB HBM3"]) == 3
