"""The site's pages: Jinja2 templates (suite/site/templates/) with autoescape, so every text from a record
is escaped where it is printed; what the templates show is prepared here. Record data reaches
JavaScript only as each figure's spec, serialised by Jinja's ``tojson`` (HTML-safe) into a
``<script type="application/json">`` block."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from suite import modes
from suite.metrics import Metric, format_value
from suite.modes import declared
from suite.site import known, reference, stats
from suite.site.board import (
    ACCURACY,
    CLEAR_RULE,
    HARDWARE_RULE,
    LRA_RULE,
    LRA_TASKS,
    NO_STATE,
    PLATEAU_RULE,
    PROVENANCE_RULE,
    TEST_BUDGETS,
    TIER_RULE,
    UNTIMED,
    VERDICTS,
    Cell,
    Column,
    ReferenceRow,
    Row,
    board_tables,
    by_host,
    column_baselines,
    format_lr,
)
from suite.site.citation import citation, repository_url
from suite.site.curves import CurveCell, cell_href
from suite.site.figures import FIDELITY_FEATURES, FidelityHeadline, Figure
from suite.site.lead import ASSUMED_TIME, RULE_NOTE, RULES, Lead
from suite.site.render import BUNDLE
from suite.site.rules import STATE_BAND, optimisation_failed
from suite.site.runs import Run, declared_metrics, install_lines, number, outside_method, reproduce_command

SITE_DIR = Path(__file__).resolve().parent  # templates/, assets/, data/: package data of suite.site
FILTERS = ("tier", "hardware", "device", "budget", "dtype")


@dataclass(frozen=True)
class Placed:
    """A figure as a page shows it: its spec inline, its static SVG (a file of the build) in its place."""

    figure: Figure
    slug: str  # its element id and file name
    svg_path: str  # relative to the site root
    width: int
    height: int

    def __getattr__(self, name: str) -> Any:  # title, spec, caption: the figure's
        return getattr(self.figure, name)


def direction(metric: Metric) -> str:
    return {"higher": " ↑", "lower": " ↓"}.get(metric.better or "", "")


def percent(value: float | None) -> str:
    return format_value(ACCURACY, value)


def column_facts(column: Column) -> str:
    facts = [f"length {column.seq_len}" if column.seq_len else "",
             f"{column.num_kv_pairs} key-value pairs" if column.recall else "",
             f"model {column.model}" if column.model else ""]
    return ", ".join(f for f in facts if f)


def verdict_title(cell: Cell) -> str:
    """Why a cell is (or is not) clearly above its baseline, in numbers."""
    verdict, baseline = cell.verdict(), cell.baseline()
    if verdict == "no baseline":
        return "No baseline accuracy recorded: the cell cannot be compared with one."
    if verdict == "untested":
        return (f"One seed: no spread, so it is not tested against the baseline ({percent(baseline)}); "
                "the comparison test needs n ≥ 2 seeds.")
    t, df = stats.welch(cell.estimate(), stats.Estimate((baseline,)))
    what = "Clearly above baseline" if verdict == "above" else "Not clearly above baseline"
    relation = "<" if verdict == "above" else "≥"
    size = cell.test_size()
    examples = f"{size:,} test examples" if size else "no test size recorded"
    return (f"{what} {percent(baseline)}: t = {t:.2f}, df = {df:.1f}, p {relation} {stats.LEVEL} "
            f"(Welch over {len(cell.values())} seeds plus the sampling error of {examples}).")


def column_sublabel(column: Column) -> str:
    """A board point under its task's name: '64·4 pairs · hybrid'."""
    parts = [f"{column.seq_len}·{column.num_kv_pairs} pairs" if column.recall else "", column.model or ""]
    return " · ".join(p for p in parts if p)


def provenance_title(cell: Cell) -> str:
    """Which runs of a cell came from which commit, and which from a dirty checkout."""
    commits = "; ".join(f"{commit[:12]}: " + ", ".join(run_name(r) for r in runs)
                        for commit, runs in cell.commits().items())
    dirty = ", ".join(run_name(r) for r in cell.dirty())
    return f"Commits: {commits}." + (f" Uncommitted changes in the checkout: {dirty}." if dirty else "")


def tier_title(run: Run) -> str:
    """A run's provenance in words: who ran it, when it was added, from which suite commit (or release), on
    what machine."""
    hardware = run.model.env.hardware
    software = ", ".join(f"{name} {getattr(hardware, name)}" for name in ("torch", "triton", "fla", "cuda", "driver")
                         if hardware is not None and getattr(hardware, name))
    commit = suite_code(run)
    if run.tier == "verified":
        ran_at = (run.model.env.git_commit or "not recorded")[:12]
        pin = "" if run.pinned is None else (", the board's pinned commit" if run.pinned.startswith(ran_at)
                                             else f", not the board's pinned commit {run.pinned[:12]}")
        return (f"verified: run by the project at suite {commit}{pin}, added {run.added}. "
                f"Machine: {run.hardware}")
    by = f" by {run.submission['submitter']}" if run.submission.get("submitter") else ""
    return (f"submitted{by}, added {run.added}, suite {commit}; "
            f"not rerun by the project. Machine: {run.hardware}" + (f"; {software}" if software else ""))


def suite_code(run: Run) -> str:
    """The suite's code a run ran, in words: its commit; else, installed from a wheel or an index
    release, its version (which validate takes in place of a commit); else neither was recorded."""
    env = run.model.env
    if env.git_commit:
        return f"commit {env.git_commit[:12]}"
    if env.suite_version:
        return f"release {env.suite_version} (installed as a package: no commit)"
    return "commit not recorded"


def run_name(run: Run) -> str:
    return f"seed {run.seed}" + ("" if run.lr is None else f" lr {format_lr(run.lr)}")


MEMORY_NAMES = {"rss_high_water_mark_above_built_run": "peak above the built run", "cuda_allocator": "peak (CUDA)",
                "process_peak_rss": "process peak: old figure"}


def memory_text(cell: Cell) -> tuple[str, bool]:
    """The cell's peak memory as the cost table shows it, and whether it is an older figure (the
    whole process's peak, not the run's own)."""
    value, source = cell.memory(own=False)
    if value is None:
        return "", False
    name = MEMORY_NAMES.get(source, f"peak ({source or 'source not recorded'})")
    return f"{format_value(declared('train')['peak_memory_bytes'], value)} {name}", cell.memory()[0] is None


def curve_title(cell: Cell) -> str:
    """A cell's curve link's hover text: the steps to each run's best validation accuracy."""
    best = ", ".join(f"seed {seed}: {step:,}" for seed, step in cell.best_steps())
    return "Validation accuracy against step of every run of the cell" + (
        f"; steps to the best validation accuracy: {best}" if best else "")


def sweep_result(run: Run) -> str:
    """What a learning rate of a sweep reached: its validation accuracy, or its status."""
    val = run.metric("val_accuracy")
    return percent(val) if run.status == "ok" and val is not None else run.status


def json_text(value: Any, indent: int | None = None) -> str:
    """JSON to show as text (escaped where printed, unlike ``tojson``'s script-safe form)."""
    return json.dumps(value, indent=indent, default=str)


def is_table(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


@cache
def environment(site_dir: Path = SITE_DIR) -> jinja2.Environment:
    """The templates of ``site_dir``: autoescaped, and an error for any undefined name."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(site_dir / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["tojson_text"] = json_text
    env.globals.update(
        percent=percent, format_lr=format_lr, verdict_title=verdict_title, sweep_result=sweep_result,
        column_facts=column_facts, direction=direction, fmt=format_value, verdicts=VERDICTS,
        column_sublabel=column_sublabel, provenance_title=provenance_title, memory_text=memory_text,
        tier_title=tier_title,
        curve_title=curve_title, cell_href=cell_href, optimisation_failed=optimisation_failed, by_host=by_host,
        is_number=lambda v: number(v) is not None, is_table=is_table,
        table_columns=lambda items: list(dict.fromkeys(k for item in items for k in item)),
        bundle=BUNDLE, charts=False, root="", citation=citation(), lead_rules=RULES,
        repository=repository_url(),
    )
    return env


def render(env: jinja2.Environment, template: str, **context: Any) -> str:
    return env.get_template(template).render(**context)


def board_cell(cell: Cell | None, env: jinja2.Environment | None = None, href: str = "") -> str:
    """One cell of the board: mean ± spread over seeds, n, the chosen learning rate and the sweep
    behind it, a link to its validation curves (``href``); greyed and marked unless clearly above
    the baseline, marked when its runs ran on a dirty checkout or at several commits."""
    return (env or environment()).get_template("macros.html").module.board_cell(cell, href)


# -- board ------------------------------------------------------------------------------------------

def distinct(values: Iterable[Any], show=str) -> str:
    """The distinct values, as text, joined by ' / ' (one, when all runs agree); '-' if none."""
    shown = list(dict.fromkeys(show(v) for v in values if v is not None))
    return " / ".join(shown) or "-"


def model_text(model) -> str:
    """A model config (suite/schema.py ModelConfig) in words."""
    parts = [str(model.name or "unnamed")]
    if model.d_model is not None:
        parts.append(f"d_model {model.d_model}")
    for value, noun in ((model.num_layers, "layer"), (model.num_heads, "head")):
        if value is not None:
            parts.append(f"{value} {noun}{'' if value == 1 else 's'}")
    if model.mixers is not None:
        parts.append("mixers " + "+".join(model.mixers))
    if model.position is not None:
        parts.append(f"positions {model.position}")
    if model.mlp is not None:
        parts.append("MLP" if model.mlp else "no MLP")
    return ", ".join(parts)


def protocol_text(run: Run) -> str:
    """The learning-rate protocol of a run's config: the rates tried and the seeds."""
    config = run.model.config
    protocol, lr = config.protocol, config.budget.lr
    seeds = ", ".join(map(str, (protocol.seeds if protocol else None) or []))
    if protocol is not None and protocol.name == "lr_sweep":
        rates = ", ".join(format_lr(r) for r in protocol.lrs or [])
        return f"lr sweep: {rates} at the first seed, best on validation; seeds {seeds or '-'}"
    rate = f"lr {format_lr(lr)}" if lr is not None else "lr -"
    name = (protocol.name if protocol else None) or "not recorded"
    return f"{name}: {rate}" + (f"; seeds {seeds}" if seeds else "")


def budget_rows(rows: list[Row], columns: list[Column]) -> list[list[str]]:
    """Per (budget, board point) on the board: what a run of it does."""
    found: dict[tuple[str, Column], list[Run]] = {}
    for row in rows:
        for column in columns:
            cell = row.cells.get(column)
            if cell is not None:
                found.setdefault((row.budget, column), []).extend(cell.runs + cell.sweep)
    table = []
    for (budget, column), runs in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        budgets = [r.model.config.budget for r in runs if r.model.config.budget is not None]
        examples = distinct(((b.num_train, b.num_val, b.num_test) for b in budgets),
                            lambda t: " / ".join("-" if v is None else f"{v:,}" for v in t))
        target = distinct((b.target_val_accuracy if b.target_val_accuracy is not None else "none" for b in budgets),
                          lambda v: percent(v) if number(v) is not None else "none (all steps)")
        models = distinct((r.model.config.model for r in runs if r.model.config.model is not None), model_text)
        protocols = distinct((r for r in runs if r.model.config.budget is not None), protocol_text)
        table.append([budget, column.label, distinct(b.max_steps for b in budgets),
                      distinct(b.batch_size for b in budgets), examples, target, models, protocols])
    return table


def filters(runs: Iterable) -> dict[str, list[str]]:
    """The values of each filter among ``runs`` (board rows or runs)."""
    runs = list(runs)
    return {name: [str(getattr(r, name)) for r in runs] for name in FILTERS}


def board_page(env: jinja2.Environment, rows: list[Row], columns: list[Column], references: list[ReferenceRow],
               problems: list[str], *, lead: Lead | None = None, lead_figures: list[Placed] = (),
               figures: list[Placed] = (), fidelity: FidelityHeadline | None = None,
               left_off: list[Mapping] = (), findings: list[Mapping] = (), smoke: list[Run] = (),
               **page: Any) -> str:
    """The leaderboard. First what it finds: the recall figures, a line per point naming its best
    and best sub-quadratic method, the kernel crossovers; then one table per task family (our rows,
    mean ± std over seeds against each column's baseline, the published LRA rows), then the
    methodology, cost, what each budget means, the findings prose, fidelity, tasks left off, and
    the board's other figures; last the smoke runs (a test budget's), in a section of their own."""
    train = declared("train")
    cost = {"speed": train["train_tokens_per_s"], "memory": train["peak_memory_bytes"], "state": train["state_bytes"]}
    return render(env, "board.html", rows=rows, columns=columns, tables=board_tables(rows, columns),
                  references=references, problems=problems, lead=lead, lead_figures=list(lead_figures),
                  figures=list(figures), fidelity=fidelity, left_off=list(left_off),
                  findings=list(findings), smoke=list(smoke), charts=bool(figures) or bool(lead_figures),
                  show_lra=any(c.task in LRA_TASKS for c in columns), baselines=column_baselines(rows),
                  filters=filters(rows), budgets=budget_rows(rows, columns), cost=cost, accuracy=ACCURACY,
                  test_budgets=TEST_BUDGETS, clear_rule=CLEAR_RULE, lra_rule=LRA_RULE, plateau_rule=PLATEAU_RULE,
                  provenance_rule=PROVENANCE_RULE, tier_rule=TIER_RULE, hardware_rule=HARDWARE_RULE,
                  lead_rules=RULES, rule_note=RULE_NOTE, assumed_time=ASSUMED_TIME,
                  state_band=STATE_BAND, exact_method=known.reference_method(), no_state=NO_STATE, untimed_note=UNTIMED,
                  lra_source=reference.SOURCE, fidelity_features=FIDELITY_FEATURES,
                  papers=[(m, known.paper(m)) for m in sorted({r.method for r in rows}, key=known.method_rank)],
                  **page)


def curves_page(env: jinja2.Environment, column: Column, cells: list[tuple[CurveCell, Placed | None]],
                **page: Any) -> str:
    """One board point's validation curves: a figure per cell, with its runs' steps and best steps."""
    return render(env, "curves.html", column=column, cells=cells, charts=any(p for _, p in cells),
                  plateau_rule=PLATEAU_RULE, **page)


# -- plots ------------------------------------------------------------------------------------------

def plots_page(env: jinja2.Environment, figures: list[Placed], runs: list[Run], **page: Any) -> str:
    """One section per mode that has one (suite/modes/), its figures in it."""
    kinds = {r.kind for r in runs}
    sections = []
    for mode in modes.registry().values():
        if mode.section:
            saved = [(run, name, plot_href(run, name)) for run in runs if run.kind == mode.kind for name in run.plots]
            not_applicable = [run for run in runs if run.kind == mode.kind and run.status == "not_applicable"]
            sections.append({"key": mode.kind, "title": mode.section.title, "has_records": mode.kind in kinds,
                             "figures": [f for f in figures if f.section == mode.kind], "saved": saved,
                             "not_applicable": not_applicable})
    return render(env, "plots.html", sections=sections, charts=bool(figures), **page)


def plot_href(run: Run, name: str) -> str:
    """Where a plot beside a record lies in the build (next to the record's copy)."""
    return f"records/{run.source.parent.as_posix()}/{name}"


# -- runs -------------------------------------------------------------------------------------------

def runs_page(env: jinja2.Environment, runs: list[Run], schemas: list[tuple[str, str]], **page: Any) -> str:
    """Every record in one sortable table, with the train metrics as declared; the record schemas."""
    return render(env, "runs.html", runs=runs, filters=filters(runs), train_metrics=list(declared("train").values()),
                  schemas=schemas, **page)


def run_page(env: jinja2.Environment, run: Run, **page: Any) -> str:
    """One run: what, status, metrics, how to reproduce it, the whole config and environment."""
    rec, env_block = run.record, run.model.env
    summary = {"kind": run.kind, "method": run.method, "impl": run.impl, "task": run.task,
               "budget": run.budget, "device": run.device, "dtype": run.dtype, "seed": run.seed,
               "status": run.status, "error": rec["error"], "created": run.created,
               "config_hash": run.config_hash, "record": run.source.as_posix(), "tier": run.tier,
               "hardware": run.hardware, "added": run.added, "git_commit": run.model.env.git_commit}
    if run.tier != "verified":
        summary.update({"submission": run.origin, **{f"submission {k}": v for k, v in run.submission.items()}})
    return render(env, "run.html", run=run, summary=summary, commit=env_block.git_commit,
                  version=env_block.suite_version, dirty=bool(env_block.git_dirty), command=reproduce_command(run),
                  install=install_lines(run),
                  outside=outside_method(run), known=declared_metrics(), **page)
