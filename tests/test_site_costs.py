"""What a cell costs at the lengths it was trained and tested at (suite/site/costs.py): a cost record
joins the board cell of its configuration, its ratios are to exact attention's record of the same
point from the same host and commit only, and the site shows them per length (accuracy against cost),
where each method pays, in the lead's AT_LENGTH sentence and in cells.csv."""

from __future__ import annotations

import copy
import csv

import pytest

from suite import record_store
from suite.record_store import new_record
from suite.records import config_hash
from suite.run import run
from suite.site import build_site
from suite.site.board import board_columns, board_rows
from suite.site.costs import INFERENCE, TRAIN_STEP, cell_costs, cost_for
from suite.site.figures import board_figures
from suite.site.lead import lead, recall_points
from suite.site.runs import load_runs
from tests.test_site import rows_of
from tests.test_site_board import train

LENGTHS = (128, 256)  # the longer lengths the made-up board point is tested at (trained at 64)


def seeded(method: str, seed: int, accuracy: float, longer: dict[int, float], pairs: int = 4) -> dict:
    """A train record at MQAR 64 with the accuracy at each longer length of ``longer``."""
    record = train(method, seed=seed, test=accuracy, pairs=pairs)
    record["metrics"]["length_accuracy"] = [
        {"seq_len": n, "num_kv_pairs": n // 16, "baseline_accuracy": 16 / n, "accuracy": a} for n, a in longer.items()]
    return record


def cost(method: str, times: dict[int, float], memory: dict[int, float] | None = None, *, step: float = 0.1,
         host: str = "test cpu", commit: str = "c0ffee0", created: str = "2026-12-02T10:00:00Z",
         pairs: int = 4) -> dict:
    """A cost record of the configuration ``train(method, pairs=pairs)`` runs: the training step at 64
    tokens and inference per sequence at each length of ``times``."""
    config = copy.deepcopy(train(method, pairs=pairs)["config"]) | {"mode": {"name": "cost"}}
    points = [{"phase": TRAIN_STEP, "length": 64, "batch": 64, "status": "ok", "median_s": step,
               "per_sequence_s": step / 64, "peak_memory_bytes": 2**22}]
    points += [{"phase": INFERENCE, "length": n, "batch": 1, "status": "ok", "median_s": t, "per_sequence_s": t,
                "peak_memory_bytes": (memory or {}).get(n, 2**20)} for n, t in times.items()]
    record = new_record("cost", config=config, config_hash=config_hash(config, "cpu"),
                        method={"name": method, "impl": "auto"}, task={"name": "mqar", "seq_len": 64},
                        metrics={"points": points, "trained_length": 64, "test_lengths": list(LENGTHS)},
                        env={"device": "cpu", "device_name": host, "seed": 0, "git_commit": commit})
    record["created"] = created
    return record


def board(softmax_at_256: float = 0.95, linear_at_256: float = 0.30) -> list[dict]:
    """Softmax and linear, three seeds each, tested at 128 and 256 tokens."""
    return ([seeded("softmax", s, 0.99, {128: 0.97, 256: softmax_at_256 + 0.01 * s}) for s in range(3)]
            + [seeded("linear", s, 0.99, {128: 0.80, 256: linear_at_256 + 0.01 * s}) for s in range(3)])


EXACT = {64: 1e-3, 128: 4e-3, 256: 1.6e-2}  # exact attention's inference per sequence: quadratic
LINEAR = {64: 2e-3, 128: 4e-3, 256: 8e-3}  # linear attention's: linear, slower at 64 tokens


def site_rows(tmp_path, records, built: bool = False):
    """The runs, rows and columns of ``records`` (and with ``built``, the site built from them)."""
    for record in records:
        record_store.write_record(record, tmp_path / "results")
    if built:
        build_site(tmp_path / "results", tmp_path / "out")
    runs = load_runs(tmp_path / "results")[0]
    rows = board_rows(runs)
    return runs, rows, board_columns(rows)


def test_a_cost_is_a_ratio_to_exact_attention_from_the_same_host_and_commit_only(tmp_path):
    records = board() + [cost("softmax", EXACT, {256: 2**24}), cost("linear", LINEAR, {256: 2**21}),
                         cost("linear", {n: 9.0 for n in EXACT}, host="other cpu"),  # fewer records there
                         cost("softmax", {n: 1.0 for n in EXACT}, commit="beef000")]  # another commit
    runs, rows, columns = site_rows(tmp_path, records, built=True)
    costs = cell_costs(runs)
    linear = next(r for r in rows if r.method == "linear")
    found = cost_for(next(iter(linear.cells.values())).runs, costs)
    assert found.host == "test cpu" and found.reference.commit == "c0ffee0"
    assert found.ratio(INFERENCE, 256) == pytest.approx(0.5) and found.ratio(INFERENCE, 64) == pytest.approx(2.0)
    assert found.ratio(INFERENCE, 256, "memory") == pytest.approx(1 / 8)
    assert found.ratio(TRAIN_STEP, 64) == pytest.approx(1.0)
    with open(tmp_path / "out" / "cells.csv") as f:
        cells = {row["method"]: row for row in csv.DictReader(f)}
    assert cells["linear"]["cost_host"] == "test cpu"
    assert float(cells["linear"]["inference_vs_exact_at_256"]) == pytest.approx(0.5)
    assert float(cells["linear"]["inference_memory_vs_exact_at_256"]) == pytest.approx(1 / 8)
    assert float(cells["linear"]["accuracy_at_256"]) == pytest.approx(0.31)
    assert float(cells["softmax"]["inference_vs_exact_at_128"]) == pytest.approx(1.0)


def test_no_ratio_without_exact_attentions_record_of_that_host_and_commit(tmp_path):
    runs, rows, columns = site_rows(tmp_path, board() + [cost("softmax", EXACT, commit="beef000"),
                                                         cost("linear", LINEAR)])
    linear = next(r for r in rows if r.method == "linear")
    found = cost_for(next(iter(linear.cells.values())).runs, cell_costs(runs))
    assert found.value(INFERENCE, 256) == pytest.approx(8e-3) and found.ratio(INFERENCE, 256) is None
    assert not [f for f in board_figures(rows, columns, cell_costs(runs)) if "relative to exact" in f.title]
    assert not [s for s in lead(rows, columns, runs).summary if s.rule == "AT_LENGTH"]


def test_accuracy_against_cost_at_each_length_and_where_each_method_pays(tmp_path):
    runs, rows, columns = site_rows(tmp_path, board() + [cost("softmax", EXACT), cost("linear", LINEAR)])
    figures = {f.title: f for f in board_figures(rows, columns, cell_costs(runs))}
    at = [t for t in figures if "vs inference time relative to exact attention" in t]
    assert [t.split(": ")[0] for t in at] == [f"mqar 64·4 pairs (hybrid) at {n} tokens" for n in (64, 128, 256)]
    drawn = {r["series"]: r for r in rows_of(figures[at[2]])}
    assert drawn["linear"]["x"] == pytest.approx(0.5) and drawn["softmax"]["x"] == pytest.approx(1.0)
    assert drawn["linear"]["y"] == pytest.approx(0.31) and drawn["linear"]["size"] == 2**20
    assert "test cpu" in figures[at[2]].caption and "same host at the same commit" in figures[at[2]].caption
    (pays,) = [f for t, f in figures.items() if "where each method pays" in t]
    points = {(r["series"], r["x"]): r for r in rows_of(pays)}
    assert points[("linear", 256)]["y"] == pytest.approx(0.5) and points[("linear", 64)]["y"] == pytest.approx(2.0)
    assert points[("linear", 256)]["hollow"]  # 31% against exact attention's 96%: it pays in accuracy there
    assert not points[("linear", 64)]["hollow"]  # both at 99% at the trained length: a tie


def test_the_lead_states_what_each_method_keeps_and_saves_at_the_longest_length(tmp_path):
    runs, rows, columns = site_rows(tmp_path, board() + [cost("softmax", EXACT, {256: 2**24}),
                                                         cost("linear", LINEAR, {256: 2**21})])
    (sentence,) = [s for s in lead(rows, columns, runs).summary if s.rule == "AT_LENGTH"]
    assert sentence.text == ("At 256 tokens on mqar 64·4 pairs (hybrid) (trained at 64, tested only; cost on test "
                             "cpu), exact attention scores 96.0% ± 1.0; linear 31.0% ± 1.0 (clearly below) at 0.50× "
                             "its time and 0.12× its memory.")
    tie = board(softmax_at_256=0.95, linear_at_256=0.95)
    runs, rows, columns = site_rows(tmp_path / "tie", tie + [cost("softmax", EXACT), cost("linear", LINEAR)])
    (sentence,) = [s for s in lead(rows, columns, runs).summary if s.rule == "AT_LENGTH"]
    assert "linear 96.0% ± 1.0 at 0.50× its time" in sentence.text  # not clearly below: nothing given up


def test_the_lead_opens_with_the_longest_length_measured(tmp_path):
    # Two points: 64·4 pairs with costs to 128 tokens only, 64·8 pairs to 256. The lead's first
    # AT_LENGTH sentence is the one at the longest length (the long board's 4,096 before a short
    # board's 256), not the first point's.
    eight = [seeded(m, s, 0.99, {128: a, 256: a}, pairs=8) for m, a in (("softmax", 0.97), ("linear", 0.5))
             for s in range(3)]
    shorter = {n: t for n, t in EXACT.items() if n <= 128}, {n: t for n, t in LINEAR.items() if n <= 128}
    runs, rows, columns = site_rows(tmp_path, board() + [cost("softmax", shorter[0]), cost("linear", shorter[1])]
                                    + eight + [cost("softmax", EXACT, pairs=8), cost("linear", LINEAR, pairs=8)])
    assert [c.label for c in recall_points(columns)] == ["mqar 64·4 pairs (hybrid)", "mqar 64·8 pairs (hybrid)"]
    paying = [s.text.split(" (hybrid)")[0] for s in lead(rows, columns, runs).summary if s.rule == "AT_LENGTH"]
    assert paying == ["At 256 tokens on mqar 64·8 pairs", "At 128 tokens on mqar 64·4 pairs"]


@pytest.mark.slow  # 4-7 s (three real runs): .ci/run runs it
def test_a_cost_run_joins_the_train_run_of_the_same_configuration(make_config):
    """Real records: mode=cost of a train run's configuration is that cell's cost, and exact
    attention's cost record of the same point is its reference."""
    tiny = ("task=mqar", "model=hybrid", "device=cpu", "cpu_threads=1", "task.test_lengths=[128]")
    trained, _ = run(make_config("mode=train", "method=linear", *tiny))
    for method in ("linear", "softmax"):
        run(make_config("mode=cost", f"method={method}", *tiny))
    runs = load_runs(trained.parents[3])[0]
    costs = cell_costs(runs)
    (train_run,) = [r for r in runs if r.kind == "train"]
    found = cost_for([train_run], costs)
    assert found is not None and found.cost.run.method == "linear" and found.reference.run.method == "softmax"
    assert found.ratio(INFERENCE, 128) > 0 and found.ratio(TRAIN_STEP, 64) > 0
    assert record_store.read_record(trained)["status"] == "ok"


@pytest.mark.slow  # a subprocess, 3-5 s: .ci/run runs it
def test_the_long_table_script_prints_the_cells_their_lengths_and_costs(tmp_path):
    """scripts/long_table.py (docs/long_board.md's tables) reads results/long/ through the site's code."""
    import subprocess
    import sys
    from pathlib import Path

    trained = board()
    for i, record in enumerate(trained):  # 1,800 s each, the last linear one resumed: its training loop's 1,800 s
        record["metrics"].update(wall_time_s=1800.0 if i < 5 else 120.0, train_wall_time_s=1700.0 if i < 5 else 1800.0)
    for record in trained + [cost("softmax", EXACT, {256: 2**24}), cost("linear", LINEAR, {256: 2**21})]:
        record_store.write_record(record, tmp_path / "results" / "long")
    script = Path(__file__).resolve().parents[1] / "scripts" / "long_table.py"
    printed = subprocess.run([sys.executable, str(script), "--results", str(tmp_path / "results")],
                             capture_output=True, text=True, check=True, timeout=300).stdout
    assert "| linear | 3e-3 | 3 | 99.0 ± 0.0 | 100 ± 0 | 80.0 ± 0.0 | 31.0 ± 1.0 |" in printed  # solved: steps
    assert "| linear | 1.00× | 2.00× / 1.00× | 1.00× / 1.00× | 0.50× / 0.12× |" in printed
    assert "AT_LENGTH: At 256 tokens on mqar 64·4 pairs (hybrid)" in printed
    assert ("Wall time of the training runs (6 ok runs, every rate tried and every seed): 3.0 h in all, 1.5 h as two "
            "one-thread jobs; linear 3 runs 1.5 h, softmax 3 runs 1.5 h.") in printed
