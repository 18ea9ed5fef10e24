"""Build the static site: a pure function of the results folder (plus site/templates and
site/assets). Output: index.html (the board), plots.html, runs.html, runs/<run>.html, the raw
records under records/, and records.json / records.csv."""

from __future__ import annotations

import csv
import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from string import Template

from suite import modes
from suite.metrics import declared as declared_metrics
from suite.site import pages
from suite.site.board import board_columns, board_rows, reference_rows
from suite.site.figures import board_figures, fidelity_figures, fidelity_headline, pareto_figures, sweep_figures
from suite.site.runs import Run, load_runs, number

SITE_DIR = Path(__file__).resolve().parents[2] / "site"
MARKER = ".suite-site"  # marks a folder this builder made, so a rebuild may clear it
CSV_FIELDS = ("run_id", "kind", "status", "method", "impl", "task", "budget", "device", "dtype", "seed",
              "created", "git_commit", "config_hash", "record")


class SiteError(ValueError):
    """A build that cannot start: no results folder, or an output folder the builder did not make."""


@dataclass(frozen=True)
class BuildReport:
    out_dir: Path
    runs: int
    problems: list[str]  # one message per skipped file


def build_site(results_dir: str | Path, out_dir: str | Path, site_dir: Path = SITE_DIR) -> BuildReport:
    """Write the site for every record under ``results_dir`` to ``out_dir`` (replaced whole)."""
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    if not results_dir.is_dir():
        raise SiteError(f"results folder {str(results_dir)!r} does not exist; pass --results <folder "
                        "holding the records> (runs write to results/ by default)")
    runs, problems = load_runs(results_dir)
    prepare_output(out_dir)
    shutil.copytree(site_dir / "assets", out_dir / "assets")
    template = Template((site_dir / "templates" / "page.html").read_text())
    footer = (f"Built by <code>python -m suite.site</code> from {len(runs)} record(s) under results/. "
              "Static files: no network needed.")

    def write(path: str, title: str, body: str) -> None:
        root = "../" * path.count("/")
        target = out_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(pages.render(template, title, body, root, footer))

    rows = board_rows(runs)
    columns = board_columns(rows)
    figures = [f for mode in modes.registry().values() if mode.section
               for f in mode_figures(mode, runs, rows, columns)]
    board = pages.board_page(rows, columns, reference_rows(), problems, figures=board_figures(rows, columns),
                             fidelity=fidelity_headline(runs), left_off=left_off_notes(site_dir))
    write("index.html", "Leaderboard", board)
    write("plots.html", "Plots", pages.plots_page(figures, runs))
    write("runs.html", "All runs", pages.runs_page(runs))
    for run in runs:
        write(run.page, f"{run.method} on {run.task} ({run.kind}, {run.status})", pages.run_page(run))
        copy_record(run, results_dir, out_dir)
    (out_dir / "records.json").write_text(json.dumps([r.record for r in runs], indent=1, default=str) + "\n")
    (out_dir / "records.csv").write_text(records_csv(runs))
    (out_dir / MARKER).write_text("built by python -m suite.site; rebuilt whole on each build\n")
    return BuildReport(out_dir, len(runs), problems)


def mode_figures(mode: modes.Mode, runs: list[Run], rows: list, columns: list) -> list:
    """The figures of a mode's section of the plots page, in the style its declaration names."""
    style = mode.section.figures
    if style == "pareto":
        return pareto_figures(rows, columns)
    if style == "sweep":
        return sweep_figures(runs, mode.kind, mode.section.x_label)
    if style == "fidelity":
        return fidelity_figures(runs)
    raise SiteError(f"mode {mode.name}: unknown figure style {style!r}; valid: {', '.join(modes.FIGURE_STYLES)}")


def left_off_notes(site_dir: Path) -> list[dict]:
    """The tasks the board does not run and why, from the site's own data/board_notes.json (the site
    does not import task code); none when the file is absent."""
    path = site_dir / "data" / "board_notes.json"
    if not path.is_file():
        return []
    try:
        notes = json.loads(path.read_text())["left_off"]
        if all(isinstance(n["task"], str) and isinstance(n["reason"], str) for n in notes):
            return notes
    except (ValueError, KeyError, TypeError):
        pass
    raise SiteError(f"{path} must hold {{\"left_off\": [{{\"task\": \"...\", \"reason\": \"...\"}}, ...]}}")


def prepare_output(out_dir: Path) -> None:
    """An empty ``out_dir``; an existing one is cleared only if this builder made it."""
    if out_dir.exists():
        if not (out_dir / MARKER).is_file() and any(out_dir.iterdir()):
            raise SiteError(f"output folder {str(out_dir)!r} is not empty and was not built by suite.site; "
                            "refusing to overwrite it (choose another --out)")
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)


def copy_record(run: Run, results_dir: Path, out_dir: Path) -> None:
    """The raw record (and the plots it names) into records/, at its path under results/."""
    target = out_dir / "records" / run.source
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(results_dir / run.source, target)
    for name in run.plots:
        shutil.copyfile(results_dir / run.source.parent / name, target.parent / name)


def records_csv(runs: list[Run]) -> str:
    """One row per run: identity columns, then every scalar metric (declared train metrics first)."""
    declared = list(declared_metrics("train"))
    scalars = {k for r in runs for k, v in r.metrics.items() if isinstance(v, (str, int, float, bool))}
    metric_columns = [n for n in declared if n in scalars] + sorted(scalars - set(declared))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(list(CSV_FIELDS) + metric_columns)
    for run in runs:
        identity = (run.run_id, run.kind, run.status, run.method, run.impl, run.task, run.budget, run.device,
                    run.dtype, run.seed, run.record.get("created"), run.record["env"].get("git_commit"),
                    run.record.get("config_hash"), run.source.as_posix())
        values = [run.metrics.get(n) for n in metric_columns]
        writer.writerow([csv_cell(v) for v in (*identity, *values)])
    return buffer.getvalue()


def csv_cell(value: object) -> str:
    """A CSV cell; text that a spreadsheet would run as a formula gets a leading quote."""
    if value is None:
        return ""
    if number(value) is not None:
        return repr(value) if isinstance(value, float) else str(value)
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
