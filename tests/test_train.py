"""mode=train: early stopping at budget.target_val_accuracy, the recurrent state bytes and CPU
threads a train record carries, and the sentence comparing the test accuracy with the baseline."""

from __future__ import annotations

import pytest

import suite.training
from suite import record_store
from suite.config import validate
from suite.errors import ConfigError
from suite.modes import run_schemas
from suite.modes.train.job import baseline_verdict, summary
from suite.run import run


def train_record(config: dict) -> dict:
    path, outcome = run(config, resume=False)
    assert outcome.status == "ok", outcome.error
    return record_store.read_record(path)


def test_target_val_accuracy_stops_at_the_first_eval_that_reaches_it(make_config, monkeypatch):
    # A smoke run learns nothing, so validation is fixed: every check reads 0.5.
    monkeypatch.setattr(suite.training, "evaluate", lambda *args, **kwargs: 0.5)
    config = make_config("method=linear", "task=mqar", "budget.target_val_accuracy=0.5")
    budget = config["budget"]
    assert budget["max_steps"] > budget["eval_every"]  # else there would be nothing to stop early
    metrics = train_record(config)["metrics"]
    assert metrics["stopped_early"] is True
    assert metrics["steps"] == metrics["best_step"] == budget["eval_every"]


def test_unreached_target_runs_every_step(make_config, monkeypatch):
    monkeypatch.setattr(suite.training, "evaluate", lambda *args, **kwargs: 0.5)
    config = make_config("method=linear", "task=mqar", "budget.target_val_accuracy=0.75")
    metrics = train_record(config)["metrics"]
    assert metrics["stopped_early"] is False and metrics["steps"] == config["budget"]["max_steps"]


def test_the_record_keeps_the_validation_curve(make_config, monkeypatch):
    values = [0.25, 0.5, 0.75, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    readings = iter(values)
    monkeypatch.setattr(suite.training, "evaluate", lambda *args, **kwargs: next(readings))
    config = make_config("method=linear", "task=mqar")
    metrics = train_record(config)["metrics"]
    every, steps = config["budget"]["eval_every"], metrics["steps"]
    expected_steps = [*range(every, steps + 1, every)] + ([steps] if steps % every else [])
    assert [step for step, _ in metrics["val_curve"]] == expected_steps
    assert [acc for _, acc in metrics["val_curve"]] == values[:len(expected_steps)]
    assert metrics["val_accuracy"] == max(acc for _, acc in metrics["val_curve"])


def test_cpu_memory_is_what_the_run_adds_not_the_process(make_config):
    # The process holds torch, the data and the model (hundreds of MiB); a smoke run's steps add a
    # few MiB. The figure is the growth above the built run, named as such.
    from suite.hardware import rss_bytes

    metrics = train_record(make_config("method=linear", "task=mqar", "device=cpu"))["metrics"]
    assert metrics["peak_memory_source"] == "rss_high_water_mark_above_built_run"
    assert 0 < metrics["peak_memory_bytes"] < rss_bytes() / 2


def test_the_run_memory_sees_an_allocation_made_during_the_run():
    import torch

    from suite.hardware import RunMemory

    memory = RunMemory(torch.device("cpu"))
    block = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    peak = memory.stop()
    del block
    assert 0.9 * 64 * 2**20 <= peak <= 3 * 64 * 2**20


@pytest.mark.parametrize("target", [1.5, 0, 0.0, -0.1, True, float("nan"), "0.9"])
def test_target_outside_0_1_is_refused(make_config, target):
    config = make_config()
    config["budget"]["target_val_accuracy"] = target
    with pytest.raises(ConfigError, match="budget.target_val_accuracy must be a number in"):
        validate(config, run_schemas())


@pytest.mark.parametrize("target", [None, 1, 0.99])
def test_target_in_0_1_or_null_is_accepted(make_config, target):
    config = make_config()
    config["budget"]["target_val_accuracy"] = target
    validate(config, run_schemas())  # raises if refused


D = 64  # model=hybrid: width 64, one head, one attention layer (after a convolution)


@pytest.mark.parametrize("method, expected", [
    ("linear", (D * D + D) * 4),  # float32 sums: kv (D features x D values) and z (D)
    ("taylor", (273 * D + 273) * 4),  # 1 + 16 + 16^2 = 273 features at feature_dim 16
    # The KV cache: keys and values of every position (float32), plus its int64 length counter.
    ("softmax", 2 * 64 * D * 4 + 8),
])
def test_train_record_carries_state_bytes_and_cpu_threads(make_config, method, expected):
    config = make_config(f"method={method}", "task=mqar", "model=hybrid", "device=cpu", "cpu_threads=1")
    assert config["model"]["d_model"] == D and config["model"]["num_heads"] == 1
    assert config["task"]["seq_len"] == 64
    if method == "taylor":
        assert config["method"]["options"]["feature_dim"] == 16
    metrics = train_record(config)["metrics"]
    assert metrics["state_bytes"] == expected
    assert metrics["cpu_threads"] == 1


def test_a_recall_run_is_tested_at_its_longer_lengths_with_the_same_weights(make_config):
    config = make_config("method=linear", "task=mqar", "model=hybrid", "task.test_lengths=[128]")
    lengths = train_record(config)["metrics"]["length_accuracy"]
    pairs = 128 * config["task"]["num_kv_pairs"] // config["task"]["seq_len"]
    assert [(m["seq_len"], m["num_kv_pairs"], m["baseline_accuracy"]) for m in lengths] == [(128, pairs, 1 / pairs)]
    assert 0 <= lengths[0]["accuracy"] <= 1


def test_longer_test_lengths_need_a_model_without_learned_positions(make_config):
    config = make_config("method=linear", "task=mqar", "model.position=learned", "task.test_lengths=[128]")
    with pytest.raises(ConfigError, match="learned position embeddings stop at task.seq_len=64"):
        run(config, resume=False)


def test_baseline_verdict_clearly_above():
    verdict = baseline_verdict(0.9, 0.1, "majority class", 1000)
    assert verdict.startswith("test accuracy 90.0% is above the baseline of 10.0% (majority class) by 80.0 points")


@pytest.mark.parametrize("accuracy, num_test", [(0.1, 1000), (0.05, 1000), (0.12, 100)])
def test_baseline_verdict_not_clearly_above(accuracy, num_test):
    # 0.12 on 100 examples is within two standard errors (6.5 points) of 0.1.
    assert baseline_verdict(accuracy, 0.1, "chance", num_test) == (
        f"test accuracy {100 * accuracy:.1f}% is not above the baseline of 10.0% (chance): "
        "nothing was learned at this budget")


def test_baseline_verdict_depends_on_the_test_size():
    # The same 2-point margin: within the noise of 100 examples, clear on 10,000.
    assert " is not above " in baseline_verdict(0.12, 0.1, "chance", 100)
    assert " is above the baseline of 10.0% (chance) by 2.0 points" in baseline_verdict(0.12, 0.1, "chance", 10_000)


def test_baseline_verdict_is_none_without_the_numbers():
    assert baseline_verdict(None, 0.1, "chance", 100) is None
    assert baseline_verdict(0.5, None, "chance", 100) is None
    assert baseline_verdict(0.5, 0.1, "chance", 0) is None
    verdict = baseline_verdict(0.9, 0.1, None, 100)
    assert verdict.startswith("test accuracy 90.0% is above the baseline of 10.0% by 80.0")


def test_summary_ends_with_the_verdict():
    record = {
        "status": "ok", "error": None, "method": {"name": "linear"}, "env": {"device": "cpu"},
        "task": {"name": "mqar", "num_test": 1000}, "config": {"budget": {"name": "smoke"}},
        "metrics": {"test_accuracy": 0.1, "baseline_accuracy": 0.1, "baseline_name": "chance"},
    }
    assert summary(record).splitlines()[-1] == (
        "test accuracy 10.0% is not above the baseline of 10.0% (chance): nothing was learned at this budget")
    record["task"]["num_test"] = None  # no test size: no verdict
    assert "nothing was learned" not in summary(record)
