"""Sweeps: Hydra multirun that resumes, launchers as config files, failed jobs recorded, wandb offline."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from suite import __main__ as cli_main
from suite import record_store
from suite.run import run

REPO = Path(__file__).resolve().parent.parent
LAUNCHERS = sorted(p.stem for p in (REPO / "conf" / "hydra" / "launcher").glob("*.yaml"))


def suite_cli(*args: str, tmp_path: Path, data_dir: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "SUITE_DATA_DIR": str(data_dir), "SUITE_HYDRA_DIR": str(tmp_path / "hydra"), **env}
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=600)


def ok_records(results: Path) -> list[dict]:
    return [r for _, r in record_store.iter_records(results) if r["status"] == "ok"]


@pytest.mark.slow  # 12-19 s: .ci/run runs it
def test_multirun_resumes_and_skips_finished_jobs(tmp_path, data_dir):
    results = tmp_path / "results"
    args = ("-m", "method=softmax,linear", "task=listops", "budget=smoke", f"results_dir={results}")
    first = suite_cli(*args, tmp_path=tmp_path, data_dir=data_dir)
    assert first.returncode == 0, first.stderr[-2000:]
    assert sorted(r["method"]["name"] for r in ok_records(results)) == ["linear", "softmax"]

    again = suite_cli(*args, tmp_path=tmp_path, data_dir=data_dir)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("skipped: an ok record of this run already exists") == 2
    assert len(list(results.rglob("*.json"))) == 2  # nothing new written

    forced = suite_cli(*args[:2], "method=linear", *args[2:], "force=true", tmp_path=tmp_path, data_dir=data_dir)
    assert forced.returncode == 0 and len(list(results.rglob("*.json"))) == 3


@pytest.mark.slow  # 12-19 s: .ci/run runs it
def test_two_job_sweep_through_the_joblib_launcher(tmp_path, data_dir):
    results = tmp_path / "results"
    done = suite_cli("-m", "hydra/launcher=joblib_local", "hydra.launcher.n_jobs=2", "method=softmax",
                     "seed=11,12", "budget=smoke", f"results_dir={results}", tmp_path=tmp_path, data_dir=data_dir)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(r["config"]["seed"] for r in ok_records(results)) == [11, 12]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_each_launcher_config_composes(launcher):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.startswith("hydra_plugins.")


def test_launchers_cover_local_slurm_and_ray():
    targets = " ".join((REPO / "conf" / "hydra" / "launcher" / f"{n}.yaml").read_text() for n in LAUNCHERS)
    for plugin in ("hydra_joblib_launcher", "hydra_submitit_launcher", "hydra_ray_launcher"):
        assert plugin in targets


def test_launcher_without_its_plugin_names_the_extra(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    message = cli_main.check_group_choices(["-m", "hydra/launcher=slurm"])
    assert message == "hydra/launcher=slurm needs the hydra_submitit_launcher plugin: pip install -e '.[cluster]'"


def test_unknown_launcher_lists_the_valid_ones():
    message = cli_main.check_group_choices(["hydra/launcher=pbs"])
    assert message.startswith("unknown hydra/launcher 'pbs'; valid hydra/launchers: basic, ")


def test_a_failing_job_is_recorded_and_does_not_raise(make_config, monkeypatch):
    import suite.training

    def explode(*args, **kwargs):
        raise RuntimeError("simulated failure in the middle of training")

    monkeypatch.setattr(suite.training, "train", explode)
    path, outcome = run(make_config())
    record = record_store.read_record(path)
    assert outcome.status == "error" and record["status"] == "error"
    assert "simulated failure" in record["error"]


@pytest.mark.slow
def test_wandb_offline_writes_a_local_run(tmp_path, data_dir):
    wandb_dir = tmp_path / "wandb-runs"
    wandb_dir.mkdir()
    done = suite_cli("method=softmax", "budget=smoke", "logger=wandb", f"results_dir={tmp_path / 'r'}",
                     tmp_path=tmp_path, data_dir=data_dir, WANDB_MODE="offline", WANDB_DIR=str(wandb_dir),
                     WANDB_SILENT="true")
    assert done.returncode == 0, done.stderr[-2000:]
    runs = list((wandb_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))
