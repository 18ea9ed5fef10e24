"""protocol=lr_sweep: the choice of the learning rate (records.select_lr), the board cell it is
chosen in (records.cell_key), and the sweep end to end: its runs, its choice, its resumption."""

from __future__ import annotations

import pytest

from suite import record_store, records
from suite.protocol import with_lr_and_seed
from tests.test_cli import cli
from tests.utils import assert_config_refused


def swept(lr: float, val: float | None, steps: int = 100, status: str = "ok") -> dict:
    """The parts of a record select_lr reads."""
    metrics = {"steps": steps} if val is None else {"steps": steps, "val_accuracy": val}
    return {"status": status, "config": {"budget": {"lr": lr}}, "metrics": metrics}


def test_select_lr_takes_the_best_validation_accuracy():
    runs = [swept(1e-3, 0.50), swept(3e-3, 0.75), swept(1e-2, 0.60)]
    assert records.select_lr(runs) == 3e-3


def test_select_lr_ties_go_to_fewer_steps_then_the_smaller_rate():
    # Equal accuracy: the run that stopped early (fewer steps) learned faster.
    assert records.select_lr([swept(1e-3, 0.9, steps=100), swept(1e-2, 0.9, steps=40)]) == 1e-2
    # Equal accuracy and steps: the smaller rate.
    assert records.select_lr([swept(1e-2, 0.9), swept(1e-3, 0.9), swept(3e-3, 0.9)]) == 1e-3


def test_select_lr_ignores_runs_that_are_not_ok():
    runs = [swept(1e-3, 0.40), swept(1e-2, 0.99, status="diverged"), swept(3e-3, 0.99, status="error"),
            swept(3e-2, None)]  # ok but without a validation accuracy
    assert records.select_lr(runs) == 1e-3


def test_select_lr_is_none_when_no_run_is_ok():
    assert records.select_lr([swept(1e-3, None, status="error"), swept(1e-2, 0.5, status="diverged")]) is None
    assert records.select_lr([]) is None


def test_cell_key_ignores_lr_and_seed_but_not_the_task(make_config):
    base = make_config("method=linear", "task=mqar")
    key = records.cell_key(base)
    assert records.cell_key(make_config("method=linear", "task=mqar", "budget.lr=0.01", "seed=3")) == key
    assert records.cell_key(make_config("method=linear", "task=mqar", "task.seq_len=128")) != key
    assert records.cell_key(make_config("method=softmax", "task=mqar")) != key
    assert records.cell_key(make_config("method=linear", "task=mqar", "budget.max_steps=9")) != key
    # The run's own hash does see the rate and the seed.
    assert (records.config_hash(make_config("method=linear", "task=mqar", "budget.lr=0.01"), "cpu")
            != records.config_hash(base, "cpu"))


def test_config_hash_ignores_protocol_and_cpu_threads(make_config):
    base = make_config("method=linear", "task=mqar")
    swept_config = make_config("method=linear", "task=mqar", "protocol=lr_sweep", "cpu_threads=1")
    assert swept_config["protocol"]["name"] == "lr_sweep" and swept_config["cpu_threads"] == 1
    assert records.config_hash(swept_config, "cpu") == records.config_hash(base, "cpu")
    assert records.cell_key(swept_config) == records.cell_key(base)


@pytest.mark.parametrize("protocol, says", [
    ({"lrs": [], "seeds": [0]}, "protocol.lrs must be a non-empty list"),
    ({"lrs": [1e-3, -1e-3], "seeds": [0]}, "protocol.lrs must be a non-empty list"),
    ({"lrs": [1e-3, True], "seeds": [0]}, "protocol.lrs must be a non-empty list"),
    ({"lrs": 1e-3, "seeds": [0]}, "protocol.lrs must be a non-empty list"),
    ({"lrs": [1e-3], "seeds": []}, "protocol.seeds must be a non-empty list"),
    ({"lrs": [1e-3], "seeds": [0, 0]}, "protocol.seeds must be a non-empty list of distinct integers"),
    ({"lrs": [1e-3], "seeds": [0, 1.5]}, "protocol.seeds must be a non-empty list of distinct integers"),
])
def test_the_schema_refuses_bad_sweep_lists(make_config, protocol, says):
    assert_config_refused(make_config("protocol=lr_sweep"), "protocol", protocol, says)


def test_swept_rates_enter_the_config_as_floats(make_config):
    config = make_config("protocol=lr_sweep")
    varied = with_lr_and_seed(config, 1, 2)
    assert type(varied["budget"]["lr"]) is float and varied["budget"]["lr"] == 1.0 and varied["seed"] == 2
    assert config["seed"] == 0  # the composed config is left as it was


SWEEP = ("method=linear", "task=mqar", "budget=smoke", "protocol=lr_sweep", "protocol.lrs=[1e-3,1e-2]",
         "protocol.seeds=[0,1]", "protocol.bracket=0")


def written(results) -> list:
    return sorted(p for p in results.rglob("*") if p.is_file())


@pytest.mark.slow
def test_lr_sweep_end_to_end_chooses_on_seed_0_then_runs_the_other_seeds_and_resumes(tmp_path, data_dir):
    results = tmp_path / "results"
    done = cli(*SWEEP, f"results_dir={results}", data_dir=data_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = [record_store.read_record(p) for p in written(results)]
    assert len(runs) == 3 and all(r["status"] == "ok" for r in runs)

    first = [r for r in runs if r["config"]["seed"] == 0]
    assert sorted(r["config"]["budget"]["lr"] for r in first) == [1e-3, 1e-2]
    others = [r for r in runs if r["config"]["seed"] != 0]
    assert [r["config"]["seed"] for r in others] == [1]
    chosen = records.select_lr(first)
    assert others[0]["config"]["budget"]["lr"] == chosen
    assert f"chosen {chosen:g}" in done.stdout
    # One board cell: the three runs differ only in rate and seed.
    assert len({records.cell_key(r["config"]) for r in runs}) == 1
    assert len({r["config_hash"] for r in runs}) == 3

    again = cli(*SWEEP, f"results_dir={results}", data_dir=data_dir, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("skipped: an ok record of this run already exists") == 3
    assert len(written(results)) == 3


@pytest.mark.parametrize("bad", ["protocol.lrs=[]", "protocol.lrs=[1e-3,-1e-3]", "protocol.seeds=[0,0]"])
def test_bad_sweep_lists_are_one_line_exit_2_writing_nothing(tmp_path, data_dir, bad):
    results = tmp_path / "results"
    done = cli(*SWEEP, bad, f"results_dir={results}", data_dir=data_dir, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: protocol."), done.stderr[-2000:]
    assert not results.exists() or written(results) == []


@pytest.mark.parametrize("tried, chosen, beyond", [
    ([1e-3, 3e-3, 1e-2], 1e-3, 3e-4),  # the board's grid: one step of its own ratio, one significant digit
    ([1e-3, 3e-3, 1e-2], 1e-2, 3e-2),
    ([1e-3, 3e-3, 1e-2], 3e-3, None),  # inside: bracketed
    ([3e-4, 1e-3, 3e-3, 1e-2], 3e-4, 9e-5),
    ([1e-3], 1e-3, None),  # one rate has no ratio to step by
])
def test_the_rate_past_an_edge_steps_by_the_edges_ratio(tried, chosen, beyond):
    from suite.protocol import rate_past_edge

    assert rate_past_edge(tried, chosen) == beyond


@pytest.mark.slow
def test_a_sweep_whose_best_rate_sits_at_an_edge_tries_the_rate_past_it(tmp_path, data_dir):
    """Two rates always leave the best at an edge: the sweep adds the next rate past it (at seed 0),
    at most ``protocol.bracket`` per side, and runs the other seeds at the rate chosen among all."""
    results = tmp_path / "results"
    done = cli(*SWEEP[:-1], "protocol.bracket=1", f"results_dir={results}", data_dir=data_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = [record_store.read_record(p) for p in written(results)]
    first = [r for r in runs if r["config"]["seed"] == 0]
    rates = sorted(r["config"]["budget"]["lr"] for r in first)
    assert len(first) in (3, 4) and {1e-3, 1e-2} < set(rates) <= {1e-4, 1e-3, 1e-2, 1e-1}
    assert "sits at an edge of the rates tried; adding" in done.stdout
    if len(first) == 3:  # one side added, and the best is then inside or the cap of 1 was reached
        chosen = records.select_lr(first)
        assert chosen == rates[1] or "is still at the" in done.stdout
    others = [r for r in runs if r["config"]["seed"] == 1]
    assert len(others) == 1 and others[0]["config"]["budget"]["lr"] == records.select_lr(first)
