"""mode=cost: a run's configuration timed at its trained length and at each of its test lengths, the
training step and inference, with peak memory; through the command line once, then in process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import methods
from suite import record_store
from suite.errors import ConfigError
from suite.run import run
from tasks.base import TaskError
from tests.outside_methods import STATELESS

REPO = Path(__file__).resolve().parent.parent
# A tiny recall point: the smoke budget (batch 4) at 64 tokens, tested at 128 and 256.
TINY = ("task=mqar", "model=hybrid", "device=cpu", "cpu_threads=1")


def cost_config(make_config, *overrides: str) -> dict:
    return make_config("mode=cost", *TINY, *overrides)


def by_phase(record: dict) -> dict[str, list[dict]]:
    points = record["metrics"]["points"]
    return {phase: [p for p in points if p["phase"] == phase] for phase in ("train_step", "inference")}


@pytest.mark.slow
def test_cli_smoke_writes_one_record_with_the_step_and_inference_at_every_length(tmp_path, data_dir):
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SUITE_DATA_DIR": str(data_dir),
           "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}
    done = subprocess.run([sys.executable, "-m", "suite", "mode=cost", "method=linear", "budget=smoke", *TINY,
                           "task.test_lengths=[128,256]", f"results_dir={results}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [path] = results.rglob("*.json")
    record = record_store.read_record(path)  # validated against the cost schema
    assert (record["kind"], record["status"], record["task"]["name"]) == ("cost", "ok", "mqar")
    metrics = record["metrics"]
    assert (metrics["trained_length"], metrics["test_lengths"]) == (64, [128, 256])
    assert (metrics["train_batch"], metrics["eval_batch"]) == (4, 1)
    phases = by_phase(record)
    [step] = phases["train_step"]
    assert (step["length"], step["batch"]) == (64, 4)  # the trained length, the budget's batch
    assert [(p["length"], p["batch"], p["num_kv_pairs"]) for p in phases["inference"]] == [
        (64, 1, 4), (128, 1, 8), (256, 1, 16)]  # the pairs per token the task tests with
    for p in (step, *phases["inference"]):
        assert p["status"] == "ok" and p["repeats"] >= 3
        assert 0 < p["p10_s"] <= p["median_s"] <= p["p90_s"]
        assert p["per_sequence_s"] == pytest.approx(p["median_s"] / p["batch"])
        assert p["peak_memory_bytes"] > 0 and p["memory_source"]
    assert metrics["load_average_before"] is not None and metrics["cpu_threads"] == 1
    assert record["env"]["cpu"] and record["env"]["torch"]  # the host the numbers belong to
    assert "per sequence" in done.stdout and "train_step" in done.stdout and "softmax record" in done.stdout


def test_the_record_names_the_threads_the_run_used_not_the_process_default(make_config):
    """The host class a timing is compared within (env.device_name: the CPU and its threads) is the
    run's cpu_threads, however many threads the process that launched it defaults to."""
    import torch

    threads = torch.get_num_threads() + 1
    path, outcome = run(cost_config(make_config, f"cpu_threads={threads}", "method=linear"))
    record = record_store.read_record(path)
    assert outcome.status == "ok" and record["env"]["device_name"].endswith(f"({threads} threads)")
    assert record["metrics"]["cpu_threads"] == threads and torch.get_num_threads() == threads - 1


def test_a_method_without_a_recurrent_form_is_timed(make_config, registry_kept):
    config = cost_config(make_config)
    config["method"] = {"name": methods.resolve(STATELESS).name, "impl": "auto", "options": {}}
    path, outcome = run(config)
    record = record_store.read_record(path)
    assert outcome.status == "ok" and record["status"] == "ok"
    # No test lengths: the trained length only.
    assert [(p["phase"], p["length"], p["status"]) for p in record["metrics"]["points"]] == [
        ("train_step", 64, "ok"), ("inference", 64, "ok")]


def test_an_oom_at_one_length_is_recorded_and_the_longer_ones_skipped(make_config, monkeypatch):
    from suite.modes.cost import job as cost_job

    real = cost_job.measure_phase

    def short_of_memory(fn, device, grid):
        if short_of_memory.calls == 2:  # the step, then inference at 64, then at 128
            raise MemoryError("DefaultCPUAllocator: can't allocate memory")
        short_of_memory.calls += 1
        return real(fn, device, grid)

    short_of_memory.calls = 0
    monkeypatch.setattr(cost_job, "measure_phase", short_of_memory)
    path, _ = run(cost_config(make_config, "method=linear", "task.test_lengths=[128,256]"))
    record = record_store.read_record(path)
    assert record["status"] == "ok"  # the points that ran are the record's
    statuses = [(p["length"], p["status"]) for p in by_phase(record)["inference"]]
    assert statuses == [(64, "ok"), (128, "oom"), (256, "skipped")]
    assert "ran out of memory at N=128" in by_phase(record)["inference"][2]["reason"]


@pytest.mark.parametrize("override, error, message", [
    ("+mode.grids.smoke.repeat=3", ConfigError, "mode.grids.smoke.repeat"),  # a misspelt key of the grid
    ("mode.grids.smoke.eval_batch=0", ConfigError, "mode.grids.smoke.eval_batch must be a positive integer"),
    ("task.test_lengths=[32]", TaskError, "expected a list of lengths longer than seq_len=64"),
])
def test_bad_input_is_one_clear_error_before_any_work(make_config, tmp_path, override, error, message):
    config = cost_config(make_config, "method=linear", override)
    with pytest.raises(error, match=message) as caught:
        run(config, resume=False)
    assert len(str(caught.value).splitlines()) == 1
    assert not (tmp_path / "results").exists()


def test_learned_positions_cannot_be_timed_past_the_trained_length(make_config):
    config = cost_config(make_config, "method=linear", "model.position=learned", "task.test_lengths=[128]")
    with pytest.raises(ConfigError, match="learned position embeddings stop at task.seq_len=64"):
        run(config, resume=False)


def test_every_budget_has_a_grid():
    import yaml

    grids = yaml.safe_load((REPO / "conf" / "mode" / "cost.yaml").read_text())["grids"]
    budgets = {p.stem for p in (REPO / "conf" / "budget").glob("*.yaml")}
    assert budgets <= set(grids)  # the long board's points run budget=cpu
