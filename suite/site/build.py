"""Build the static site: a pure function of the results folder (plus the package's
templates/ and assets/). Output: index.html (the board), plots.html, runs.html, runs/<run>.html, the raw
records under records/, records.json / records.csv, the board's cells as cells.csv / cells.json, each
figure's static SVG under figures/, and the record schema of each kind under schema/."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from suite import modes, schema
from suite.modes import declared as declared_metrics
from suite.site import downloads, pages, render
from suite.site.board import (
    board_columns,
    board_rows,
    conflict_messages,
    off_protocol_messages,
    reference_rows,
    smoke_run,
)
from suite.site.costs import cell_costs
from suite.site.curves import curve_pages, page_path
from suite.site.figures import Figure, board_figures, fidelity_figures, pareto_figures, sweep_figures
from suite.site.lead import lead
from suite.site.runs import Run, load_runs, number, origin_of, safe_name

SITE_DIR = pages.SITE_DIR
MARKER = ".suite-site"  # marks a folder this builder made, so a rebuild may clear it
CSV_FIELDS = ("run_id", "kind", "status", "method", "impl", "task", "budget", "device", "dtype", "seed",
              "created", "git_commit", "config_hash", "record", "tier", "hardware", "added")
SVG_SIZE = re.compile(r'<svg[^>]*?width="([\d.]+)"[^>]*?height="([\d.]+)"')


class SiteError(ValueError):
    """A build that cannot start or finish: no results folder, an output folder the builder did not
    make, a file it cannot write. ``problems``: the files skipped before it stopped."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


@dataclass(frozen=True)
class BuildReport:
    out_dir: Path
    runs: int
    problems: list[str]  # one message per skipped file


def build_site(results_dir: str | Path, out_dir: str | Path, site_dir: Path = SITE_DIR,
               submitted: tuple[str | Path, ...] = ()) -> BuildReport:
    """Write the site for every record under ``results_dir`` (verified) and under each folder of
    ``submitted`` (submitted) to ``out_dir`` (replaced whole, and only once the new site is complete:
    a failed or interrupted build leaves the one before as it was)."""
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    if not results_dir.is_dir():
        raise SiteError(f"results folder {str(results_dir)!r} does not exist; pass --results <folder "
                        "holding the records> (runs write to results/ by default)")
    missing = [str(f) for f in submitted if not Path(f).is_dir()]
    if missing:
        raise SiteError(f"submission folder(s) {', '.join(map(repr, missing))} do not exist")
    origins: dict[str, str] = {}
    for folder in map(str, submitted):  # an origin names a submission's rows and its copy folder: one each
        other = origins.setdefault(origin_of(Path(folder)), folder)
        if other != folder:
            raise SiteError(f"submission folders {other!r} and {folder!r} share the origin {origin_of(Path(folder))!r} "
                            "(their names differ only in characters a file name cannot hold); rename one")
    for folder in (results_dir, *map(Path, submitted)):
        check_output(out_dir, folder)
    runs, problems = load_runs(results_dir, tuple(map(Path, submitted)))
    problems += conflict_messages(runs) + off_protocol_messages(runs)
    try:
        with staged(out_dir) as stage:
            write_site(runs, problems, stage, site_dir)
    except SiteError as exc:
        exc.problems = problems
        raise
    except OSError as exc:  # a full disk, a read-only folder: the file, and why
        raise SiteError(f"cannot write {exc.filename or out_dir}: {exc.strerror or exc}; the site in "
                        f"{str(out_dir)!r} is left as it was", problems) from exc
    except Exception as exc:  # a record the schema let through and a page cannot show: said, not half-built
        raise SiteError(f"the build stopped ({type(exc).__name__}: {exc}); the site in {str(out_dir)!r} is "
                        "left as it was", problems) from exc
    return BuildReport(out_dir, len(runs), problems)


def write_site(runs: list[Run], problems: list[str], out_dir: Path, site_dir: Path) -> None:
    """Every page, figure and download of the site into the empty folder ``out_dir``."""
    shutil.copytree(site_dir / "assets", out_dir / "assets")
    env = pages.environment(Path(site_dir))

    def write(path: str, text: str) -> None:
        target = out_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    submitted = [r for r in runs if r.tier != "verified"]
    folders = len({r.origin for r in submitted})
    sources = f"{len(runs)} record(s)" + (
        f": {len(runs) - len(submitted)} of the project's and {len(submitted)} submitted in {folders} folder(s)"
        if submitted else ", the project's")

    def page(path: str, title: str) -> dict:
        return {"title": title, "root": "../" * path.count("/"), "sources": sources}

    rows = board_rows(runs)
    columns = board_columns(rows)
    # The first screen and the figures compare speed, memory and rank across methods: they read the
    # verified tier alone, one machine's runs; submitted rows are in the tables, each with its machine.
    verified = [r for r in rows if r.tier == "verified"]
    verified_columns, verified_runs = board_columns(verified), [r for r in runs if r.tier == "verified"]
    costs = cell_costs(verified_runs)  # the project's own cost records (a submission's never join its cells)
    first = lead(verified, verified_columns, verified_runs, costs)
    shown_first = {f.title for f in first.figures}
    placed = place_figures([f for f in board_figures(verified, verified_columns, costs) if f.title not in shown_first],
                           out_dir, "board")
    leading = place_figures(first.figures, out_dir, "lead")
    write("index.html", pages.board_page(env, rows, columns, reference_rows(), problems, lead=first,
                                         lead_figures=leading, figures=placed, fidelity=first.fidelity,
                                         smoke=list(filter(smoke_run, runs)),
                                         **board_notes(site_dir), **page("index.html", "Leaderboard")))
    figures = [f for mode in modes.registry().values() if mode.section
               for f in mode_figures(mode, verified_runs, verified, verified_columns)]
    write("plots.html", pages.plots_page(env, place_figures(figures, out_dir, "plot"), runs,
                                         **page("plots.html", "Plots")))
    curves = write_curve_pages(env, rows, columns, out_dir, write, page)
    if placed or leading or figures or curves:
        write(f"assets/{render.BUNDLE}", render.javascript_bundle())
    write("runs.html", pages.runs_page(env, runs, publish_schemas(out_dir), **page("runs.html", "All runs")))
    labels = {id(r): row.label for row in rows for cell in row.cells.values() for r in cell.every_run()}
    for run in runs:  # a run's title names its variant, as its row does (sliding_window (window=32))
        title = f"{labels.get(id(run), run.method)} on {run.task} ({run.kind}, {run.status})"
        write(run.page, pages.run_page(env, run, **page(run.page, title)))
        copy_record(run, out_dir)
    write("records.json", json.dumps([r.record for r in runs], indent=1, default=str) + "\n")
    write("records.csv", records_csv(runs))
    write("cells.csv", table_csv(downloads.cell_columns(rows, costs), downloads.cells(rows, costs)))
    write("cells.json", downloads.cells_json(rows, costs))
    write(MARKER, "built by python -m suite.site; rebuilt whole on each build\n")


def write_curve_pages(env, rows: list, columns: list, out_dir: Path, write, page) -> int:
    """curves/<point>.html for every board point; the number of curve figures drawn."""
    drawn = 0
    for column, cells in curve_pages(rows, columns).items():
        path = page_path(column)
        figures = iter(place_figures([c.figure for c in cells if c.figure], out_dir, f"curve-{column.slug}"))
        placed = [(c, next(figures) if c.figure else None) for c in cells]
        drawn += sum(p is not None for _, p in placed)
        write(path, pages.curves_page(env, column, placed, **page(path, f"Validation curves: {column.label}")))
    return drawn


def place_figures(figures: list[Figure], out_dir: Path, prefix: str) -> list[pages.Placed]:
    """Render each figure's static SVG into figures/ (what a page shows without JavaScript)."""
    placed = []
    for i, figure in enumerate(figures):
        slug = f"{prefix}-{i + 1:02d}-{safe_name(figure.title)[:80]}"
        svg = render.static_svg(figure.spec)
        path = out_dir / "figures" / f"{slug}.svg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svg)
        width, height = (round(float(v)) for v in SVG_SIZE.search(svg).groups())
        placed.append(pages.Placed(figure, slug, f"figures/{slug}.svg", width, height))
    return placed


def publish_schemas(out_dir: Path) -> list[tuple[str, str]]:
    """schema/record-<kind>.json for every kind: (kind, path in the build)."""
    published = []
    for mode in modes.registry().values():
        path = f"schema/record-{mode.kind}.json"
        (out_dir / "schema").mkdir(exist_ok=True)
        published_schema = schema.json_schema(mode.kind, modes.metrics_model(mode.kind))
        (out_dir / path).write_text(json.dumps(published_schema, indent=1) + "\n")
        published.append((mode.kind, path))
    return published


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


# The board's notes (data/board_notes.json): per list, the text fields each entry holds.
NOTE_FIELDS = {
    "left_off": ("task", "reason"),  # the tasks the board does not run, and why
    "findings": ("title", "text"),  # what the board shows that a reader might doubt, with the evidence
}


def board_notes(site_dir: Path) -> dict[str, list[dict]]:
    """The board's notes, from the site's own data/board_notes.json (the site does not import task
    code); every list empty when the file is absent, a list absent from the file empty."""
    path = site_dir / "data" / "board_notes.json"
    if not path.is_file():
        return {key: [] for key in NOTE_FIELDS}
    try:
        data = json.loads(path.read_text())
        notes = {key: data.get(key, []) for key in NOTE_FIELDS}
        if all(isinstance(n[f], str) for key, fields in NOTE_FIELDS.items() for n in notes[key] for f in fields):
            return notes
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    shape = ", ".join(f'"{key}": [{{{", ".join(f"{f!r}: ..." for f in fields)}}}, ...]'
                      for key, fields in NOTE_FIELDS.items())
    raise SiteError(f"{path} must hold {{{shape}}} (text fields)".replace("'", '"'))


def inside(path: Path, folder: Path) -> bool:
    return path.resolve() == folder.resolve() or folder.resolve() in path.resolve().parents


def check_output(out_dir: Path, results_dir: Path) -> None:
    """Refuse an output folder the build may not replace: a file, a folder this builder did not make,
    one holding the results (replacing it would delete them) or inside them (the next build would
    read the site's copies as records)."""
    if inside(results_dir, out_dir) or inside(out_dir, results_dir):
        raise SiteError(f"--out {str(out_dir)!r} and --results {str(results_dir)!r} overlap: a build replaces "
                        "--out whole, and reads every .json under --results; choose an --out outside the results")
    if out_dir.exists() and not out_dir.is_dir():
        raise SiteError(f"--out {str(out_dir)!r} is a file, not a folder; choose another --out")
    if out_dir.is_dir() and not (out_dir / MARKER).is_file() and any(out_dir.iterdir()):
        raise SiteError(f"output folder {str(out_dir)!r} is not empty and was not built by suite.site; "
                        "refusing to overwrite it (choose another --out)")


@contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    """A new empty folder beside ``out_dir`` to build in; when the ``with`` body ends without an
    error it replaces ``out_dir``, else it is deleted and ``out_dir`` stays as it was."""
    parent = out_dir.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=parent))
        umask = os.umask(0)
        os.umask(umask)
        stage.chmod(0o777 & ~umask)  # as a folder made by mkdir (mkdtemp's is private): a web server reads it
    except OSError as exc:
        raise SiteError(f"cannot build beside --out {str(out_dir)!r}: {exc.filename or parent}: "
                        f"{exc.strerror or exc}") from exc
    old = parent / f".{out_dir.name}.replaced-{stage.name.rpartition('-')[2]}"
    try:
        yield stage
        try:  # two renames: a signal between them would leave no site, so the first is undone
            if out_dir.exists():
                os.rename(out_dir, old)
            os.rename(stage, out_dir)
        except BaseException:
            if old.exists() and not out_dir.exists():
                os.rename(old, out_dir)
            raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def copy_record(run: Run, out_dir: Path) -> None:
    """The raw record (and the plots it names) into records/, at its path under results/ (a
    submission's under records/submitted/<folder>/)."""
    target = out_dir / "records" / run.source
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run.file, target)
    for name in run.plots:
        shutil.copyfile(run.file.parent / name, target.parent / name)


def records_csv(runs: list[Run]) -> str:
    """One row per run: identity columns, the columns that define its cell (downloads.CELL_FIELDS and
    every method option), then every scalar metric (declared train metrics first); each column once."""
    declared = list(declared_metrics("train"))
    options = downloads.option_names(runs)
    derived = downloads.run_columns(runs)
    fixed = [*CSV_FIELDS, *downloads.CELL_FIELDS, *(f"method.{name}" for name in options),  # method.seed: not the run's
             *derived]
    scalars = {k for r in runs for k, v in r.metrics.items() if isinstance(v, (str, int, float, bool))} - set(fixed)
    metric_columns = [n for n in declared if n in scalars] + sorted(scalars - set(declared))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(fixed + metric_columns)
    for run in runs:
        identity = (run.run_id, run.kind, run.status, run.method, run.impl, run.task, run.budget, run.device,
                    run.dtype, run.seed, run.created, run.model.env.git_commit, run.config_hash,
                    run.source.as_posix(), run.tier, run.hardware, run.added)
        values = [run.metrics.get(n) for n in metric_columns]
        writer.writerow([csv_cell(v) for v in (*identity, *downloads.cell_values(run, options),
                                               *downloads.run_values(run, derived), *values)])
    return buffer.getvalue()


def table_csv(columns: list[str], rows: list[dict]) -> str:
    """``rows`` (dicts) as CSV under ``columns``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([csv_cell(row.get(c)) for c in columns] for row in rows)
    return buffer.getvalue()


def csv_cell(value: object) -> str:
    """A CSV cell; text that a spreadsheet would run as a formula gets a leading quote."""
    if value is None:
        return ""
    if number(value) is not None:
        return repr(value) if isinstance(value, float) else str(value)
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
