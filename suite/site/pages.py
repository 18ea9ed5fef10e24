"""HTML of the site's pages, from runs and figures. Every text from a record goes through
:func:`h` (``html.escape``); no record data reaches JavaScript."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from html import escape
from string import Template
from typing import Any
from urllib.parse import quote

from suite.metrics import TRAIN_METRICS, Metric, format_value
from suite.site.board import ACCURACY, LRA_RULE, LRA_TASKS, Cell, ReferenceRow, Row
from suite.site.figures import Figure
from suite.site.runs import Run, declared_metrics, number, reproduce_command
from tasks.lra import reference

SECTIONS = (
    ("pareto", "Accuracy against cost (Pareto)", "train"),
    ("kernel", "Kernel: time and memory against N", "kernel"),
    ("fidelity", "Fidelity to softmax: denominator first", "fidelity"),
    ("decode", "Decoding: latency and state memory against context", "decode"),
)
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

def board_cell(cell: Cell | None) -> str:
    if cell is None:
        return '<td class="empty" data-value="">–</td>'
    mean, spread, values = cell.mean(), cell.spread(), cell.values()
    parts = []
    if mean is not None:
        parts.append(f'<span class="mean">{h(format_value(ACCURACY, mean))}</span>')
        if spread is not None:
            parts.append(f'<span class="spread"> ± {h(f"{100 * spread:.1f}")}</span>')
        parts.append(f'<span class="n"> n={len(values)}</span>')
    for status, count in sorted(cell.failures().items()):
        parts.append(f' <span class="status status-{h(status)}">{h(status)}{h(f" ×{count}" if count > 1 else "")}</span>')
    seeds = " ".join(f'<a href="{href(r.page)}">s{h(r.seed)}</a>' for r in cell.runs)
    value = "" if mean is None else f"{100 * mean:.4f}"
    return f'<td data-value="{value}">{"".join(parts)}<div class="seeds">{seeds}</div></td>'


def board_page(rows: list[Row], tasks: list[str], references: list[ReferenceRow], problems: list[str]) -> str:
    """The leaderboard: our rows (mean ± std over seeds), then the published LRA rows."""
    if not rows:
        return ('<p class="empty-board">No train records yet. Run e.g. <code>python -m suite '
                'method=softmax task=listops</code>, then rebuild with <code>python -m suite.site</code>.</p>'
                + skipped_note(problems))
    show_lra = any(t in LRA_TASKS for t in tasks)
    head = [header_cell("method", "text")] + [header_cell(t, title=f"{ACCURACY.label} on {t}") for t in tasks]
    if show_lra:
        head.append(header_cell("LRA avg", title=LRA_RULE))
    body = []
    for row in rows:
        cells = "".join(board_cell(row.cells.get(t)) for t in tasks)
        if show_lra:
            avg = row.lra_average()
            cells += (f'<td data-value="{100 * avg:.4f}">{h(format_value(ACCURACY, avg))}</td>' if avg is not None
                      else '<td class="empty" data-value="" title="needs all five LRA tasks">–</td>')
        body.append(f'<tr data-device="{h(row.device)}" data-budget="{h(row.budget)}" data-dtype="{h(row.dtype)}">'
                    f'<th scope="row" data-value="{h(row.method)}"><span class="method">{h(row.method)}</span>'
                    f'<span class="config">{h(row.budget)} · {h(row.device)} · {h(row.dtype)}</span></th>{cells}</tr>')
    ref = reference_body(references, tasks, show_lra) if show_lra else ""
    filters = filter_bar({"device": (r.device for r in rows), "budget": (r.budget for r in rows),
                          "dtype": (r.dtype for r in rows)})
    notes = [f"<p>{h(ACCURACY.label)} on each task's test split at the best validation step: mean "
             "± sample standard deviation over seeds (n = seeds that finished ok). Runs that diverged, "
             "ran out of memory or failed are counted beside the mean, never averaged in. Click a "
             "header to sort; seeds link to each run's page.</p>"]
    if show_lra:
        notes.append(f'<p class="rule">{h(LRA_RULE)}</p>')
    return ("".join(notes) + filters + '<table class="board sortable filterable"><thead><tr>' + "".join(head)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody>" + ref + "</table>" + skipped_note(problems))


def reference_body(references: list[ReferenceRow], tasks: list[str], show_avg: bool) -> str:
    """LRA Table 1 as published, in its own table body, labelled as such."""
    span = len(tasks) + 1 + int(show_avg)
    rows = [f'<tr class="group"><th colspan="{span}">Reported by the paper, not run here: '
            f"{h(reference.SOURCE)}. FAIL: no better than chance (Path-X).</th></tr>"]
    for ref in references:
        cells = []
        for task in tasks:
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
    kinds = {r.kind for r in runs}
    parts = ['<nav class="toc">' + "".join(f'<a href="#{key}">{h(title)}</a>' for key, title, _ in SECTIONS) + "</nav>"]
    for key, title, kind in SECTIONS:
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
    head += "".join(header_cell(m.label + direction(m), title=f"{m.name} ({m.unit})") for m in TRAIN_METRICS)
    rows = []
    for run in runs:
        cells = [f'<td data-value="{h(run.run_id)}"><a href="{href(run.page)}">{h(run.run_id)}</a></td>']
        cells += [f"<td>{h(v)}</td>" for v in (run.kind, run.method, run.impl, run.task, run.budget,
                                               run.device, run.dtype, run.seed)]
        cells.append(f'<td class="status status-{h(run.status)}">{h(run.status)}</td>')
        for m in TRAIN_METRICS:
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
