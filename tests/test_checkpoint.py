"""Checkpoints and resuming (suite.checkpoint): a run killed with SIGKILL, stopped by SIGTERM (a
pre-emption) or by SLURM's SIGUSR2 goes on from its checkpoint when the same command is run again,
and ends exactly as the same run uninterrupted (deterministic CPU kernels, one thread); a truncated
or foreign checkpoint is refused with one line and the run starts over; resume=false starts over."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

import suite.logger
from suite import checkpoint, record_store, records
from suite.run import run
from suite.site.runs import load_runs

REPO = Path(__file__).resolve().parent.parent
# A task small enough that a step takes milliseconds; one thread, so every run computes the same;
# dropout, so that training draws from torch's random generator and a resumed run must restore it.
FAST = ("method=linear", "task=mqar", "task.vocab_size=128", "budget=smoke", "device=cpu", "cpu_threads=1",
        "budget.eval_every=10", "model.dropout=0.1")
SHORT = (*FAST, "budget.max_steps=30", "budget.checkpoint_every=10")
# Long enough for a test to see the first checkpoint and kill the process well before its end.
LONG = (*FAST, "budget.max_steps=300", "budget.checkpoint_every=10")
# What a run computes, as opposed to how fast: a resumed run must give the same.
COMPUTED = ("test_accuracy", "val_accuracy", "best_step", "final_train_loss", "train_accuracy", "steps",
            "train_tokens")


def compose_config(data_dir: Path, results: Path, *overrides: str) -> dict:
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"data_dir={data_dir}", f"results_dir={results}", *overrides])
    return OmegaConf.to_container(cfg, resolve=True)


def computed(record: dict) -> dict:
    return {key: record["metrics"][key] for key in COMPUTED}


def run_logged(config: dict, stop_at: int | None = None, signum: int = signal.SIGTERM):
    """``run(config)`` in this process; returns its record path, outcome and the loss of every step
    it logged. With ``stop_at``, ``signum`` is sent to this process during that step."""
    losses: dict[int, float] = {}

    def log(self, metrics, step=None):
        if "train/loss" in metrics:
            losses[step] = metrics["train/loss"]
            if step == stop_at:
                os.kill(os.getpid(), signum)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(suite.logger.NullLogger, "log", log)
        path, outcome = run(config)
    return path, outcome, losses


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data_dir):
    """The uninterrupted run of some overrides: its computed metrics and the loss of every step."""
    done = {}

    def get(overrides: tuple[str, ...]) -> tuple[dict, dict[int, float]]:
        if overrides not in done:
            config = compose_config(data_dir, tmp_path_factory.mktemp("reference"), *overrides)
            path, outcome, losses = run_logged(config)
            assert outcome.status == "ok", outcome.error
            done[overrides] = computed(record_store.read_record(path)), losses
        return done[overrides]

    return get


def checkpoints_of(config: dict) -> Path:
    return checkpoint.folder(config["results_dir"], records.config_hash(config, "cpu"))


def saved_steps(config: dict) -> list[int]:
    return [checkpoint.step_of(p) for p in checkpoint.saved(checkpoints_of(config))]


def resumed_from(stdout: str) -> int | None:
    found = re.findall(r"^resuming from step (\d+): \S+step-\d+\.pt$", stdout, re.M)
    assert len(found) <= 1, stdout
    return int(found[0]) if found else None


# -- what a checkpoint holds ------------------------------------------------------------------------

def test_a_checkpoint_round_trip_restores_every_random_generator_exactly(tmp_path):
    device = torch.device("cpu")
    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    order = torch.Generator().manual_seed(4)
    random.gauss(0, 1)  # Python keeps a second normal draw in its state: it must come back too
    state = {"rng": checkpoint.rng_states(device), "order": order.get_state()}
    path = checkpoint.save(tmp_path, "hash", 7, state)

    def draws():
        return (torch.rand(5).tolist(), np.random.rand(5).tolist(), [random.random() for _ in range(5)],
                random.gauss(0, 1), torch.randperm(10, generator=order).tolist())

    expected = draws()
    loaded = checkpoint.read(path, "hash")  # torch.load(weights_only=True) reads it
    checkpoint.set_rng_states(loaded["rng"], device)
    order.set_state(loaded["order"])
    assert draws() == expected
    assert loaded["step"] == 7 and loaded["config_hash"] == "hash"


def test_only_the_last_two_checkpoints_are_kept_and_a_later_history_is_dropped(tmp_path):
    for step in (10, 20, 30):
        checkpoint.save(tmp_path, "hash", step, {})
    assert [checkpoint.step_of(p) for p in checkpoint.saved(tmp_path)] == [20, 30]
    checkpoint.save(tmp_path, "hash", 5, {})  # a run that started over: 20 and 30 are of the old one
    assert [p.name for p in tmp_path.iterdir()] == ["step-000000005.pt"]  # no temporary file either


def test_checkpoint_settings_do_not_change_what_defines_a_run(data_dir, tmp_path):
    base = compose_config(data_dir, tmp_path, *FAST)
    other = compose_config(data_dir, tmp_path, *FAST, "budget.checkpoint_every=7", "resume=false")
    assert records.config_hash(other, "cpu") == records.config_hash(base, "cpu")
    assert records.cell_key(other) == records.cell_key(base)
    old = {**base, "budget": {k: v for k, v in base["budget"].items() if k != "checkpoint_every"}}
    assert records.config_hash(old, "cpu") == records.config_hash(base, "cpu")  # records made before it


# -- stopped, then resumed --------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_saves_a_checkpoint_of_that_step_and_the_rerun_ends_as_if_uninterrupted(
        data_dir, tmp_path, capsys, reference, signum, sigint_handled):
    config = compose_config(data_dir, tmp_path / "results", *SHORT)
    path, outcome, _ = run_logged(config, stop_at=13, signum=signum)
    assert outcome.status == "interrupted" and outcome.error == "interrupted after 13 steps"
    assert saved_steps(config) == [10, 13]  # the periodic one and the one at the signal
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checkpoint read as a record would be skipped with a warning
        assert [p for p, _ in record_store.iter_records(config["results_dir"])] == [path]
    assert load_runs(Path(config["results_dir"]))[1] == []  # the site sees no stray file either
    capsys.readouterr()

    again, outcome, losses = run_logged(config)
    assert outcome.status == "ok" and resumed_from(capsys.readouterr().out) == 13
    expected_metrics, expected_losses = reference(SHORT)
    assert losses == {step: loss for step, loss in expected_losses.items() if step > 13}  # bit for bit
    assert computed(record_store.read_record(again)) == expected_metrics
    assert not checkpoints_of(config).exists()  # a finished run leaves no checkpoint


@pytest.mark.parametrize("submitit", ["requeues", "refuses"])
def test_sigusr2_under_submitit_saves_a_checkpoint_then_lets_submitit_requeue(
        data_dir, tmp_path, capsys, reference, submitit):
    """submitit's SIGUSR2 handler requeues the job and exits (SystemExit), or, timed out too often,
    raises; the run must save its checkpoint before either."""
    calls = []

    def handler(signum, frame):  # what submitit's SignalHandler.checkpoint_and_try_requeue does
        calls.append(signum)
        if submitit == "requeues":
            sys.exit(-1)
        raise RuntimeError("Job not requeued because: timed-out too many times.")

    config = compose_config(data_dir, tmp_path / "results", *SHORT)
    previous = signal.signal(signal.SIGUSR2, handler)
    try:
        if submitit == "requeues":
            with pytest.raises(SystemExit):
                run_logged(config, stop_at=13, signum=signal.SIGUSR2)
            assert not list(record_store.iter_records(config["results_dir"]))  # the requeued job writes it
        else:
            _, outcome, _ = run_logged(config, stop_at=13, signum=signal.SIGUSR2)
            assert outcome.status == "interrupted" and outcome.error == "interrupted after 13 steps"
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert calls == [signal.SIGUSR2] and saved_steps(config) == [10, 13]
    capsys.readouterr()

    again, outcome, _ = run_logged(config)  # the requeued job: the same command
    assert outcome.status == "ok" and resumed_from(capsys.readouterr().out) == 13
    assert computed(record_store.read_record(again)) == reference(SHORT)[0]


def suite_process(tmp_path: Path, data_dir: Path, results: Path, *args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "SUITE_DATA_DIR": str(data_dir), "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.Popen([sys.executable, "-m", "suite", *args, f"results_dir={results}"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


@pytest.mark.parametrize("signum, sweep", [
    pytest.param(signal.SIGKILL, (), marks=pytest.mark.slow),
    pytest.param(signal.SIGTERM, (), marks=pytest.mark.slow),
    pytest.param(signal.SIGKILL, ("-m", "hydra/launcher=joblib_local", "hydra.launcher.n_jobs=1"),
                 marks=pytest.mark.slow),
], ids=["SIGKILL", "SIGTERM", "SIGKILL-joblib-sweep"])
def test_a_command_stopped_mid_run_resumes_when_run_again_and_ends_the_same(
        tmp_path, data_dir, reference, signum, sweep):
    results = tmp_path / "results"
    config = compose_config(data_dir, results, *LONG)
    process = suite_process(tmp_path, data_dir, results, *sweep, *LONG)
    deadline = time.monotonic() + 240
    while not saved_steps(config) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert saved_steps(config), process.communicate()[1][-2000:]
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == (-signal.SIGKILL if signum == signal.SIGKILL else 130), stderr[-2000:]
    stopped_at = saved_steps(config)[-1]
    assert 10 <= stopped_at < 300  # killed mid-run
    written = list(record_store.iter_records(results))
    if signum == signal.SIGTERM:  # a checkpoint of the step it stopped at, then a record of it
        assert [r["metrics"]["steps"] for _, r in written] == [stopped_at]
    else:
        assert not written

    rerun = suite_process(tmp_path, data_dir, results, *sweep, *LONG)
    stdout, stderr = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, stderr[-2000:]
    assert resumed_from(stdout) == stopped_at
    validated = [int(s) for s in re.findall(r"^step (\d+): val acc", stdout, re.M)]
    assert validated and min(validated) > stopped_at  # it went on, not from step 0
    (finished,) = [r for _, r in record_store.iter_records(results) if r["status"] == "ok"]
    assert computed(finished) == reference(LONG)[0]
    assert not checkpoints_of(config).exists()


# -- refused checkpoints and starting over ----------------------------------------------------------

def spoil(path: Path, how: str, data_dir: Path, tmp_path: Path) -> str:
    """Make the checkpoint at ``path`` unusable in one of the ways a run must refuse; returns the
    reason the warning must give."""
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
        return r"not readable \(RuntimeError: .*\)"
    if how == "another config":  # the checkpoint of the same run at seed 1, copied in its place
        other = compose_config(data_dir, tmp_path / "other", *SHORT, "seed=1")
        run_logged(other, stop_at=7)
        shutil.copy(checkpoint.saved(checkpoints_of(other))[-1], path)
        return rf"of another config \(hash {records.config_hash(other, 'cpu')}; this run's is \w+\)"
    state = torch.load(path, weights_only=True)
    if how == "another format":
        state["format"] = checkpoint.FORMAT + 1
        reason = rf"checkpoint format {checkpoint.FORMAT + 1}; this suite reads format {checkpoint.FORMAT}"
    else:
        state["torch"] = "1.0.0"
        reason = rf"saved by torch 1\.0\.0; this is torch {re.escape(checkpoint.TORCH)}"
    torch.save(state, path)
    return reason


@pytest.mark.parametrize("how", ["truncated", "another config", "another format", "another torch"])
def test_a_bad_checkpoint_is_refused_with_one_line_and_the_run_starts_over(
        data_dir, tmp_path, capsys, reference, how):
    config = compose_config(data_dir, tmp_path / "results", *SHORT)
    interrupted, _, _ = run_logged(config, stop_at=7)
    (path,) = checkpoint.saved(checkpoints_of(config))
    reason = spoil(path, how, data_dir, tmp_path)
    capsys.readouterr()

    again, outcome, losses = run_logged(config)
    out, err = capsys.readouterr()
    assert [line for line in err.splitlines() if line.startswith("warning")] == [err.splitlines()[0]]
    assert re.fullmatch(rf"warning: ignoring checkpoint {re.escape(str(path))}: {reason}; starting over",
                        err.splitlines()[0])
    assert resumed_from(out) is None and min(losses) == 1
    assert outcome.status == "ok" and computed(record_store.read_record(again)) == reference(SHORT)[0]
    assert interrupted.exists()  # nothing already written is lost


def test_a_bad_newest_checkpoint_falls_back_to_the_one_before(data_dir, tmp_path, capsys, reference):
    config = compose_config(data_dir, tmp_path / "results", *SHORT)
    run_logged(config, stop_at=13)
    _, newest = checkpoint.saved(checkpoints_of(config))
    newest.write_bytes(b"")
    capsys.readouterr()

    again, _, losses = run_logged(config)
    out, err = capsys.readouterr()
    assert re.search(rf"^warning: ignoring checkpoint {re.escape(str(newest))}: .*; trying the one before$", err, re.M)
    assert resumed_from(out) == 10 and min(losses) == 11
    assert computed(record_store.read_record(again)) == reference(SHORT)[0]


def test_resume_false_starts_over(data_dir, tmp_path, capsys, reference):
    config = compose_config(data_dir, tmp_path / "results", *SHORT)
    run_logged(config, stop_at=13)
    assert saved_steps(config) == [10, 13]
    capsys.readouterr()

    again, _, losses = run_logged({**config, "resume": False})
    out, err = capsys.readouterr()
    assert resumed_from(out) is None and "warning" not in err
    assert losses == reference(SHORT)[1]  # every step, from the first
    assert computed(record_store.read_record(again)) == reference(SHORT)[0]
    assert not checkpoints_of(config).exists()


def test_a_run_that_ends_otherwise_than_interrupted_deletes_its_checkpoints(data_dir, tmp_path):
    config = compose_config(data_dir, tmp_path / "results", *FAST, "budget.checkpoint_every=1", "budget.lr=1e30")
    saved = []
    real_save = checkpoint.save
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint, "save", lambda *args: saved.append(real_save(*args)))
        _, outcome = run(config)
    assert outcome.status == "diverged" and saved  # the first step was saved, the second diverged
    assert not checkpoints_of(config).exists()
