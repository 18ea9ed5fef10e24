"""Faults a run must survive: signals, divergence, out of memory, concurrent writers, corrupt files
in results/, an unwritable results folder; and what must never enter a record or the code (secrets,
code execution while loading data). Each test provokes the fault for real where it can."""

from __future__ import annotations

import errno
import json
import math
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra

import suite.logger
import suite.records
import suite.training
from suite import record_store, records
from suite.__main__ import main as cli_main
from suite.errors import ConfigError
from suite.run import find_finished, run
from suite.site import pages
from suite.site.board import board_rows
from suite.site.build import build_site
from suite.site.runs import load_runs

REPO = Path(__file__).resolve().parent.parent
# A task small enough that a step takes milliseconds on a CPU: MQAR with a 128-token vocabulary.
FAST = ("task=mqar", "task.vocab_size=128")


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def only_record(results: Path) -> dict:
    written = files_under(results)
    assert len(written) == 1, written
    return record_store.read_record(written[0])


# -- signals ----------------------------------------------------------------------------------------

def start_long_run(tmp_path: Path, data_dir: Path, results: Path) -> tuple[subprocess.Popen, list[str]]:
    """A CLI run of 100000 steps; a thread gathers its stderr (where the progress bar goes)."""
    env = {**os.environ, "SUITE_DATA_DIR": str(data_dir), "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}
    env.pop("HYDRA_FULL_ERROR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "suite", *FAST, "budget=smoke", "budget.max_steps=100000", f"results_dir={results}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    chunks: list[str] = []
    threading.Thread(target=lambda: chunks.extend(iter(lambda: process.stderr.read(64), "")), daemon=True).start()
    return process, chunks


def steps_shown(chunks: list[str]) -> int:
    """The last step count the progress bar printed (``  3/100000 [``)."""
    counts = re.findall(r"(\d+)/100000 \[", "".join(chunks))
    return int(counts[-1]) if counts else 0


@pytest.mark.parametrize("signum", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_run_leaves_one_whole_interrupted_record(tmp_path, data_dir, signum, sigint_handled):
    results = tmp_path / "results"
    process, chunks = start_long_run(tmp_path, data_dir, results)
    deadline = time.monotonic() + 240
    while steps_shown(chunks) < 3 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert steps_shown(chunks) >= 3, "".join(chunks)[-2000:]
    process.send_signal(signum)
    process.wait(timeout=120)
    stdout = process.stdout.read()

    assert process.returncode == 130, "".join(chunks)[-2000:]
    assert not [p for p in results.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".")]
    record = only_record(results)  # the loop catches the signal, so the record is written whole
    assert record["status"] == "interrupted"
    steps = record["metrics"]["steps"]
    assert 3 <= steps < 100000 and record["error"] == f"interrupted after {steps} steps"
    assert f"record: {files_under(results)[0]}" in stdout
    assert find_finished(results, record["config_hash"]) is None  # a resumed sweep reruns it


def test_sigterm_in_process_is_an_interrupt_and_a_resumed_run_reruns_it(make_config, monkeypatch):
    config = make_config(*FAST, "budget.max_steps=4")
    real_log = suite.logger.NullLogger.log

    def log_then_terminate(self, metrics, step=None):
        if step == 3 and "train/loss" in metrics:
            os.kill(os.getpid(), signal.SIGTERM)  # what a cluster's pre-emption sends
        real_log(self, metrics, step)

    monkeypatch.setattr(suite.logger.NullLogger, "log", log_then_terminate)
    handler = signal.getsignal(signal.SIGTERM)
    path, outcome = run(config)
    assert outcome.status == "interrupted" and record_store.read_record(path)["metrics"]["steps"] == 3
    assert signal.getsignal(signal.SIGTERM) is handler  # the run's handler lasts as long as the run

    monkeypatch.setattr(suite.logger.NullLogger, "log", real_log)
    again, outcome = run(config)
    assert again != path and outcome.status == "ok"  # interrupted is not finished: rerun
    _, outcome = run(config)
    assert outcome.status == "skipped"


def interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("where", ["while loading data", "in the first job of a sweep"])
def test_an_interrupt_exits_130_and_stops_a_sweep(tmp_path, data_dir, monkeypatch, capsys, where):
    results = tmp_path / "results"
    monkeypatch.setenv("SUITE_HYDRA_DIR", str(tmp_path / "hydra"))
    args = [*FAST, "budget=smoke", "budget.max_steps=2", f"data_dir={data_dir}", f"results_dir={results}"]
    if where == "while loading data":
        monkeypatch.setattr(suite.training, "load_data", interrupt)
    else:
        args = ["-m", *args, "seed=1,2"]
        monkeypatch.setattr(suite.logger.NullLogger, "log", interrupt)  # Ctrl-C at the first step
    monkeypatch.setattr(sys, "argv", ["suite", *args])
    GlobalHydra.instance().clear()
    with pytest.raises(SystemExit) as exit_info:
        cli_main()
    assert exit_info.value.code == 130
    written = [record_store.read_record(p) for p in files_under(results)]
    if where == "while loading data":
        assert not written and "interrupted: no record written" in capsys.readouterr().err
    else:  # the second seed never started
        assert [(r["config"]["seed"], r["status"]) for r in written] == [(1, "interrupted")]


# -- divergence -------------------------------------------------------------------------------------

def test_a_diverging_loss_stops_the_run_and_the_site_shows_it_diverged(make_config, tmp_path):
    # the first update sends every weight to ~1e30; a budget not named smoke, since smoke runs are test
    # artefacts the board leaves out
    config = make_config(*FAST, "budget.lr=1e30", "budget.name=tiny")
    path, outcome = run(config)
    record = record_store.read_record(path)
    metrics = record["metrics"]
    assert record["status"] == "diverged" and outcome.status == "diverged"
    step = metrics["diverged_step"]
    assert metrics["steps"] == step - 1 < config["budget"]["max_steps"]  # stopped at once
    assert math.isfinite(metrics["last_finite_loss"]) and metrics["last_finite_loss"] > 0
    assert re.fullmatch(rf"loss became (nan|inf|-inf) at step {step}", record["error"])
    assert "test_accuracy" not in metrics  # no accuracy is claimed for a diverged run

    runs, problems = load_runs(Path(config["results_dir"]))
    assert not problems
    (row,) = board_rows(runs)
    (cell,) = row.cells.values()
    cell = pages.board_cell(cell)
    assert "status-diverged" in cell and 'class="mean"' not in cell and 'data-value=""' in cell
    report = build_site(config["results_dir"], tmp_path / "site")
    assert report.runs == 1 and "status-diverged" in (tmp_path / "site" / "index.html").read_text()


# -- out of memory ----------------------------------------------------------------------------------

def allocate_too_much(*args, **kwargs):
    import torch

    return torch.empty(2**62, dtype=torch.uint8)  # torch's CPU allocator refuses: a RuntimeError


def fail_with_memory_error(*args, **kwargs):
    raise MemoryError


@pytest.mark.parametrize("where, replace, says", [
    ("in a training step", ("token_loss", allocate_too_much), "DefaultCPUAllocator: can't allocate memory"),
    ("loading data", ("load_data", fail_with_memory_error), "MemoryError"),
])
def test_running_out_of_memory_is_recorded_as_oom(make_config, monkeypatch, where, replace, says):
    monkeypatch.setattr(suite.training, *replace)
    path, outcome = run(make_config(*FAST))
    record = record_store.read_record(path)
    assert record["status"] == outcome.status == "oom", where
    assert says in record["error"]


@pytest.mark.slow
def test_a_memory_cap_makes_a_job_oom_and_the_multirun_goes_on(tmp_path, data_dir):
    results = tmp_path / "results"
    env = {**os.environ, "SUITE_DATA_DIR": str(data_dir), "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}
    sweep = ("memory_cap_bytes=1000000,null",)  # 1 MB: below any process's resident set, then no cap
    done = subprocess.run([sys.executable, "-m", "suite", "-m", *FAST, "budget=smoke", "budget.max_steps=2",
                           f"results_dir={results}", *sweep], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    # A job that did not end ok makes the sweep's exit code 1, and the sweep says which (scheduler-safe).
    assert done.returncode == 1, done.stderr[-2000:]
    assert "sweep: 1 of 2 jobs did not end ok:\n  job 0 (" in done.stderr
    assert "memory_cap_bytes=1000000): oom: peak memory " in done.stderr
    found = {r["config"]["memory_cap_bytes"]: r for _, r in record_store.iter_records(results)}
    assert {cap: r["status"] for cap, r in found.items()} == {1000000: "oom", None: "ok"}
    assert found[1000000]["error"].endswith("above memory_cap_bytes=1000000")
    assert found[None]["metrics"]["peak_memory_bytes"] > 1000000  # the second job ran uncapped


@pytest.mark.slow
def test_a_sweep_with_a_refused_job_goes_on_then_exits_2_listing_it(tmp_path, data_dir):
    results = tmp_path / "results"
    env = {**os.environ, "SUITE_DATA_DIR": str(data_dir), "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}
    done = subprocess.run([sys.executable, "-m", "suite", "-m", *FAST, "budget=smoke", f"results_dir={results}",
                           "budget.max_steps=0,2"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "sweep: 1 of 2 jobs did not end ok:\n  job 0 (" in done.stderr
    assert "budget.max_steps=0): refused: budget.max_steps must be a positive integer, got 0\n" in done.stderr
    ran = [r["config"]["budget"]["max_steps"] for _, r in record_store.iter_records(results)]
    assert ran == [2]  # the sweep went on


# -- concurrent writers -----------------------------------------------------------------------------

def write_many(start: multiprocessing.Barrier, results: str, count: int) -> None:
    config = {"method": {"name": "softmax"}, "task": {"name": "listops"}, "seed": 0}
    digest = records.config_hash(config, "cpu")  # one config: every writer aims at one folder
    start.wait()
    for i in range(count):
        record = record_store.new_record(
            "train", config=config, config_hash=digest, method={"name": "softmax", "impl": "auto", "params": {}},
            task={"name": "listops"}, env={},
            metrics={"test_accuracy": 0.5, "i": i, "pid": os.getpid(), "padding": "x" * 20000})  # ok: with its metric
        record_store.write_record(record, results)


def test_concurrent_writers_lose_no_record_and_readers_see_only_whole_ones(tmp_path):
    results = tmp_path / "results"
    processes, per_process = 4, 20
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    start = context.Barrier(processes + 1)
    writers = [context.Process(target=write_many, args=(start, str(results), per_process))
               for _ in range(processes)]
    for writer in writers:
        writer.start()
    start.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a half-written record would be skipped with a warning
        while any(w.is_alive() for w in writers):
            list(record_store.iter_records(results))
    for writer in writers:
        writer.join(timeout=60)
        assert writer.exitcode == 0
    found = [record for _, record in record_store.iter_records(results)]
    assert len(found) == processes * per_process
    assert len({(r["metrics"]["pid"], r["metrics"]["i"]) for r in found}) == processes * per_process
    assert len({r["run_id"] for r in found}) == processes * per_process
    assert all(p.suffix == ".json" for p in files_under(results))  # no temporary file left


# -- corrupt and foreign files in results/ -----------------------------------------------------------

FOREIGN = {
    "not_json.json": b"this is not JSON\n",
    "binary.json": bytes(range(256)),
    "empty.json": b"",
    "truncated.json": b'{"schema": 1, "kind": "train", "run_id": "x", "met',
    "a_list.json": b"[1, 2, 3]",
    "schema99.json": json.dumps({"schema": 99, "kind": "train"}).encode(),
    "schema_true.json": json.dumps({"schema": True}).encode(),
    "package.json": json.dumps({"name": "left-pad", "version": "1.3.0", "main": "index.js"}).encode(),
    "deep.json": b"[" * 100000 + b"]" * 100000,
}


@pytest.mark.parametrize("name", [*FOREIGN, "folder.json", "wrong_type.json"])
def test_resume_and_site_skip_a_bad_file_naming_it(make_config, tmp_path, capsys, name):
    config = make_config(*FAST, "device=cpu")
    good = record_store.write_record(record_store.new_record(  # an ok record of this very config: the run resumes
        "train", config=config, config_hash=records.config_hash(config, "cpu"), task={"name": "mqar"},
        method={"name": "softmax", "impl": "auto", "params": {}}, metrics={"test_accuracy": 0.5}, env={}),
        config["results_dir"])
    bad = Path(config["results_dir"]) / "0_other" / name  # sorted before the good record: read first
    bad.parent.mkdir()
    if name == "folder.json":
        bad.mkdir()
    elif name == "wrong_type.json":  # a record of this schema whose metrics are not an object
        bad.write_text(json.dumps({**record_store.read_record(good), "metrics": [0.5]}))
    else:
        bad.write_bytes(FOREIGN[name])
    capsys.readouterr()

    _, outcome = run(config)  # the resume check reads every file under results/
    err = capsys.readouterr().err
    assert outcome.status == "skipped"
    warned = [line for line in err.splitlines() if line.startswith("warning: skipping")]
    assert len(warned) == 1 and str(bad) in warned[0]

    report = build_site(config["results_dir"], tmp_path / "site")
    assert report.runs == 1 and len(report.problems) == 1 and name in report.problems[0]


# -- unwritable results folder ----------------------------------------------------------------------

def disk_full(fd: int, data: bytes) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("case", ["disk full", "path under a regular file"])
def test_an_unwritable_results_folder_is_refused_before_training(make_config, monkeypatch, tmp_path, case):
    (tmp_path / "a_file").write_text("")
    results = tmp_path / ("results" if case == "disk full" else "a_file/results")
    config = make_config(*FAST, f"results_dir={results}")
    loaded = []
    monkeypatch.setattr(suite.training, "load_data", lambda config: loaded.append(config))
    if case == "disk full":
        monkeypatch.setattr(suite.records.os, "write", disk_full)  # os.write of the writability probe
    says = "No space left on device" if case == "disk full" else "Not a directory"
    with pytest.raises(ConfigError, match=f"results_dir='{re.escape(str(results))}' is not writable: {says}$"):
        run(config)
    assert not loaded  # refused before any data was loaded or any step taken
    assert [p.name for p in files_under(tmp_path)] == ["a_file"]  # the probe file is gone too


# -- a finished run always leaves its result ---------------------------------------------------------

def full_disk_for_records(monkeypatch) -> None:
    """Records (their temporary files) are written to /dev/full, which answers ENOSPC as a full disk does."""
    write_text = Path.write_text

    def write(path: Path, text: str, *args, **kwargs):
        if ".json." in path.name and path.name.endswith(".tmp"):
            path = Path("/dev/full")
        return write_text(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write)


@pytest.mark.parametrize("fault", ["a file where the method's folder goes", "a full disk"])
def test_a_record_that_cannot_be_written_is_kept_and_the_same_command_writes_it_without_training(
        make_config, monkeypatch, capsys, fault):
    config = make_config(*FAST, "budget.max_steps=2")
    results = Path(config["results_dir"])
    folder = results / "train" / "mqar" / "softmax"
    if fault == "a full disk":
        full_disk_for_records(monkeypatch)
        says = f"{folder}/"  # the record's path, then why: "<run id>.json: No space left on device"
    else:
        folder.parent.mkdir(parents=True)
        folder.write_text("")
        says = f"{folder} is a file, where a folder of {folder}/"
    with pytest.raises(ConfigError) as refused:
        run(config)
    assert "test accuracy" in capsys.readouterr().out  # the summary came first: no number is lost
    [kept] = list((results / ".checkpoints").glob("*/record.kept"))
    message = str(refused.value)
    assert message.startswith(f"the record was not written: {says}") and message.count("\n") == 0
    if fault == "a full disk":
        assert ".json: No space left on device; " in message
    assert f"its record is kept in {kept}: the same command writes it there once the cause is fixed" in message
    assert not list(results.rglob("*.json"))

    finished = json.loads(kept.read_text())
    monkeypatch.undo()  # the cause fixed: room on the disk, or the file moved away
    if folder.is_file():
        folder.unlink()
    monkeypatch.setattr(suite.training, "load_data", lambda config: pytest.fail("trained again"))
    path, outcome = run(config)
    assert outcome.status == "ok" and record_store.read_record(path) == finished  # the finished run's own record
    assert "written: the record a finished run of this config could not write" in capsys.readouterr().out
    assert not kept.parent.exists() and files_under(results) == [path]


def test_a_finished_run_whose_record_the_schema_refuses_keeps_it_beside_its_checkpoints(make_config, monkeypatch,
                                                                                          capsys):
    """Issue 47 (a run trained for hours, then its record was refused): the config and record schemas
    share their bounds now, but any refusal of a finished run's record still keeps the record, as a
    write failure does."""
    config = make_config(*FAST, "budget.max_steps=2")
    results = Path(config["results_dir"])

    def refuse(record, where):
        raise records.RecordError(f"{where}: refused by the test")

    monkeypatch.setattr(record_store, "validate", refuse)
    with pytest.raises(ConfigError) as refused:
        run(config)
    assert "test accuracy" in capsys.readouterr().out
    [kept] = list((results / ".checkpoints").glob("*/record.kept"))
    message = str(refused.value)
    assert message.startswith("the record was not written: record '") and message.count("\n") == 0
    assert f": refused by the test; the summary above is the run's, and its record is kept in {kept}" in message
    assert not list(results.rglob("*.json"))
    assert json.loads(kept.read_text())["metrics"]["test_accuracy"] is not None


def test_an_interrupted_run_whose_record_cannot_be_written_resumes_from_its_checkpoint(make_config, monkeypatch):
    config = make_config(*FAST, "budget.max_steps=4", "budget.checkpoint_every=1")
    results = Path(config["results_dir"])
    real_log = suite.logger.NullLogger.log

    def log_then_terminate(self, metrics, step=None):
        if step == 2 and "train/loss" in metrics:
            os.kill(os.getpid(), signal.SIGTERM)
        real_log(self, metrics, step)

    monkeypatch.setattr(suite.logger.NullLogger, "log", log_then_terminate)
    folder = results / "train" / "mqar" / "softmax"
    folder.parent.mkdir(parents=True)
    folder.write_text("")  # no interrupted record can be written: it is not kept either (not finished)
    with pytest.raises(ConfigError, match="the run's checkpoints, if any, are kept for the same command to resume$"):
        run(config)
    assert not list(results.rglob("record.kept")) and list(results.rglob("step-*.pt"))
    monkeypatch.setattr(suite.logger.NullLogger, "log", real_log)
    folder.unlink()
    path, outcome = run(config)  # resumes from step 2 to the end
    assert outcome.status == "ok" and record_store.read_record(path)["metrics"]["steps"] == 4


def test_a_full_disk_during_a_checkpoint_says_no_space_left(make_config, monkeypatch):
    write_bytes = Path.write_bytes
    monkeypatch.setattr(Path, "write_bytes", lambda path, data: write_bytes(Path("/dev/full"), data))
    config = make_config(*FAST, "budget.max_steps=2", "budget.checkpoint_every=1")
    record = record_store.read_record(run(config)[0])
    assert record["status"] == "error" and "No space left on device" in record["error"], record["error"]
    assert "enforce fail" not in record["error"]


# -- no secrets, no code execution ------------------------------------------------------------------

SECRETS = {"MY_API_KEY": "sk-test-5f1b7c2e9d", "GITHUB_TOKEN": "ghp_TESTTOKEN7731", "SECRET": "hunter2-xyzzy",
           "PASSWORD": "correct-horse-battery-4471", "WANDB_API_KEY": "wandb-key-88d0e1"}


@pytest.mark.parametrize("status", ["ok", "error"])
def test_records_hold_no_secret_user_name_or_home(make_config, monkeypatch, tmp_path, status):
    user = "quokka_user_5521"
    home = tmp_path / "home" / user
    home.mkdir(parents=True)
    for name, value in {**SECRETS, "HOME": str(home), "USER": user, "LOGNAME": user}.items():
        monkeypatch.setenv(name, value)
    if status == "error":  # an error text naming a file in the home directory
        def fail(config):
            raise RuntimeError(f"cannot read {home}/datasets/broken.arrow")
        monkeypatch.setattr(suite.training, "load_data", fail)
    config = make_config(*FAST, f"results_dir={home}/results")
    path, outcome = run(config)
    assert outcome.status == status
    text = path.read_text()
    for leaked in (*SECRETS.values(), user, str(home)):
        assert leaked not in text, leaked
    if status == "error":
        assert "~/datasets/broken.arrow" in text


UNSAFE = [
    (re.compile(r"\bpickle\.loads?\("), "pickle.load"),
    (re.compile(r"\b(joblib|dill|marshal|shelve)\.(loads?|open)\("), "a pickle-based loader"),
    (re.compile(r"\bread_pickle\("), "pandas.read_pickle"),
    (re.compile(r"\byaml\.load\("), "yaml.load (use yaml.safe_load)"),
    (re.compile(r"allow_pickle\s*=\s*True"), "numpy allow_pickle=True"),
    (re.compile(r"trust_remote_code\s*=\s*True"), "trust_remote_code=True"),
    (re.compile(r"(?<![\w.])eval\("), "eval("),
    (re.compile(r"(?<![\w.])exec\("), "exec("),
]


def call_text(source: str, start: int) -> str:
    """The text of the call whose opening parenthesis is at ``start``, up to its closing one."""
    depth = 0
    for end in range(start, len(source)):
        depth += {"(": 1, ")": -1}.get(source[end], 0)
        if depth == 0:
            return source[start:end + 1]
    return source[start:]


def test_no_code_runs_while_loading_data():
    found = []
    for path in sorted(p for folder in ("suite", "tasks", "methods") for p in (REPO / folder).rglob("*.py")):
        source = path.read_text()
        code = re.sub(r"(?m)#.*$", "", source)  # comments may name what is forbidden
        for pattern, what in UNSAFE:
            found += [f"{path.relative_to(REPO)}: {what}" for _ in pattern.finditer(code)]
        for match in re.finditer(r"\btorch\.load\(", code):
            if "weights_only=True" not in call_text(code, match.end() - 1):
                found.append(f"{path.relative_to(REPO)}: torch.load without weights_only=True")
    assert not found, found
