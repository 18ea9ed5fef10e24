"""The entry point end to end at budget smoke, and its answers to bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import methods
import tasks
from suite import record_store
from suite.run import run

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str, data_dir: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SUITE_DATA_DIR": str(data_dir), "SUITE_HYDRA_DIR": str(cwd / "hydra")}
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_registered_method_and_task_has_a_config_and_back():
    from suite.__main__ import group_choices

    assert group_choices("method") == sorted(methods.available())  # made from the classes (suite/groups.py)
    assert sorted(p.stem for p in (REPO / "conf" / "task").glob("*.yaml")) == sorted(tasks.available())


@pytest.mark.slow
def test_smoke_run_writes_exactly_one_complete_record(tmp_path, data_dir):
    results = tmp_path / "results"
    done = cli("method=softmax", "task=listops", "budget=smoke", f"results_dir={results}",
               data_dir=data_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    written = [p for p in results.rglob("*") if p.is_file()]
    assert len(written) == 1
    record = record_store.read_record(written[0])
    assert record["status"] == "ok" and record["kind"] == "train"
    assert record["method"]["name"] == "softmax" and record["task"]["name"] == "listops"
    for key in ("test_accuracy", "val_accuracy", "baseline_accuracy", "train_tokens_per_s",
                "median_step_time_s", "peak_memory_bytes", "param_count", "wall_time_s"):
        assert record["metrics"][key] is not None, key
    for key in ("device", "device_name", "torch", "python", "git_commit", "cpu", "seed"):
        assert key in record["env"], key
    assert f"record: {written[0]}" in done.stdout
    assert "baseline" in done.stdout and "majority class" in done.stdout

    # A single command always runs, even where an ok record of it exists (only sweeps resume).
    again = cli("method=softmax", "task=listops", "budget=smoke", f"results_dir={results}",
                data_dir=data_dir, cwd=tmp_path)
    assert again.returncode == 0 and "skipped" not in again.stdout
    assert len([p for p in results.rglob("*") if p.is_file()]) == 2


@pytest.mark.parametrize("args, named", [  # an unknown method: tests/test_bad_input.py
    (("method=softmax", "task=nope"), "valid tasks: "),
    (("budget=huge",), "valid budgets: cpu, paper, small, smoke"),
    (("mode=nope",), "valid modes: cost, decode, fidelity, kernel, train"),
])
def test_unknown_choice_is_one_line_exit_2_and_touches_nothing(tmp_path, data_dir, args, named):
    results = tmp_path / "results"
    results.mkdir()
    (results / "keep.json").write_text("{}")
    done = cli(*args, f"results_dir={results}", data_dir=data_dir, cwd=tmp_path)
    assert done.returncode == 2
    assert named in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert [p.name for p in results.iterdir()] == ["keep.json"]


@pytest.mark.parametrize("overrides, named", [
    (("model.num_heads=3",), "does not divide model.d_model"),
    (("task.seq_len=0",), "task.seq_len must be a positive integer"),
    (("model.d_model=-8",), "model.d_model must be a positive integer"),
    (("budget.max_steps=0",), "budget.max_steps must be a positive integer"),
    (("device=tpu",), "unknown device 'tpu'"),
    (("method.impl=chunk",), "unknown impl 'chunk' for method 'softmax'"),
    (("budget.eval_batches=-1",), "budget.eval_batches must be a positive integer or null"),
])
def test_impossible_sizes_are_refused_before_any_record(make_config, overrides, named):
    config = make_config(*overrides)
    with pytest.raises(ValueError, match=named):
        run(config)
    assert not Path(config["results_dir"]).exists() or not any(Path(config["results_dir"]).rglob("*.json"))


def test_cuda_without_cuda_is_refused(make_config):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")  # the refusal only exists where CUDA is absent
    with pytest.raises(ValueError, match="device=cuda but no CUDA device"):
        run(make_config("device=cuda"))


def test_impossible_size_at_the_cli_is_one_line(tmp_path, data_dir):
    done = cli("budget=smoke", "model.num_heads=3", f"results_dir={tmp_path / 'r'}",
               data_dir=data_dir, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "error: model.num_heads=3 does not divide model.d_model=32"


def test_same_seed_same_metrics_on_cpu(make_config):
    config = make_config("seed=3", "device=cpu")
    first = record_store.read_record(run(config)[0])["metrics"]
    second = record_store.read_record(run(config)[0])["metrics"]
    for key in ("test_accuracy", "val_accuracy", "final_train_loss", "train_accuracy", "train_tokens"):
        assert first[key] == second[key], key


def test_different_seed_changes_training(make_config):
    a = record_store.read_record(run(make_config("seed=0"))[0])["metrics"]
    b = record_store.read_record(run(make_config("seed=1"))[0])["metrics"]
    assert a["final_train_loss"] != b["final_train_loss"]


def test_record_config_is_the_whole_resolved_config(make_config):
    config = make_config()
    record = record_store.read_record(run(config)[0])
    assert set(record["config"]) >= {"method", "task", "model", "budget", "mode", "seed", "device"}
    assert json.dumps(record["config"]["model"], sort_keys=True) == json.dumps(config["model"], sort_keys=True)


# -- Hydra's own flags and the project's help ---------------------------------------------------------

def test_hydra_shell_completion_installs(tmp_path, data_dir):
    done = cli("-sc", "install=bash", data_dir=data_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "hydra_bash_completion" in done.stdout and "complete" in done.stdout
    assert "error" not in done.stderr


def test_hydra_cfg_and_info_flags_print_and_run_nothing(tmp_path, data_dir):
    shown = cli("--cfg", "job", "method=favor", "budget.max_steps=5", f"results_dir={tmp_path / 'r'}",
                data_dir=data_dir, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "name: favor" in shown.stdout and "max_steps: 5" in shown.stdout
    info = cli("--info", "defaults", "point=cpu_mqar_64x4", data_dir=data_dir, cwd=tmp_path)
    assert info.returncode == 0 and "point/cpu_mqar_64x4" in info.stdout, info.stderr[-2000:]
    assert not (tmp_path / "r").exists()


def test_help_is_the_projects_own_with_every_group_and_its_choices(tmp_path, data_dir):
    done = cli("method=favor", "--help", data_dir=data_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout
    assert text.startswith("attention-suite: ") and "A run is one job" in text
    assert "Powered by Hydra" not in text and "== Configuration groups ==" not in text  # not Hydra's generic help
    listing = {line.split(":")[0].strip(): line for line in text.splitlines() if line.startswith("  ") and ": " in line}
    internal = ("tuning",)
    groups = sorted(p.name for p in (REPO / "conf").iterdir() if p.is_dir() and p.name not in (*internal, "hydra"))
    for group in [*groups, "hydra/launcher"]:
        assert group in listing, group
        folder = REPO / "conf" / group
        for choice in (p.stem for p in folder.glob("*.yaml")):
            assert choice in text, (group, choice)
    assert "[favor]" in listing["method"] and "[softmax]" not in listing["method"]  # this command's choice
    assert all(name in listing["method"] for name in methods.available())  # the method group: from the classes
    assert not any(name in listing for name in (*internal, "hydra/sweeper", "hydra/job_logging", "hydra/help"))
    examples = text.split("Examples:")[1].split("\n\n")[0].strip().splitlines()
    assert len(examples) == 3 and all(line.strip().startswith("python -m suite ") for line in examples)
    assert "seed=0" in text and "device=auto" in text  # the top-level keys with their values


def test_a_failed_job_in_a_sweep_keeps_the_sweep_going_and_a_mistake_in_it_is_one_line(tmp_path, data_dir):
    results = tmp_path / "results"
    done = cli("-m", "method=softmax,linear", "task=mqar", "task.vocab_size=128", "budget=smoke",
               "budget.max_steps=0", f"results_dir={results}", data_dir=data_dir, cwd=tmp_path)
    # each job refused, the sweep goes on; at its end it lists them and exits 2, so a scheduler sees it
    assert done.returncode == 2, done.stderr[-2000:]
    refused = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert refused == ["error: budget.max_steps must be a positive integer, got 0"] * 2
    assert "sweep: 2 of 2 jobs did not end ok:\n  job 0 (method=softmax " in done.stderr
    assert "\n  job 1 (method=linear " in done.stderr
    assert not results.exists() or not any(results.rglob("*.json"))
