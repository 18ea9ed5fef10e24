"""The board's first screen and what a cell owes its reader: the recall figures and a line per
point (best method, best sub-quadratic at no more state, the state budgets of the state-bound
point, kernel crossovers), dirty-tree and mixed-commit cells marked, plateaus named with their
step, every cell's validation curves, one table per task family, and memory axes that hold the
run's own memory only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from suite.record_store import write_record
from suite.site.board import MAX_COLUMNS, board_columns, board_rows, board_tables
from suite.site.charts import validate
from suite.site.figures import pareto_figures
from suite.site.lead import kernel_table, lead
from suite.site.runs import load_runs
from tests.test_site import kernel_record
from tests.test_site_board import build, row_html, section, train


def rows_from(tmp_path: Path, records: list[dict]):
    for record in records:
        write_record(record, tmp_path / "results")
    runs = load_runs(tmp_path / "results")[0]
    rows = board_rows(runs)
    return runs, rows, board_columns(rows)


def seeds(method: str, tests=(0.9, 0.91, 0.92), **kw) -> list[dict]:
    return [train(method, seed=s, test=t, **kw) for s, t in enumerate(tests)]


def test_dirty_and_mixed_commit_cells_are_marked(tmp_path):
    records = seeds("clean") + seeds("dirty") + seeds("mixed")
    records[4]["env"]["git_dirty"] = True  # dirty, seed 1
    records[8]["env"]["git_commit"] = "beefcafe1234"  # mixed, seed 2
    page = build(tmp_path, records)
    clean, dirty, mixed = (row_html(page, m) for m in ("clean", "dirty", "mixed"))
    assert "dirty tree" not in clean and "commits" not in clean and "provenance" not in clean
    assert 'class="dirty"' in dirty and '<span class="dirty-tag">dirty tree</span>' in dirty
    assert "Uncommitted changes in the checkout: seed 1 lr 3e-3." in dirty
    assert '<span class="mixed-tag">2 commits</span>' in mixed and 'class="mixed"' in mixed
    assert "Commits: c0ffee0: seed 0 lr 3e-3, seed 1 lr 3e-3; beefcafe1234: seed 2 lr 3e-3." in mixed
    assert "dirty tree" in section(page, "How to read the board")  # the rule is stated


def test_a_cell_the_budget_stopped_on_its_plateau_says_so_with_the_step(tmp_path):
    flat = [[s, 0.25] for s in range(100, 2001, 100)]  # 1 / 4 pairs: on the plateau, every seed
    records = seeds("stuck", (0.25, 0.251, 0.249), steps=2000, stopped=False, curve=flat)
    solved = [[s, 0.25] for s in range(100, 501, 100)] + [[600, 0.995]]
    records += seeds("target", (0.99, 0.991, 0.989), steps=600, stopped=True, curve=solved)  # its target stopped it
    records += seeds("learnt", steps=2000, stopped=False, curve=[[s, 0.9] for s in range(100, 2001, 100)])
    # (An ok run that neither stopped at its target nor ran its budget cannot be written: validate and
    # the site refuse one, tests/test_hostile.py.)
    _, rows, _ = rows_from(tmp_path / "a", records)
    marks = {r.method: next(iter(r.cells.values())).curve_mark() for r in rows}
    assert marks == {"stuck": "on the plateau at step 2,000", "target": None, "learnt": None}
    page = build(tmp_path / "b", records)
    assert "on the plateau at step 2,000" in row_html(page, "stuck")
    assert "on the plateau" not in row_html(page, "target")

def curve(rise_at: int, top: float, steps: int = 2000) -> list[list[float]]:
    return [[s, 0.25 if s < rise_at else top] for s in range(100, steps + 1, 100)]


def test_every_cell_links_its_validation_curves_with_the_sweep_and_best_steps(tmp_path):
    records = [train("softmax", lr=1e-3, val=0.4, test=0.4, curve=curve(1500, 0.4), best_step=1900),
               train("softmax", lr=3e-3, val=0.99, test=0.98, curve=curve(300, 0.99), best_step=400),
               train("softmax", lr=1e-2, val=0.2, test=0.2, curve=curve(9999, 0.2), best_step=100)]
    records += [train("softmax", seed=s, test=0.97, curve=curve(300 + 100 * s, 0.98), best_step=b)
                for s, b in ((1, 500), (2, 700))]
    records += seeds("linear")  # records before val_curve: a page that says so
    page = build(tmp_path, records)
    href = "curves/mqar_64x4_hybrid.html#cell-softmax___cpu___cpu___float32"
    cell = row_html(page, "softmax")
    assert f'<a class="curve" href="{href}"' in cell
    assert "steps to the best validation accuracy: seed 0: 400, seed 1: 500, seed 2: 700" in cell
    curves = (tmp_path / "out" / href.split("#")[0]).read_text()
    softmax = re.search(r'<section class="curve-cell" id="cell-softmax.*?</section>', curves, re.S).group(0)
    spec = json.loads(re.search(r'<script type="application/json" id="spec-[^"]+">(.*?)</script>', softmax,
                                re.S).group(1))
    validate(spec)
    series = {r["series"] for r in spec["data"]["values"]}
    assert series == {"seed 0 · lr 3e-3", "seed 1 · lr 3e-3", "seed 2 · lr 3e-3", "seed 0 · lr 1e-3 (sweep)",
                      "seed 0 · lr 1e-2 (sweep)"}
    level = next(layer for layer in spec["layer"] if layer.get("data", {}).get("values", [{}])[0].get("label", "")
                 .startswith("baseline"))
    assert level["data"]["values"][0]["y"] == 0.25  # 1 / pairs
    assert "<td>1,900</td>" in softmax and "<td>400</td>" in softmax  # best steps, the sweep's included
    assert "records predate <code>metrics.val_curve</code>" in curves.split('id="cell-linear')[1]
    assert (tmp_path / "out" / "curves").is_dir() and "../assets/board.css" in curves  # links from its folder


def state_board() -> list[dict]:
    """A state-bound point (64, 16) where each method runs at several states, and a default point."""
    records = []
    for method, time, runs in (
            ("softmax", "N^2", [(64, 32768, 0.99), (16, 8192, 0.95)]),
            ("linear", "N", [(64, 16640, 0.60), (16, 1088, 0.30)]),
            ("bigstate", "N", [(64, 65536, 0.95)])):  # more accurate than linear, with more state than softmax
        for d_model, state, acc in runs:
            records += seeds(method, (acc - 0.01, acc, acc + 0.01), pairs=16, state=state, d_model=d_model,
                             time=time)
        records += seeds(method, (0.9, 0.91, 0.92), time=time, state=runs[0][1])  # (64, 4), default state
    return records + [train("lonely", pairs=16, test=0.999, time="N", state=512)]  # one seed: not ranked


def test_first_screen_names_the_best_and_the_best_sub_quadratic_at_no_more_state(tmp_path):
    runs, rows, columns = rows_from(tmp_path / "a", state_board())
    first = lead(rows, columns, runs)
    assert first.state_point.label == "mqar 64·16 pairs (hybrid)"
    line = next(ln for ln in first.lines if ln.column == first.state_point)
    assert [(e.row.label, e.state) for e in line.best.leaders] == [("softmax", 32768)]
    # Not bigstate: 64 KiB is more than softmax's 32 KiB, beyond the equal-state band.
    assert [(e.row.label, e.state) for e in line.best_sub.leaders] == [("linear", 16640)]
    assert [e.row.label for e in line.best.behind] == ["softmax (d_model=16)", "bigstate", "linear",
                                                       "linear (d_model=16)"]
    assert [f.title.split(",")[0] for f in first.figures] == [
        "MQAR: test acc vs key-value pairs on the hybrid model", "mqar 64·16 pairs (hybrid): test acc vs state size"]
    assert not first.assumed  # every record names its time in length
    page = build(tmp_path / "b", state_board())
    top = page.split('<table class="board', 1)[0]
    assert top.index('<p class="summary">') < top.index('<figure class="chart-figure"') < top.index(
        '<ul class="headlines">')
    assert ("<b>mqar 64·16 pairs (hybrid)</b>: best: <b>softmax</b> 99.0% ± 1.0 (n=3, 32.0 KiB state); best "
            "sub-quadratic at no more state: <b>linear</b> 60.0% ± 1.0 (n=3, 16.2 KiB state).") in top
    headlines = re.search(r'<ul class="headlines">.*?</ul>', top, re.S).group(0)
    assert "lonely" not in headlines


def test_a_cell_tied_with_exact_attention_on_more_state_is_not_the_best_sub_quadratic(tmp_path):
    # bigstate ties with softmax on twice its state: the best sub-quadratic at no more state than
    # exact attention is linear, not the cell that let itself in by tying.
    records = seeds("softmax", (0.98, 0.99, 1.0), pairs=16, state=32768, time="N^2")
    records += seeds("bigstate", (0.975, 0.985, 0.995), pairs=16, state=65536, time="N")
    records += seeds("linear", (0.59, 0.60, 0.61), pairs=16, state=16640, time="N")
    _, rows, columns = rows_from(tmp_path, records)
    line = next(ln for ln in lead(rows, columns, []).lines if ln.column == columns[0])
    assert sorted(e.row.label for e in line.best.leaders) == ["bigstate", "softmax"]
    assert [e.row.label for e in line.best_sub.leaders] == ["linear"]


def test_kernel_crossovers_against_exact_attention_say_which_records(tmp_path):
    softmax = kernel_record("softmax", {"naive": lambda n: 1e-9 * n * n})
    linear = kernel_record("linear", {"chunk": lambda n: 1e-6 * n, "sdpa": lambda n: 0.5e-9 * n * n})
    linear["env"] |= {"git_commit": "abcdef0123", "git_dirty": True}
    for record in (softmax, linear):
        write_record(record, tmp_path)
    table = kernel_table(load_runs(tmp_path)[0])
    # SDPA (0.5e-9 N^2, inside linear's record) is exact attention's best; linear (1e-6 N) beats it from 2000.
    assert table.methods == ["linear"] and table.against == "softmax / sdpa"
    assert table.rows == [("fwd+bwd, Test GPU", {"linear": "from N≈2000"}),
                          ("fwd, Test GPU", {"linear": "from N≈2000"})]
    assert table.provenance == ("From 2 kernel record(s), commit(s) abcdef0, not recorded; 1 of them ran on a "
                                "checkout with uncommitted changes (dirty tree).")
    assert kernel_table([]) is None


def test_memory_axes_hold_the_runs_own_memory_and_name_what_they_leave_off(tmp_path):
    records = seeds("softmax", memory=3 * 2**20) + seeds("linear", memory=900 * 2**20, memory_source="process_peak_rss")
    _, rows, columns = rows_from(tmp_path / "a", records)
    (memory,) = [f for f in pareto_figures(rows, columns) if "peak memory" in f.title]
    assert [r["series"] for r in memory.spec["data"]["values"]] == ["softmax"]
    assert "1 cell(s) left off: their records measured the whole process's peak memory (process_peak_rss)" in (
        memory.caption)
    cost = build(tmp_path / "b", records)
    assert "3.0 MiB peak above the built run" in row_html(cost, "softmax", table="cost")
    assert 'class="config old-memory"' in row_html(cost, "linear", table="cost") and "old figure" in cost


def test_one_table_per_task_family_with_methods_in_the_canonical_order(tmp_path):
    records = []
    for method in ("zeta", "linear", "softmax"):
        records += seeds(method) + seeds(method, pairs=8) + [train(method, "listops_short", pairs=None)]
    records += seeds("sliding_window", options={"window": 16})  # the usual window: the most runs
    records += [train("sliding_window", options={"window": 8}), train("sliding_window", options={"window": 32})]
    records += [train("wide", seq_len=64 * k, pairs=4) for k in range(1, MAX_COLUMNS + 2)]  # 7 recall points
    _, rows, columns = rows_from(tmp_path, records)
    tables = board_tables(rows, columns)
    # ListOps short under its own heading: LRA's generator on short sequences is not an LRA number.
    assert [(t.title, len(t.columns)) for t in tables] == [
        ("Recall", MAX_COLUMNS), ("Recall", 2),
        ("ListOps short: LRA's ListOps generator on short sequences, not an LRA number", 1)]
    # The canonical order, then by name; a method's variants after it, numbers compared as numbers.
    assert [r.label for r in tables[0].rows] == ["softmax", "linear", "sliding_window", "sliding_window (window=8)",
                                                 "sliding_window (window=32)", "wide", "zeta"]
    assert [r.method for r in tables[2].rows] == ["softmax", "linear", "zeta"]  # rows with a cell there only


@pytest.mark.parametrize("dirty", [False, True])
def test_a_best_cell_from_a_dirty_tree_is_marked_on_the_first_screen(tmp_path, dirty):
    records = seeds("softmax", dirty=dirty) + seeds("linear", (0.5, 0.51, 0.52))
    top = build(tmp_path, records).split('<table class="board', 1)[0]
    marked = '<b>softmax</b> 91.0% ± 1.0 (n=3, 32.0 KiB state) <span class="dirty-tag">dirty tree</span>'
    assert (marked in top) == dirty


def test_the_length_gap_counts_the_longer_lengths_a_recall_run_was_tested_at(tmp_path):
    """LENGTH_GAP: a run trained at 64 tokens and also scored at 256 (length_accuracy) measured
    accuracy up to 256 tokens; the first screen must not say 'at most 64'."""
    from suite.site.lead import length_gap_sentence

    records = seeds("softmax")
    for record in records:
        record["metrics"]["length_accuracy"] = [{"seq_len": 128, "num_kv_pairs": 8, "accuracy": 0.5},
                                                {"seq_len": 256, "num_kv_pairs": 16, "accuracy": 0.3}]
    _, rows, _ = rows_from(tmp_path / "a", records)
    kernel = kernel_table([run for run in load_runs(_kernel_records(tmp_path / "k"))[0]])
    said = length_gap_sentence(rows, kernel).text
    assert said.startswith("Accuracy was measured on sequences of up to 256 tokens"), said
    _, short_rows, _ = rows_from(tmp_path / "b", seeds("softmax"))
    assert length_gap_sentence(short_rows, kernel).text.startswith(
        "Accuracy was measured on sequences of at most 64 tokens")


def _kernel_records(folder: Path) -> Path:
    for record in (kernel_record("softmax", {"naive": lambda n: 1e-9 * n * n}),
                   kernel_record("linear", {"chunk": lambda n: 1e-6 * n})):
        write_record(record, folder)
    return folder
