"""What the board tells a reader: board points as columns, one cell per configuration (reruns once,
the chosen learning rate only, spread over distinct seeds), the baseline each column is read
against, greyed cells that are not clearly above it, what a budget means, cost, the board's
figures, the fidelity headline, and the tasks left off."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from suite.record_store import new_record, write_record
from suite.records import config_hash
from suite.site import build_site
from suite.site.board import board_columns, board_rows, by_host
from suite.site.build import SITE_DIR, SiteError
from suite.site.charts import validate
from suite.site.figures import board_figures, pareto_figures
from suite.site.render import static_svg
from suite.site.runs import load_runs
from tests.test_site import as_html, fidelity_record, rows_of, svg_texts

LRS = (1e-3, 3e-3, 1e-2)


def train(method: str = "softmax", task: str = "mqar", *, seed: int = 0, lr: float = 3e-3, test: float | None = 0.9,
          val: float | None = None, budget: str = "cpu", seq_len: int = 64, pairs: int | None = 4,
          created: str = "2026-12-01T10:00:00Z", status: str = "ok", baseline: float | None = None,
          baseline_name: str | None = None, tokens: float = 1000.0, state: int = 32768, options: dict | None = None,
          steps: int | None = None, max_steps: int = 2000, stopped: bool | None = None, memory: int = 2**20,
          memory_source: str = "rss_high_water_mark_above_built_run", curve: list | None = None,
          best_step: int | None = None, commit: str = "c0ffee0", dirty: bool = False, time: str | None = None,
          d_model: int = 64, loss: float | None = None, params: int | None = None,
          recipe: dict | None = None) -> dict:
    """A train record of the CPU board's shape, with made-up numbers (``time``: the method's
    time_in_length; ``curve``: its val_curve; ``loss``: its final train loss; ``baseline``: by default the
    task's own, 1 / pairs for MQAR, else 1%; ``recipe``: its config's recipe block, none by default)."""
    if baseline is None:
        baseline = 1 / pairs if task == "mqar" and pairs else 0.01
    # As suite/training.py writes them: a run stops at its first validation at the target (0.99), and
    # stopped_early is steps < max_steps (by default one that stops took 100 steps).
    best = max([test if val is None else val, *(a for _, a in curve or [])], default=None) if test is not None else None
    if stopped is None:
        stopped = best is not None and best >= 0.99
    if steps is None:
        steps = 100 if stopped else max_steps
    if baseline_name is None:
        baseline_name = "a value from the context at random: 1 / key-value pairs" if task == "mqar" else "chance"
    task_block = {"name": task, "seq_len": seq_len} | ({"num_kv_pairs": pairs} if pairs is not None else {})
    config = {
        "method": {"name": method, "impl": "auto", "options": options or {}},
        "task": dict(task_block),
        "budget": {"name": budget, "max_steps": max_steps, "batch_size": 64, "lr": lr, "num_train": 20000,
                   "num_val": 500, "num_test": 1000, "target_val_accuracy": 0.99, "weight_decay": 0.1,
                   "warmup_steps": 100},
        "model": {"name": "hybrid", "d_model": d_model, "num_layers": 2, "num_heads": 1,
                  "mixers": ["conv", "attention"], "position": "none", "mlp": False},
        "protocol": {"name": "lr_sweep", "lrs": list(LRS), "seeds": [0, 1, 2]},
        "mode": {"name": "train"}, "seed": seed, "device": "auto",
    } | ({"recipe": recipe} if recipe else {})
    metrics = {"baseline_accuracy": baseline, "baseline_name": baseline_name, "steps": steps,
               "stopped_early": stopped, "train_tokens_per_s": tokens, "peak_memory_bytes": memory,
               "peak_memory_source": memory_source, "state_bytes": state, "median_step_time_s": 0.01}
    if test is not None:
        metrics |= {"test_accuracy": test, "val_accuracy": test if val is None else val}
    if curve is not None:
        metrics["val_curve"] = curve
    if best_step is not None:
        metrics["best_step"] = best_step
    if loss is not None:
        metrics["final_train_loss"] = loss
    if params is not None:
        metrics["param_count"] = params
    method_block = {"name": method, "impl": "auto"} | ({"time_in_length": time} if time else {})
    record = new_record("train", config=config, config_hash=config_hash(config, "cpu"), method=method_block,
                        task=task_block | {"family": "recall" if pairs else "lra"}, metrics=metrics, status=status,
                        env={"device": "cpu", "device_name": "test cpu", "seed": seed, "git_commit": commit,
                             "git_dirty": dirty})
    record["created"] = created
    return record


def build(tmp_path: Path, records: list[dict], site_dir: Path = SITE_DIR) -> str:
    """Write ``records``, build the site, return the board's HTML."""
    for record in records:
        write_record(record, tmp_path / "results")
    return (build_site(tmp_path / "results", tmp_path / "out", site_dir).out_dir / "index.html").read_text()


def board_table(page: str) -> str:
    return re.search(r'<table class="board.*?</table>', page, re.S).group(0)


def row_html(page: str, method: str, table: str = "board") -> str:
    """The HTML of ``method``'s row in the board (or another table of the board page)."""
    found = re.search(rf'<table class="{table}.*?</table>', page, re.S).group(0)
    return re.search(rf'<tr data-device[^>]*><th scope="row" data-value="{method}">.*?</tr>', found, re.S).group(0)


def section(page: str, heading: str) -> str:
    """The board page from the <h2> ``heading`` to the next <h2>."""
    return re.search(rf"<h2[^>]*>{heading}</h2>(.*?)(?=<h2|$)", page, re.S).group(1)


def sweep_records(method: str = "softmax", chosen_tests=(0.90, 0.92, 0.94)) -> list[dict]:
    """An lr sweep at seed 0 (3e-3 best on validation), then seeds 1 and 2 at 3e-3."""
    later = "2026-12-01T11:00:00Z"  # the rates not chosen ran last: the latest run of a seed is not the answer
    records = [train(method, lr=1e-3, val=0.452, test=0.40, created=later),
               train(method, lr=3e-3, val=0.991, test=chosen_tests[0]),
               train(method, lr=1e-2, val=0.12, test=0.10, created=later)]
    return records + [train(method, seed=s, lr=3e-3, test=t) for s, t in zip((1, 2), chosen_tests[1:])]


def test_reruns_of_one_seed_count_once(tmp_path):
    # Reruns of one config agree (two that disagree are a conflict: test_site_faults.py); a record
    # whose hash does not recompute from its config (hashed by an older rule, or edited) is skipped.
    reruns = [train("softmax", test=t, created=f"2026-12-01T1{i}:00:00Z") for i, t in enumerate((0.9, 0.6, 0.9))]
    reruns[1]["config_hash"] = "hashed-by-an-older-version"  # skipped: the seed counts once
    seeds = [train("linear", seed=s, test=0.8 + 0.01 * s) for s in range(3)]
    page = build(tmp_path, reruns + seeds)
    rows = {r.method: r for r in board_rows(load_runs(tmp_path / "results")[0])}
    (cell,) = rows["softmax"].cells.values()
    assert cell.values() == [0.9]  # the latest rerun, once
    softmax = row_html(page, "softmax")
    assert "n=1" in softmax and "n=3" not in softmax and "90.0%" in softmax
    assert "n=3" in row_html(page, "linear")


def test_chosen_lr_is_shown_with_every_rate_tried(tmp_path):
    cell = row_html(build(tmp_path, sweep_records()), "softmax")
    assert "lr 3e-3" in cell
    assert "1e-3: 45.2%" in cell and "<b class=\"rate\">3e-3: 99.1%</b>" in cell and "1e-2: 12.0%" in cell


def test_only_the_chosen_rate_is_averaged(tmp_path):
    records = sweep_records() + [train("softmax", seed=1, lr=1e-2, test=0.05, created="2026-12-01T12:00:00Z")]
    page = build(tmp_path, records)
    rows = {r.method: r for r in board_rows(load_runs(tmp_path / "results")[0])}
    (cell,) = rows["softmax"].cells.values()
    assert cell.lr == 3e-3 and sorted(cell.values()) == [0.90, 0.92, 0.94]
    assert "92.0%" in row_html(page, "softmax") and "n=3" in row_html(page, "softmax")


def test_a_rate_that_failed_shows_its_status_in_the_sweep(tmp_path):
    records = sweep_records()[:2] + [train("softmax", lr=1e-2, test=None, status="diverged")]
    cell = row_html(build(tmp_path, records), "softmax")
    assert "1e-2: diverged" in cell and "lr 3e-3" in cell


def test_baseline_row_heads_the_board(tmp_path):
    records = [train("softmax", "listops_short", pairs=None, seed=s, test=0.6, baseline=0.25,
                     baseline_name="majority class") for s in range(3)]
    board = board_table(build(tmp_path, records))
    baseline = re.search(r'<tr class="baseline">.*?</tr>', board, re.S).group(0)
    assert "25.0%" in baseline and "majority class" in baseline
    assert board.index('class="baseline"') < board.index('data-value="softmax"')  # above the methods
    assert '>listops_short<span class="config">hybrid</span></th>' in board  # the point in two lines


def test_cells_not_clearly_above_baseline_are_greyed_and_marked(tmp_path):
    records = [train("near", seed=s, test=t, baseline=0.25) for s, t in enumerate((0.26, 0.24, 0.28))]
    records += [train("clear", seed=s, test=t, baseline=0.25) for s, t in enumerate((0.90, 0.91, 0.92))]
    records += [train("single", test=0.95, baseline=0.25)]
    page = build(tmp_path, records)
    near, clear, single = (row_html(page, m) for m in ("near", "clear", "single"))
    # The board's one test: (mean − baseline) over √(s² / n + p(1 − p) / N), N = 1,000 test examples;
    # clear: 0.66 / √(0.01² / 3 + 0.91 · 0.09 / 1000) = 61.48 on Welch-Satterthwaite's 23.9 df.
    assert 'class="greyed' in near and "≈ baseline" in near and "t = 0.55, df = 11.9, p ≥ 0.05" in near
    assert 'class="greyed' in single and "n=1: untested" in single and "n ≥ 2" in single
    assert "greyed" not in clear and "≈ baseline" not in clear and "untested" not in clear
    assert ("Clearly above baseline 25.0%: t = 61.48, df = 23.9, p &lt; 0.05 (Welch over 3 seeds plus the sampling "
            "error of 1,000 test examples)") in clear
    assert "test set&#39;s binomial sampling error added" in section(page, "How to read the board")  # the rule


def test_budget_table_says_what_a_run_does(tmp_path):
    table = section(build(tmp_path, sweep_records()), "What a budget means")
    row = re.search(r"<tr><td>cpu</td>.*?</tr>", table, re.S).group(0)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[:6] == ["cpu", "mqar 64·4 pairs (hybrid)", "2000", "64", "20,000 / 500 / 1,000", "99.0%"]
    assert "hybrid, d_model 64, 2 layers, 1 head, mixers conv+attention, positions none, no MLP" in cells[6]
    assert "1e-3, 3e-3, 1e-2" in cells[7] and "seeds 0, 1, 2" in cells[7]
    assert "stop early" in table


def test_cost_table_has_throughput_memory_and_state(tmp_path):
    records = [train("softmax", seed=s, tokens=t, state=32768) for s, t in enumerate((100.0, 200.0, 900.0))]
    cell = row_html(build(tmp_path, records), "softmax", table="cost")
    assert "200 tok/s" in cell and "1.0 MiB peak" in cell and "32.0 KiB state" in cell  # medians


def mqar_board(methods: list[str]) -> list[dict]:
    """Three seeds of each method at three MQAR points, and one listops_short point."""
    records = []
    for i, method in enumerate(methods):
        for seq_len, pairs in ((64, 4), (128, 8), (128, 16)):
            records += [train(method, seq_len=seq_len, pairs=pairs, seed=s, test=0.9 - 0.02 * i - 0.01 * s,
                              state=1024 * (i + 1)) for s in range(3)]
        records.append(train(method, "listops_short", pairs=None, test=0.5, baseline=0.2))
    return records


def test_mqar_figures_are_on_the_board(tmp_path):
    page = build(tmp_path, mqar_board(["softmax", "linear"]))
    plots = section(page, "Plots of the board")
    first = page.split('<table class="board', 1)[0]  # the first screen, before the tables
    assert "MQAR: test acc vs key-value pairs on the hybrid model, cpu budget, cpu" in first
    assert "key-value pairs on the hybrid" not in plots  # shown once, at the top
    for point in ("mqar 64·4 pairs (hybrid)", "mqar 128·8 pairs (hybrid)", "mqar 128·16 pairs (hybrid)"):
        assert f"{point}: test acc vs state size" in plots
    assert "MQAR: test acc vs train throughput" in plots and "listops_short (hybrid): test acc vs train" in plots
    assert "key-value pairs on" not in plots.split("listops_short (hybrid): test acc")[1]  # no recall plot of it
    assert "Marker area is proportional to the run&#39;s own peak memory" in plots
    rows = board_rows(load_runs(tmp_path / "results")[0])
    figures = {f.title.split(",")[0]: f for f in board_figures(rows, board_columns(rows))}
    for figure in figures.values():
        validate(figure.spec)  # valid Vega-Lite
    recall = figures["MQAR: test acc vs key-value pairs on the hybrid model"]
    # Seeds 0.9 - 0.02 i - 0.01 s: mean 0.89 - 0.02 i, std 0.01, drawn as a band around each line.
    softmax = [r for r in rows_of(recall) if r["series"] == "softmax"]
    assert [r["x"] for r in softmax] == [4, 8, 16] and all(r["y"] == pytest.approx(0.89) for r in softmax)
    assert all((r["lo"], r["hi"]) == (pytest.approx(0.88), pytest.approx(0.90)) for r in softmax)
    assert [layer["mark"]["type"] for layer in recall.spec["layer"]][:2] == ["area", "line"]
    cost = figures["MQAR: test acc vs train throughput"]
    assert {r["size"] for r in rows_of(cost)} == {2**20} and cost.spec["layer"][0]["mark"]["type"] == "rule"  # bars
    points = next(layer for layer in cost.spec["layer"] if layer["mark"]["type"] == "point")
    assert points["encoding"]["size"]["field"] == "size"  # marker area by peak memory


def test_no_series_is_dropped_with_twelve_methods(tmp_path):
    methods = [f"method{i:02d}" for i in range(12)]
    build(tmp_path, mqar_board(methods))
    rows = board_rows(load_runs(tmp_path / "results")[0])
    figures = board_figures(rows, board_columns(rows))
    assert len(figures) == 6  # kv pairs, 3 state sizes, throughput of MQAR and of listops_short
    for figure in figures:
        assert figure.series() == methods, figure.title
        assert set(methods) <= set(svg_texts(static_svg(figure.spec))), figure.title  # a legend entry each
        assert "12 series" in figure.caption
    pareto = list((tmp_path / "out" / "figures").glob("plot-*test_acc_vs*.svg"))
    assert pareto and all(set(methods) <= set(svg_texts(svg.read_text())) for svg in pareto)


def test_a_variant_of_a_method_gets_its_own_named_row_and_joins_the_state_plot(tmp_path):
    records = [train("favor", seed=s, test=0.8, options={"num_features": 64}, pairs=p, seq_len=n)
               for s in range(3) for n, p in ((64, 4), (128, 8))]
    records += [train("favor", seed=s, test=0.2, options={"num_features": 16}, state=512) for s in range(2)]
    page = build(tmp_path, records)
    usual, variant = row_html(page, "favor"), row_html(page, r"favor \(num_features=16\)")
    assert "80.0%" in usual and "n=3" in usual and "20.0%" not in usual
    assert ("20.0%" in variant and "n=2" in variant and '<span class="variant"' in variant
            and "num_features=16" in variant)
    rows = board_rows(load_runs(tmp_path / "results")[0])
    (state_plot,) = [f for f in board_figures(rows, board_columns(rows))
                     if f.title.startswith("mqar 64·4 pairs (hybrid): test acc vs state size")]
    favor = [(r["x"], r["y"]) for r in rows_of(state_plot) if r["series"] == "favor"]
    assert favor == [(512, pytest.approx(0.2)), (32768, pytest.approx(0.8))]  # both state sizes, one series
    assert "mqar 64·4 pairs (hybrid): test acc vs state size" in page


def test_accuracy_against_test_length_draws_each_methods_seeds_at_every_length(tmp_path):
    """The trained length, then each longer test length from the same runs' length_accuracy,
    mean and spread over seeds, hollow where not clearly above that length's own baseline."""
    def tested(method, seed, at_256):
        record = train(method, seed=seed, test=0.9)
        record["metrics"]["length_accuracy"] = [
            {"seq_len": 128, "num_kv_pairs": 8, "baseline_accuracy": 1 / 8, "accuracy": 0.8},
            {"seq_len": 256, "num_kv_pairs": 16, "baseline_accuracy": 1 / 16, "accuracy": at_256}]
        return record

    records = [tested("linear", s, 0.5 + 0.01 * s) for s in range(3)] + [tested("taylor", s, 0.06) for s in range(3)]
    build(tmp_path, records + [train("softmax", seed=s) for s in range(3)])  # softmax: not tested longer
    rows = board_rows(load_runs(tmp_path / "results")[0])
    (figure,) = [f for f in board_figures(rows, board_columns(rows)) if "vs test length" in f.title]
    drawn = {(r["series"], r["x"]): r for r in rows_of(figure)}
    assert sorted(drawn) == [(m, n) for m in ("linear", "taylor") for n in (64, 128, 256)]
    assert drawn[("linear", 256)]["y"] == pytest.approx(0.51) and not drawn[("linear", 256)]["hollow"]
    assert drawn[("taylor", 256)]["hollow"]  # 6% against a 1/16 baseline at 256 tokens
    assert drawn[("linear", 128)]["x_text"] == "128 tokens, 8 pairs"


def test_the_most_run_configuration_is_shown_and_the_others_counted(tmp_path):
    # Two configurations in one row and column that differ in something other than a size: the
    # cell shows the one with more runs and counts the other.
    records = [train("favor", seed=s, test=0.8) for s in range(3)]
    other = train("favor", test=0.2)
    other["config"]["budget"]["warmup_steps"] = 10
    other["config_hash"] = config_hash(other["config"], "cpu")  # as a run of that config writes it
    page = build(tmp_path, records + [other])
    cell = row_html(page, "favor")
    assert "80.0%" in cell and "n=3" in cell and "+1 other config(s), 1 run(s), not shown" in cell


def test_recall_is_read_against_copying_a_context_value_not_chance(tmp_path):
    # Answering with any value of the context scores 1 / pairs = 25% without binding a key, so 26% is
    # not a recall result (chance over the vocabulary, 1%, would call it one; a record that says so is
    # refused: tests/test_hostile.py).
    records = [train("copier", seed=s, test=t) for s, t in enumerate((0.26, 0.25, 0.27))]
    records += [train("binder", seed=s, test=t) for s, t in enumerate((0.97, 0.98, 0.99))]
    page = build(tmp_path, records)
    baseline = re.search(r'<tr class="baseline">.*?</tr>', board_table(page), re.S).group(0)
    assert "25.0%" in baseline and "a value from the context at random: 1 / key-value pairs" in baseline
    assert 'class="greyed' in row_html(page, "copier") and "≈ baseline" in row_html(page, "copier")
    assert "greyed" not in row_html(page, "binder")


def test_smoke_records_are_not_on_the_board(tmp_path):
    records = [train("smokey", budget="smoke", test=0.99)] + [train("softmax", seed=s) for s in range(2)]
    page = build(tmp_path, records)
    on_board = page.split('<h2 id="smoke">')[0]
    assert "smokey" not in on_board and "smokey" not in board_table(page)  # in no table or figure of the board
    smoke = re.search(r'<table class="runs smoke.*?</table>', page, re.S).group(0)
    assert "smokey" in smoke and "99.0%" in smoke  # listed apart, in the section marked smoke
    assert "smokey" in (tmp_path / "out" / "runs.html").read_text()  # still a run of the site


def test_left_off_tasks_are_listed_with_their_reasons(tmp_path):
    notes = json.loads((SITE_DIR / "data" / "board_notes.json").read_text())["left_off"]
    listed = section(build(tmp_path / "a", [train()]), "Not on the CPU board")
    for note in notes:
        assert f"<b>{as_html(note['task'])}</b>: {as_html(note['reason'])}" in listed
    assert {"listops", "text", "retrieval", "image", "pathx", "pathfinder", "genomics",
            "selective_copying"} <= {n["task"] for n in notes}
    site = tmp_path / "site"
    shutil.copytree(SITE_DIR, site, ignore=shutil.ignore_patterns("_build"))
    (site / "data" / "board_notes.json").write_text(json.dumps({"left_off": [{"task": "foo", "reason": "bar"}]}))
    assert "<b>foo</b>: bar" in section(build(tmp_path / "b", [train()], site), "Not on the CPU board")


def test_setup_notes_are_shown_and_a_malformed_note_is_refused(tmp_path):
    findings = json.loads((SITE_DIR / "data" / "board_notes.json").read_text())["findings"]
    shown = section(build(tmp_path / "a", [train()]), "Notes on the setup")
    assert findings and all(f"<dt>{as_html(n['title'])}</dt><dd>{as_html(n['text'])}</dd>" in shown for n in findings)
    site = tmp_path / "site"
    shutil.copytree(SITE_DIR, site, ignore=shutil.ignore_patterns("_build"))
    (site / "data" / "board_notes.json").write_text(json.dumps({"left_off": [], "findings": [{"title": "t"}]}))
    with pytest.raises(SiteError, match='"findings": \\[\\{"title": ..., "text": ...\\}'):
        build(tmp_path / "b", [train()], site)
    (site / "data" / "board_notes.json").write_text(json.dumps({"left_off": []}))  # no findings: no section
    assert "Notes on the setup" not in build(tmp_path / "c", [train()], site)


def test_fidelity_headline_at_one_length_and_feature_count(tmp_path):
    page = build(tmp_path / "a", [train(), fidelity_record("favor")])
    table = section(page, "Fidelity to softmax")
    assert "N = 1,024" in table and "nearest 256" in table and "one table per input source" in table
    assert '<table class="fidelity sortable"><caption>gaussian</caption>' in table
    favor = re.search(r'<th scope="row">favor</th>.*?</tr>', table, re.S).group(0)
    # 1 / sqrt(256), 2 / sqrt(256), 0.5 / sqrt(256): the denominator first, then the ranked columns
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", favor)
    assert cells == ["256", "0.0625", "0.125", "0.0312"]
    assert "Fidelity to softmax" not in build(tmp_path / "b", [train()])


# The CPU board's shape (suite/boards/cpu.yaml): every method at
# three MQAR points and ListOps short at its default state, and at the state-bound point (64, 16) at
# more state sizes; each cell a 3-rate sweep at seed 0, then seeds 1 and 2.
CPU_METHODS = ("softmax", "linear", "favor", "taylor", "loglinear", "hedgehog", "sliding_window")
CPU_STATES = {"softmax": [{"d_model": 16}, {"d_model": 32}], "linear": [{"d_model": 16}, {"d_model": 32}],
              "loglinear": [{"d_model": 16}, {"d_model": 32}], "favor": [{"num_features": 16}, {"num_features": 64}],
              "taylor": [{"feature_dim": 4}, {"feature_dim": 8}], "hedgehog": [{"feature_dim": 8}, {"feature_dim": 16}],
              "sliding_window": [{"window": 8}, {"window": 16}, {"window": 32}]}


def cpu_cell(method: str, accuracy: float, *, curves: bool = False, **kw) -> list[dict]:
    """A sweep at seed 0 (3e-3 chosen) and seeds 1 and 2, about ``accuracy``."""
    def one(seed: int, lr: float, acc: float, created: str = "2026-12-01T10:00:00Z") -> dict:
        rising = [[s, min(acc, 0.25 + s / 2000)] for s in range(100, 2001, 100)]
        extra = {"curve": rising, "best_step": 1800} if curves else {}
        return train(method, seed=seed, lr=lr, test=acc, val=acc, created=created, steps=2000, stopped=False,
                     **extra, **kw)
    return [one(0, 1e-3, accuracy * 0.8), one(0, 3e-3, accuracy), one(0, 1e-2, accuracy * 0.5),
            one(1, 3e-3, accuracy * 0.99), one(2, 3e-3, min(accuracy * 1.01, 1.0))]


def cpu_board() -> list[dict]:
    records = []
    for i, method in enumerate(CPU_METHODS):
        time = "N^2" if method == "softmax" else "N"
        for pairs in (4, 8, 16):
            records += cpu_cell(method, 0.99 - 0.05 * i * pairs / 16, pairs=pairs, time=time, curves=i == 0,
                                state=4096 * (i + 1), tokens=1000.0 * (i + 1), memory=2**20 * (i + 1))
        records += cpu_cell(method, 0.45, task="listops_short", pairs=None, baseline=0.17, time=time)
        for k, sizes in enumerate(CPU_STATES[method]):
            options = {key: v for key, v in sizes.items() if key != "d_model"}
            records += cpu_cell(method, 0.9 - 0.2 * (k + 1), pairs=16, time=time, options=options,
                                d_model=sizes.get("d_model", 64), state=1024 * (k + 1) * (i + 1))
    return records


def test_data_a_reader_can_reuse(tmp_path):
    """records.csv carries the columns that define a cell, each once; the board's cells download as
    CSV and JSON; a run's title names its variant; its command sets the CPU threads."""
    records = seeds_of("sliding_window", options={"window": 16}, pairs=8) + seeds_of(
        "sliding_window", options={"window": 16}) + [train("sliding_window", options={"window": 8})]
    records[-1]["config"]["cpu_threads"] = 1
    build(tmp_path, records)
    out = tmp_path / "out"
    header, *lines = list(csv.reader((out / "records.csv").read_text().splitlines()))
    assert len(header) == len(set(header)) and header.count("impl") == 1
    assert {"model", "d_model", "lr", "seq_len", "num_kv_pairs", "method.window"} <= set(header)
    window = {line[header.index("method.window")] for line in lines}
    assert window == {"16", "8"}
    cells = json.loads((out / "cells.json").read_text())
    assert sorted((c["variant"], c["num_kv_pairs"], c["n"]) for c in cells) == [
        ("", 4, 3), ("", 8, 3), ("window=8", 4, 1)]
    assert (out / "cells.csv").read_text().splitlines()[0].startswith("method,variant,budget,device,dtype,host,task")
    variant = next(r for r in load_runs(tmp_path / "results")[0] if r.record["config"].get("cpu_threads") == 1)
    page = (out / variant.page).read_text()
    assert "<h1>sliding_window (window=8) on mqar (train, ok)</h1>" in page
    assert "cpu_threads=1" in page and "attention-suite repository" in page


def test_one_cpu_is_one_host_whether_or_not_its_record_names_its_hardware(tmp_path):
    """A CPU record that carries env.hardware (its model without the thread count) and one that
    does not (its device name with it) are one hardware class when they ran on the same CPU with
    the same threads, and two when the threads differ."""
    records = [train("softmax", seed=s) for s in range(3)]
    for record in records:
        record["env"]["device_name"] = "AMD EPYC (1 threads)"
    records[0]["env"]["hardware"] = {"device_model": "AMD EPYC"}
    other = train("linear")
    other["env"] |= {"device_name": "AMD EPYC (2 threads)", "hardware": {"device_model": "AMD EPYC"}}
    for record in [*records, other]:
        write_record(record, tmp_path / "results")
    runs, problems = load_runs(tmp_path / "results")
    assert problems == [] and len(runs) == 4
    assert sorted({r.hardware for r in runs}) == ["AMD EPYC (1 threads)", "AMD EPYC (2 threads)"]
    [row] = [row for row in board_rows(runs) if row.method == "softmax"]
    assert len(next(iter(row.cells.values())).values()) == 3  # one row, one cell of three seeds
    assert [hardware for hardware, _ in by_host(board_rows(runs))] == ["AMD EPYC (1 threads)",
                                                                       "AMD EPYC (2 threads)"]


def test_a_cpu_runs_host_class_counts_the_threads_it_ran_not_its_launchers(tmp_path):
    """Records before a3321d7 name the launching process's threads in env.device_name; the run's own
    (metrics.cpu_threads, else config.cpu_threads) set its hardware class."""
    named = train("softmax")
    named["env"]["device_name"] = "AMD EPYC (2 threads)"
    named["config"]["cpu_threads"] = 1
    measured = train("linear")
    measured["env"]["device_name"] = "AMD EPYC (2 threads)"
    measured["metrics"]["cpu_threads"] = 1
    default = train("taylor")
    default["env"]["device_name"] = "AMD EPYC (2 threads)"  # cpu_threads null: the default, as named
    for record in (named, measured, default):
        write_record(record, tmp_path / "results")
    runs, _ = load_runs(tmp_path / "results")
    assert {r.method: r.hardware for r in runs} == {"softmax": "AMD EPYC (1 threads)", "linear": "AMD EPYC (1 threads)",
                                                    "taylor": "AMD EPYC (2 threads)"}


def test_speed_and_memory_come_from_one_host_named_in_the_caption(tmp_path):
    """Rows of two hosts: every cost figure and table reads one host's rows and names it; cells.csv
    and records.csv carry the host, the early stop, the steps to the target and the accuracy at each
    evaluated length."""
    lengths = [{"seq_len": 128, "num_kv_pairs": 8, "accuracy": 0.8, "baseline_accuracy": 0.125},
               {"seq_len": 256, "num_kv_pairs": 16, "accuracy": 0.6, "baseline_accuracy": 0.0625}]
    records = [train("softmax", seed=s, test=0.995, val=0.992, steps=800 + 100 * s, stopped=True, tokens=41e3)
               for s in range(3)]
    for record in records:
        record["metrics"]["length_accuracy"] = lengths
    records += [train("linear", seed=s, test=0.9, tokens=150e3) for s in range(3)]
    for record in records[3:]:
        record["env"]["device_name"] = "other cpu"
    page = build(tmp_path, records)
    assert re.findall(r'<table class="cost[^>]*><caption>([^<]*)</caption>', page) == [
        "Recall: measured on other cpu", "Recall: measured on test cpu"]
    rows = board_rows(load_runs(tmp_path / "results")[0])
    columns = board_columns(rows)
    cost = [f for f in board_figures(rows, columns) + pareto_figures(rows, columns)
            if any(k in f.title for k in ("throughput", "tok/s", "peak memory"))]
    assert len(cost) == 6  # per host: the cost figure, the Pareto speed and memory figures
    for figure in cost:
        host = "test cpu" if "on test cpu" in figure.title else "other cpu"
        assert f"on {host}" in figure.title and f"on {host}" in figure.caption
        assert figure.series() == (["softmax"] if host == "test cpu" else ["linear"])
    out = tmp_path / "out"
    cells = {c["method"]: c for c in csv.DictReader((out / "cells.csv").read_text().splitlines())}
    assert (cells["softmax"]["host"], cells["softmax"]["solved"], cells["softmax"]["stopped_early"]) == (
        "test cpu", "True", "3/3")
    assert float(cells["softmax"]["steps_to_target"]) == 900 and float(cells["softmax"]["steps_to_target_std"]) == 100
    assert [float(cells["softmax"][f"accuracy_at_{n}"]) for n in (128, 256)] == pytest.approx([0.8, 0.6])
    assert (cells["linear"]["host"], cells["linear"]["solved"], cells["linear"]["steps_to_target"]) == (
        "other cpu", "False", "")  # its fixture runs stop early without reaching the 99% target
    runs = list(csv.DictReader((out / "records.csv").read_text().splitlines()))
    softmax = {(r["hardware"], r["stopped_early"], r["steps_to_target"], r["accuracy_at_256"]) for r in runs
               if r["method"] == "softmax"}
    assert softmax == {("test cpu", "True", str(n), "0.6") for n in (800, 900, 1000)}


def seeds_of(method: str, **kw) -> list[dict]:
    return [train(method, seed=s, test=0.9 + 0.01 * s, **kw) for s in range(3)]


def test_a_state_axis_with_more_runs_than_the_default_state_is_still_the_variant(tmp_path):
    """While a board is partial, a method's smaller state (a value of its state axis in a board file,
    here Taylor's feature_dim 8) may hold more runs than its default state: the default is still the
    row without a variant label."""
    records = [train("taylor", seed=s, test=0.9, options={"feature_dim": 16}) for s in range(2)]
    records += [train("taylor", seed=s, test=0.5, options={"feature_dim": 8}, state=512) for s in range(3)]
    page = build(tmp_path, records)
    usual, variant = row_html(page, "taylor"), row_html(page, r"taylor \(feature_dim=8\)")
    assert "90.0%" in usual and "n=2" in usual
    assert "50.0%" in variant and "n=3" in variant


def test_a_baseline_the_records_agree_on_is_per_task_data_the_budgets_split_sizes_included(tmp_path):
    """Where no config or table defines a task's baseline (a majority class read from its data), the
    verified records of the same data agree on it; a budget with other split sizes reads other data,
    so its records are not held to another budget's baseline."""
    agreed = [train("softmax", "text", seed=s, pairs=None, baseline=0.5) for s in range(3)]
    other_splits = train("linear", "text", pairs=None, baseline=0.52)
    other_splits["config"]["budget"]["num_train"] = 5000
    other_splits["config_hash"] = config_hash(other_splits["config"], "cpu")
    forged = train("taylor", "text", pairs=None, baseline=0.9)
    for record in (*agreed, other_splits, forged):
        write_record(record, tmp_path / "results")
    runs, problems = load_runs(tmp_path / "results")
    assert sorted(r.method for r in runs) == ["linear", "softmax", "softmax", "softmax"]
    [problem] = problems
    assert "'metrics.baseline_accuracy' is 0.9, not its task's 0.5 (from the verified records' of the same task " \
           "data)" in problem


def test_a_long_boards_point_is_not_joined_to_the_pairs_line_and_its_runs_time_nothing(tmp_path, monkeypatch):
    # The long board's records (under results/long/) trained under another budget, and its board
    # declares their timings none (train_timings: false): they were taken beside other jobs.
    from suite import board

    monkeypatch.setattr(board, "untimed_folders", lambda: frozenset({"long"}))
    for record in [train(m, seq_len=256, pairs=64, max_steps=4000, seed=s, test=0.8 - 0.1 * i, tokens=5000.0,
                         memory=2**32) for i, m in enumerate(("softmax", "linear")) for s in range(3)]:
        write_record(record, tmp_path / "results" / "long")
    page = build(tmp_path, mqar_board(["softmax", "linear"]))
    rows = board_rows(load_runs(tmp_path / "results")[0])
    figures = board_figures(rows, board_columns(rows))
    (pairs,) = [f for f in figures if "vs key-value pairs" in f.title]
    assert {r["x"] for r in rows_of(pairs)} == {4, 8, 16}  # 64 pairs, trained for 4,000 steps, is apart
    assert "not joined to 256·64, trained under another budget, vocabulary or training mix" in pairs.caption
    throughput = [f for f in figures if "vs train throughput" in f.title and f.title.startswith("MQAR")]
    assert throughput and all("256·64" not in r["tip"] for f in throughput for r in rows_of(f))
    cost = row_html(page, "softmax", "cost")
    assert "speed and memory: its idle-host cost record" in cost and "5,000 tok/s" not in cost
    assert "1,000 tok/s" in cost and "4.0 GiB" not in cost  # the CPU board's cells keep their runs' timings
    cells = list(csv.DictReader((tmp_path / "out" / "cells.csv").open()))
    long = [c for c in cells if c["seq_len"] == "256"]
    assert len(long) == 2 and all(c["train_tokens_per_s"] == "" and c["peak_memory_bytes"] == "" for c in long)
    assert all(c["train_tokens_per_s"] == "1000.0" for c in cells if c["seq_len"] == "64")
