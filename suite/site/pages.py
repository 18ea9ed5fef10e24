"""HTML of the site's pages, from runs and figures. Every text from a record goes through
:func:`h` (``html.escape``); no record data reaches JavaScript."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from html import escape
from string import Template
from typing import Any
from urllib.parse import quote

from suite import modes
from suite.metrics import Metric, declared, format_value
from suite.site.board import (ACCURACY, CLEAR_RULE, LRA_RULE, LRA_TASKS, TEST_BUDGETS, VERDICTS, Baseline, Cell,
                              Column, ReferenceRow, Row, column_baselines, format_lr)
from suite.site.figures import FIDELITY_FEATURES, Figure, FidelityHeadline
from suite.site.runs import Run, declared_metrics, number, reproduce_command
from suite.site import reference

FILTERS = ("device", "budget", "dtype")


def h(value: Any) -> str:
    """``value`` as escaped HTML text (quotes included, so it is safe in attributes too)."""
    return escape(str(value), quote=True)


def href(path: str) -> str:
    """A relative link to a file of the build, URL-quoted and escaped."""
    return h(quote(path))


def render(template: Template, title: str, body: str, root: str, footer: str) -> str:
    return template.substitute(title=h(title), body=body, root=root, footer=footer)


def direction(metric: Metric) -> str:
    return {"higher": " ↑", "lower": " ↓"}.get(metric.better or "", "")


def header_cell(label: str, kind: str = "num", title: str = "") -> str:
    tip = f' title="{h(title)}"' if title else ""
    return f'<th data-sort="{kind}"{tip} tabindex="0">{h(label)}</th>'


def filter_bar(options: Mapping[str, Iterable[str]]) -> str:
    """Select boxes that show only the rows whose data-<name> matches (board.js)."""
    parts = ['<div class="filters">']
    for name, values in options.items():
        choices = "".join(f'<option value="{h(v)}">{h(v)}</option>' for v in sorted(set(values)))
        parts.append(f'<label>{h(name)} <select data-filter="{h(name)}"><option value="">all</option>'
                     f"{choices}</select></label>")
    parts.append("</div>")
    return "".join(parts)


# -- board ------------------------------------------------------------------------------------------

def percent(value: float | None) -> str:
    return format_value(ACCURACY, value)


def board_cell(cell: Cell | None) -> str:
    """Mean ± spread over seeds, n, the chosen learning rate and the sweep behind it; greyed and
    marked unless clearly above the baseline."""
    if cell is None:
        return '<td class="empty" data-value="">–</td>'
    mean, spread, values = cell.mean(), cell.spread(), cell.values()
    verdict = cell.verdict()
    parts = []
    if mean is not None:
        parts.append(f'<span class="mean">{h(percent(mean))}</span>')
        if spread is not None:
            parts.append(f'<span class="spread"> ± {h(f"{100 * spread:.1f}")}</span>')
        parts.append(f'<span class="n"> n={len(values)}</span>')
        if VERDICTS[verdict]:
            parts.append(f'<div class="mark">{h(VERDICTS[verdict])}</div>')
    for status, count in sorted(cell.failures().items()):
        times = f" ×{count}" if count > 1 else ""
        parts.append(f' <span class="status status-{h(status)}">{h(status)}{h(times)}</span>')
    if cell.lr is not None:
        parts.append(f'<div class="lr">lr {h(format_lr(cell.lr))}</div>')
    if cell.sweep:
        parts.append(sweep_line(cell))
    if cell.others:
        hidden = sum(o.total for o in cell.others)
        parts.append(f'<div class="others" title="runs of other configurations (another cell_key) in this row and '
                     f'column; the cell shows the configuration with the most runs">+{len(cell.others)} other '
                     f"config(s), {hidden} run(s), not shown</div>")
    seeds = " ".join(f'<a href="{href(r.page)}">s{h(r.seed)}</a>' for r in cell.runs)
    value = "" if mean is None else f"{100 * mean:.4f}"
    greyed = mean is not None and verdict != "above"
    css = f' class="greyed verdict-{h(verdict.replace(" ", "-"))}"' if greyed else ""
    tip = f' title="{h(verdict_title(cell))}"' if mean is not None else ""
    return f'<td data-value="{value}"{css}{tip}>{"".join(parts)}<div class="seeds">{seeds}</div></td>'


def verdict_title(cell: Cell) -> str:
    """Why a cell is (or is not) clearly above its baseline, in numbers."""
    verdict, baseline, bound = cell.verdict(), cell.baseline(), cell.lower_bound()
    if verdict == "no baseline":
        return "No baseline accuracy recorded: the cell cannot be compared with one."
    if verdict == "untested":
        return (f"One seed: no spread, so it is not tested against the baseline ({percent(baseline)}); "
                "the rule mean − 2·SE > baseline needs n ≥ 2 seeds.")
    relation = ">" if verdict == "above" else "≤"
    what = "Clearly above baseline" if verdict == "above" else "Not clearly above baseline"
    return f"{what}: mean − 2·SE = {percent(bound)} {relation} baseline {percent(baseline)}."


def sweep_line(cell: Cell) -> str:
    """Every learning rate tried at the first seed with its validation accuracy; the chosen in bold."""
    items = []
    for run in cell.sweep:
        val = number(run.metrics.get("val_accuracy"))
        result = percent(val) if run.status == "ok" and val is not None else run.status
        text = h(f"{format_lr(run.lr)}: {result}")
        items.append(f"<b>{text}</b>" if run.lr == cell.lr else text)
    seed = cell.sweep[0].seed
    return (f'<div class="sweep" title="validation accuracy of each learning rate tried at seed {h(seed)}; the '
            f'best (records.select_lr) is chosen and run at every seed">{", ".join(items)}</div>')


def baseline_row(columns: list[Column], baselines: Mapping[Column, Baseline], show_lra: bool) -> str:
    """The row every column is read against: its baseline accuracy and what the baseline is."""
    cells = []
    for column in columns:
        b = baselines.get(column)
        cells.append('<td class="empty">–</td>' if b is None else
                     f'<td title="{h(b.name)}: the accuracy to beat on {h(column.label)}">{h(percent(b.accuracy))}'
                     f'<span class="config">{h(b.name)}</span></td>')
    if show_lra:
        cells.append('<td class="empty">–</td>')
    return (f'<tr class="baseline"><th scope="row"><span class="method">baseline</span>'
            f'<span class="config">no learning needed</span></th>{"".join(cells)}</tr>')


def row_head(row: Row) -> str:
    variant = (f'<span class="variant" title="differs from the method\'s usual configuration on this model">'
               f'{h(row.variant)}</span>') if row.variant else ""
    return (f'<th scope="row" data-value="{h(row.label)}"><span class="method">{h(row.method)}</span>{variant}'
            f'<span class="config">{h(row.budget)} · {h(row.device)} · {h(row.dtype)}</span></th>')


def row_open(row: Row) -> str:
    return f'<tr data-device="{h(row.device)}" data-budget="{h(row.budget)}" data-dtype="{h(row.dtype)}">'


def column_header(column: Column, what: str) -> str:
    facts = [f"length {column.seq_len}" if column.seq_len else "",
             f"{column.num_kv_pairs} key-value pairs" if column.recall else "",
             f"model {column.model}" if column.model else ""]
    return header_cell(column.label, title=f"{what} on {column.task}: " + ", ".join(f for f in facts if f))


def board_page(rows: list[Row], columns: list[Column], references: list[ReferenceRow], problems: list[str], *,
               figures: list[Figure] = (), fidelity: FidelityHeadline | None = None,
               left_off: list[Mapping] = ()) -> str:
    """The leaderboard: our rows (mean ± std over seeds) against each column's baseline, the published
    LRA rows, then cost, what each budget means, fidelity, tasks left off, and the board's figures."""
    if not rows:
        return ('<p class="empty-board">No train records yet. Run e.g. <code>python -m suite '
                'method=softmax task=listops</code>, then rebuild with <code>python -m suite.site</code>.</p>'
                + left_off_section(left_off) + skipped_note(problems))
    show_lra = any(c.task in LRA_TASKS for c in columns)
    head = [header_cell("method", "text")] + [column_header(c, ACCURACY.label) for c in columns]
    if show_lra:
        head.append(header_cell("LRA avg", title=LRA_RULE))
    body = []
    for row in rows:
        cells = "".join(board_cell(row.cells.get(c)) for c in columns)
        if show_lra:
            avg = row.lra_average()
            cells += (f'<td data-value="{100 * avg:.4f}">{h(percent(avg))}</td>' if avg is not None
                      else '<td class="empty" data-value="" title="needs all five LRA tasks">–</td>')
        body.append(f"{row_open(row)}{row_head(row)}{cells}</tr>")
    ref = reference_body(references, columns, show_lra) if show_lra else ""
    filters = filter_bar({"device": (r.device for r in rows), "budget": (r.budget for r in rows),
                          "dtype": (r.dtype for r in rows)})
    notes = [f"<p>{h(ACCURACY.label)} on each task's test split at the best validation step: mean "
             "± sample standard deviation over seeds, n = distinct seeds that finished ok (a rerun of one "
             "config counts once, the latest). Where a cell swept learning rates, the rate with the best "
             "validation accuracy at the first seed is chosen (shown as lr; the line under it lists every "
             "rate tried) and only that rate's runs are averaged. Runs that diverged, ran out of memory or "
             "failed are counted beside the mean, never averaged in. Test-budget runs "
             f"({', '.join(TEST_BUDGETS)}) are not on the board. Click a header to sort; seeds link to each "
             "run's page.</p>",
             f'<p class="rule">{h(CLEAR_RULE)}</p>']
    if show_lra:
        notes.append(f'<p class="rule">{h(LRA_RULE)}</p>')
    board = ('<table class="board sortable filterable"><thead><tr>' + "".join(head) + "</tr>"
             + baseline_row(columns, column_baselines(rows), show_lra) + "</thead><tbody>" + "".join(body)
             + "</tbody>" + ref + "</table>")
    return ("".join(notes) + filters + board + cost_section(rows, columns) + budget_section(rows, columns)
            + fidelity_section(fidelity) + left_off_section(left_off) + figures_section(figures)
            + skipped_note(problems))


def cost_section(rows: list[Row], columns: list[Column]) -> str:
    """Train throughput and peak memory per cell (and recurrent state bytes on recall tasks)."""
    speed, memory, state = declared("train")["train_tokens_per_s"], declared("train")["peak_memory_bytes"], declared("train")["state_bytes"]
    head = [header_cell("method", "text")] + [column_header(c, speed.label) for c in columns]
    body = []
    for row in rows:
        cells = []
        for column in columns:
            cell = row.cells.get(column)
            tokens = cell.median(speed.name) if cell else None
            if tokens is None:
                cells.append('<td class="empty" data-value="">–</td>')
                continue
            lines = [f'<span class="mean">{h(format_value(speed, tokens))} tok/s</span>',
                     f'<span class="config">{h(format_value(memory, cell.median(memory.name)))} peak</span>']
            if column.recall:
                lines.append(f'<span class="config">{h(format_value(state, cell.median(state.name)))} state</span>')
            cells.append(f'<td data-value="{tokens:.1f}">{"".join(lines)}</td>')
        body.append(f"{row_open(row)}{row_head(row)}{''.join(cells)}</tr>")
    return ("<h2>Cost beside accuracy</h2><p>Per cell, over the runs the board averages: median train "
            "throughput (tokens/s), median peak memory (the process's peak resident memory on a CPU), and on "
            "recall tasks the bytes of the method's recurrent state per sequence (softmax: its KV cache). "
            "Throughput compares only on one device and thread count.</p>"
            '<table class="cost sortable filterable"><thead><tr>' + "".join(head) + "</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>")


def distinct(values: Iterable[Any], show=str) -> str:
    """The distinct values, as text, joined by ' / ' (one, when all runs agree); '-' if none."""
    shown = list(dict.fromkeys(show(v) for v in values if v is not None))
    return " / ".join(shown) or "-"


def model_text(model: Mapping) -> str:
    parts = [str(model.get("name") or "unnamed")]
    if model.get("d_model") is not None:
        parts.append(f"d_model {model['d_model']}")
    for key, noun in (("num_layers", "layer"), ("num_heads", "head")):
        if model.get(key) is not None:
            parts.append(f"{model[key]} {noun}{'' if model[key] == 1 else 's'}")
    if isinstance(model.get("mixers"), list):
        parts.append("mixers " + "+".join(map(str, model["mixers"])))
    if model.get("position") is not None:
        parts.append(f"positions {model['position']}")
    if model.get("mlp") is not None:
        parts.append("MLP" if model["mlp"] else "no MLP")
    return ", ".join(parts)


def protocol_text(config: Mapping) -> str:
    protocol = config.get("protocol") if isinstance(config.get("protocol"), Mapping) else {}
    lr = config["budget"].get("lr")
    seeds = ", ".join(map(str, protocol.get("seeds") or []))
    if protocol.get("name") == "lr_sweep":
        rates = ", ".join(format_lr(r) for r in protocol.get("lrs") or [] if number(r) is not None)
        return f"lr sweep: {rates} at the first seed, best on validation; seeds {seeds or '-'}"
    rate = f"lr {format_lr(lr)}" if number(lr) is not None else "lr -"
    name = protocol.get("name") or "not recorded"
    return f"{name}: {rate}" + (f"; seeds {seeds}" if seeds else "")


def budget_section(rows: list[Row], columns: list[Column]) -> str:
    """Per (budget, board point) on the board: what a run of it does."""
    configs: dict[tuple[str, Column], list[Mapping]] = {}
    for row in rows:
        for column in columns:
            cell = row.cells.get(column)
            if cell is not None:
                found = configs.setdefault((row.budget, column), [])
                found += [r.record["config"] for r in cell.runs + cell.sweep]
    head = "".join(header_cell(c, "text") for c in (
        "budget", "board point", "steps (at most)", "batch", "train / val / test examples",
        "early stop at val acc", "model", "protocol (rates tried, seeds)"))
    body = []
    for (budget, column), found in sorted(configs.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        budgets = [c["budget"] for c in found if isinstance(c.get("budget"), Mapping)]
        examples = distinct((tuple(b.get(k) for k in ("num_train", "num_val", "num_test")) for b in budgets),
                            lambda t: " / ".join("-" if v is None else f"{v:,}" for v in t))
        target = distinct((b.get("target_val_accuracy", "none") for b in budgets),
                          lambda v: percent(v) if number(v) is not None else "none (all steps)")
        models = distinct((c["model"] for c in found if isinstance(c.get("model"), Mapping)), model_text)
        protocols = distinct((c for c in found if isinstance(c.get("budget"), Mapping)), protocol_text)
        cells = [budget, column.label, distinct(b.get("max_steps") for b in budgets),
                 distinct(b.get("batch_size") for b in budgets), examples, target, models, protocols]
        body.append("<tr>" + "".join(f"<td>{h(c)}</td>" for c in cells) + "</tr>")
    return ("<h2>What a budget means</h2><p>Per budget and board point on the board: the most steps a run "
            "takes, its batch size, the examples it trains, validates and tests on, the model, and the "
            "learning-rate protocol. Runs stop early once validation accuracy reaches the target (checked "
            "at each evaluation), so a run that learns the task takes fewer steps than the budget allows. "
            "Where runs disagree, the values are listed with ' / '.</p>"
            '<table class="budgets sortable"><thead><tr>' + head + "</tr></thead><tbody>" + "".join(body)
            + "</tbody></table>")


def fidelity_section(headline: FidelityHeadline | None) -> str:
    """The denominator error of each kernelized method, at one length and feature count."""
    if headline is None:
        return ""
    head = "".join(header_cell(c, "text") for c in ("method", "features (d_phi)")) + "".join(
        header_cell(s, title=f"inputs: {s}") for s in headline.sources)
    body = []
    for method, features, errors in headline.rows:
        cells = "".join(f'<td data-value="{errors[s]:.6g}">{h(f"{errors[s]:.3g}")}</td>' if s in errors
                        else '<td class="empty" data-value="">–</td>' for s in headline.sources)
        body.append(f"<tr><th scope=\"row\">{h(method)}</th><td>{h(f'{features:g}')}</td>{cells}</tr>")
    return (f"<h2>Fidelity to softmax: the denominator</h2><p>Mean relative error of the attention "
            f"denominator (the sum of φ(q)·φ(k) over keys against the sum of exp(q·k/√D)), at N = "
            f"{h(f'{headline.length:g}')} tokens, with each method's measured feature count nearest "
            f"{FIDELITY_FEATURES} (column d_phi), per input source. Lower is better; from mode=fidelity "
            'records (the <a href="plots.html#fidelity">plots</a> show every length and feature count).</p>'
            '<table class="fidelity sortable"><thead><tr>' + head + "</tr></thead><tbody>" + "".join(body)
            + "</tbody></table>")


def left_off_section(left_off: Iterable[Mapping]) -> str:
    """Tasks the CPU board does not run, each with its reason (site/data/board_notes.json)."""
    items = "".join(f"<li><b>{h(n['task'])}</b>: {h(n['reason'])}</li>" for n in left_off)
    return f'<h2>Not on the CPU board</h2><ul class="left-off">{items}</ul>' if items else ""


def figures_section(figures: list[Figure]) -> str:
    if not figures:
        return ""
    shown = "".join(f"<figure>{f.svg}<figcaption>{h(f.caption)}</figcaption></figure>" for f in figures)
    return f'<h2 id="board-plots">Plots of the board</h2>{shown}'


def reference_body(references: list[ReferenceRow], columns: list[Column], show_avg: bool) -> str:
    """LRA Table 1 as published, in its own table body, labelled as such."""
    span = len(columns) + 1 + int(show_avg)
    rows = [f'<tr class="group"><th colspan="{span}">Reported by the paper, not run here: '
            f"{h(reference.SOURCE)}. FAIL: no better than chance (Path-X).</th></tr>"]
    for ref in references:
        cells = []
        for task in (c.task for c in columns):
            if task not in ref.accuracy:
                cells.append('<td class="empty" data-value="">–</td>')
            elif ref.accuracy[task] is None:
                cells.append('<td data-value="" class="status">FAIL</td>')
            else:
                cells.append(f'<td data-value="{ref.accuracy[task]:.4f}">{h(f"{ref.accuracy[task]:.2f}%")}</td>')
        if show_avg:
            cells.append(f'<td data-value="{ref.average:.4f}">{h(f"{ref.average:.2f}%")}</td>')
        ours = f" (ours: {ref.ours})" if ref.ours else ""
        rows.append(f'<tr class="reported"><th scope="row" data-value="{h(ref.model)}">'
                    f'<span class="method">{h(ref.model)}</span><span class="config">reported by Tay et al. 2021'
                    f"{h(ours)}</span></th>{''.join(cells)}</tr>")
    return '<tbody class="reference">' + "".join(rows) + "</tbody>"


def skipped_note(problems: list[str]) -> str:
    if not problems:
        return ""
    items = "".join(f"<li>{h(p)}</li>" for p in problems)
    return f'<details class="skipped"><summary>{len(problems)} file(s) under results/ skipped</summary><ul>{items}</ul></details>'


# -- plots ------------------------------------------------------------------------------------------

def plots_page(figures: list[Figure], runs: list[Run]) -> str:
    """One section per mode that has one (suite/modes/), its figures in it."""
    kinds = {r.kind for r in runs}
    sections = [(m.kind, m.section.title) for m in modes.registry().values() if m.section]
    parts = ['<nav class="toc">' + "".join(f'<a href="#{key}">{h(title)}</a>' for key, title in sections) + "</nav>"]
    for key, title in sections:
        kind = key
        parts.append(f'<section id="{key}"><h2>{h(title)}</h2>')
        shown = [f for f in figures if f.section == key]
        if not shown:
            why = "no plottable points in them" if kind in kinds else f"no <code>kind: {kind}</code> records"
            parts.append(f'<p class="empty">Nothing to plot yet: {why} under results/.</p>')
        for f in shown:
            parts.append(f'<figure>{f.svg}<figcaption>{h(f.caption)}</figcaption></figure>')
        if key == "fidelity":
            parts.append(extra_plot_links(runs))
        parts.append("</section>")
    return "".join(parts)


def extra_plot_links(runs: list[Run]) -> str:
    """Images the fidelity job saved beside its records (copied into the build)."""
    links = [(run, name) for run in runs if run.kind == "fidelity" for name in run.plots]
    if not links:
        return ""
    items = "".join(f'<li><a href="{href(plot_href(run, n))}">{h(n)}</a> ({h(run.method)}, '
                    f'<a href="{href(run.page)}">run</a>)</li>' for run, n in links)
    return f"<h3>Plots saved by the fidelity job</h3><ul>{items}</ul>"


def plot_href(run: Run, name: str) -> str:
    """Where a plot beside a record lies in the build (next to the record's copy)."""
    return f"records/{run.source.parent.as_posix()}/{name}"


# -- runs -------------------------------------------------------------------------------------------

def runs_page(runs: list[Run]) -> str:
    """Every record in one sortable table, with the train metrics as declared."""
    head = "".join(header_cell(c, "text") for c in ("run", "kind", "method", "impl", "task", "budget",
                                                    "device", "dtype", "seed", "status"))
    train_metrics = declared("train").values()
    head += "".join(header_cell(m.label + direction(m), title=f"{m.name} ({m.unit})") for m in train_metrics)
    rows = []
    for run in runs:
        cells = [f'<td data-value="{h(run.run_id)}"><a href="{href(run.page)}">{h(run.run_id)}</a></td>']
        cells += [f"<td>{h(v)}</td>" for v in (run.kind, run.method, run.impl, run.task, run.budget,
                                               run.device, run.dtype, run.seed)]
        cells.append(f'<td class="status status-{h(run.status)}">{h(run.status)}</td>')
        for m in train_metrics:
            v = number(run.metrics.get(m.name)) if run.kind == "train" else None
            cells.append(f'<td data-value="{"" if v is None else v}">{h(format_value(m, v))}</td>')
        rows.append(f'<tr data-device="{h(run.device)}" data-budget="{h(run.budget)}" '
                    f'data-dtype="{h(run.dtype)}">{"".join(cells)}</tr>')
    downloads = ('<p class="downloads">Download every record: <a href="records.json" download>records.json</a> '
                 '(the records as written) · <a href="records.csv" download>records.csv</a> (one row per run, '
                 "scalar metrics as columns). Each run's page links its raw record.</p>")
    filters = filter_bar({"device": (r.device for r in runs), "budget": (r.budget for r in runs),
                          "dtype": (r.dtype for r in runs)})
    return (downloads + filters + '<table class="runs sortable filterable"><thead><tr>' + head
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def run_page(run: Run) -> str:
    """One run: what, status, metrics, how to reproduce it, the whole config and environment."""
    rec, env = run.record, run.record["env"]
    summary = {"kind": run.kind, "method": run.method, "impl": run.impl, "task": run.task,
               "budget": run.budget, "device": run.device, "dtype": run.dtype, "seed": run.seed,
               "status": run.status, "error": rec.get("error"), "created": rec.get("created"),
               "config_hash": rec.get("config_hash"), "record": run.source.as_posix()}
    commit = env.get("git_commit")
    dirty = " (the checkout had uncommitted changes: the commit alone may not reproduce it)" if env.get("git_dirty") else ""
    checkout = f"git checkout {commit}\n" if commit else ""
    parts = [
        key_value_table(summary),
        f'<p><a href="../{href("records/" + run.source.as_posix())}">raw record (JSON)</a></p>',
        "<h2>Reproduce</h2>",
        f"<p>From the suite's repository at commit <code>{h(commit or 'unknown')}</code>{h(dirty)}:</p>",
        f'<pre class="command">{h(checkout)}{h(reproduce_command(run))}</pre>',
        "<h2>Metrics</h2>", metrics_block(run.metrics),
        "<h2>Task</h2>", key_value_table(rec["task"]),
        "<h2>Method</h2>", key_value_table(rec["method"]),
        "<h2>Environment</h2>", key_value_table(env),
        "<h2>Config</h2>", f'<pre class="config">{h(json.dumps(rec["config"], indent=2, default=str))}</pre>',
    ]
    return "".join(parts)


def key_value_table(block: Mapping) -> str:
    rows = "".join(f"<tr><th>{h(k)}</th><td>{value_html(v)}</td></tr>" for k, v in block.items())
    return f'<table class="kv">{rows}</table>'


def value_html(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return f"<code>{h(json.dumps(value, default=str))}</code>"
    return h("-" if value is None else value)


def metrics_block(metrics: Mapping) -> str:
    """Declared metrics with their label and unit, other scalars as recorded, lists as tables."""
    known = declared_metrics()
    rows, tables = [], []
    for name, value in metrics.items():
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            tables.append(f"<h3>{h(name)}</h3>" + list_table(value))
        elif name in known and number(value) is not None:
            m = known[name]
            rows.append(f'<tr><th title="{h(name)}">{h(m.label + direction(m))}</th>'
                        f"<td>{h(format_value(m, value))}</td><td class=\"raw\">{h(value)}</td></tr>")
        else:
            rows.append(f'<tr><th>{h(name)}</th><td>{value_html(value)}</td><td></td></tr>')
    return f'<table class="kv">{"".join(rows)}</table>' + "".join(tables)


def list_table(items: list[Mapping]) -> str:
    columns = list(dict.fromkeys(k for item in items for k in item))
    head = "".join(header_cell(c, "text") for c in columns)
    body = "".join("<tr>" + "".join(f'<td data-value="{h(number(item.get(c)) if number(item.get(c)) is not None else item.get(c, ""))}">'
                                    f"{value_html(item.get(c))}</td>" for c in columns) + "</tr>" for item in items)
    return f'<table class="points sortable"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
