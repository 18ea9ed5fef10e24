"""The leaderboard site builds from a results folder: every method and task shows, record text is
escaped, bad files are skipped with a warning, nothing remote is referenced, the numbers on the
board (seed means, LRA average, Pareto frontier, kernel crossover) are right, every figure has a
static SVG for readers without JavaScript, and each kind's record schema is published."""

from __future__ import annotations

import html
import json
import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from suite import records
from suite.record_store import new_record, write_record
from suite.site import SiteError, build_site, pages, reference
from suite.site.__main__ import main
from suite.site.board import LRA_TASKS, board_rows
from suite.site.charts import validate
from suite.site.figures import curve_crossover, fidelity_figures, pareto_front, sweep_figures
from suite.site.render import BUNDLE
from suite.site.runs import load_runs, reproduce_command

SCRIPT = "<script>alert('x')</script>"
KERNEL_NS = (256, 512, 1024, 2048, 4096, 8192)


def train_record(method: str, task: str, seed: int, accuracy: float | None, status: str = "ok",
                 error: str | None = None, budget: str = "cpu") -> dict:
    """A train record as the suite writes it, with made-up numbers."""
    config = {"method": {"name": method, "impl": "auto", "options": {}}, "task": {"name": task},
              "budget": {"name": budget, "max_steps": 100, "batch_size": 8, "lr": 1e-3},
              "mode": {"name": "train"}, "seed": seed, "device": "auto"}
    metrics = {"train_tokens_per_s": 1000.0 * (2 if method == "linear" else 1), "peak_memory_bytes": 2**20,
               "peak_memory_source": "rss_high_water_mark_above_built_run", "median_step_time_s": 0.1,
               "baseline_accuracy": 0.1}
    if accuracy is not None:
        metrics.update(test_accuracy=accuracy, val_accuracy=accuracy)
    return new_record("train", config=config, config_hash=records.config_hash(config, "cpu"),
                      method=config["method"] | {"params": {}},
                      task={"name": task, "seq_len": 64, "num_test": 1000}, metrics=metrics, status=status, error=error,
                      env={"device": "cpu", "device_name": "test cpu", "git_commit": "abc123", "git_dirty": False,
                           "seed": seed})


def kernel_record(method: str, impls: dict) -> dict:
    """A kernel sweep record shaped like the kernel job's: metrics.points, one dict per (impl,
    length), with SDPA measured as a peer inside a kernelized method's record."""
    points = []
    for impl, seconds in impls.items():
        for n in KERNEL_NS:
            point = {"impl": impl, "source": "peer" if impl == "sdpa" else "method", "length": n, "batch": 1,
                     "heads": 2, "head_dim": 16, "dtype": "float32", "causal": False, "status": "ok", "reason": None}
            if method == "softmax" and n == KERNEL_NS[-1]:
                points.append({**point, "status": "oom", "reason": "out of memory"})
                continue
            points.append({**point, "fwd_median_s": seconds(n), "fwd_p10_s": 0.9 * seconds(n),
                           "fwd_p90_s": 1.2 * seconds(n),
                           "fwdbwd_median_s": 3 * seconds(n),
                           "fwdbwd_peak_memory_bytes": 64 * n * (n if impl != "chunk" else 8)})
    config = {"method": {"name": method, "impl": "auto"}, "mode": {"name": "kernel"}, "seed": 0}
    return new_record("kernel", config=config, config_hash=records.config_hash(config, "cuda"),
                      method={"name": method, "impl": "auto", "params": {}},
                      task={"name": "kernel"}, metrics={"points": points, "summary": [{"impl": i} for i in impls]},
                      env={"device": "cuda", "device_name": "Test GPU", "seed": 0})


def fidelity_record(method: str) -> dict:
    """A fidelity record: per (source, N, d_phi) points holding error statistics over queries."""
    points = [{"method": method, "source": "gaussian", "seq_len": n, "d_phi": d,
               "denominator_rel_error": {"mean": 1 / math.sqrt(d), "median": 0.8 / math.sqrt(d),
                                         "max": 3 / math.sqrt(d)},
               "output_rel_error": {"mean": 2 / math.sqrt(d)}, "attention_tv": {"mean": 0.5 / math.sqrt(d)},
               "kernelized_flops": 1000 * d}
              for d in (16, 64, 256) for n in (128, 1024)]
    config = {"mode": {"name": "fidelity"}, "seed": 0}
    return new_record("fidelity", config=config, config_hash=records.config_hash(config, "cpu"),
                      method={"name": method, "impl": "naive", "params": {}}, task={"name": "fidelity"},
                      metrics={"points": points, "plots": ["errors.svg", "../../escape.svg"]},
                      env={"device": "cpu", "seed": 0})


def decode_record(method: str) -> dict:
    """A decode record: the method's points and the softmax reference's, per (batch, context)."""
    def points(latency, state):
        return [{"batch_size": b, "context_length": c, "status": "ok", "decode_latency_median_s": latency(c),
                 "state_bytes": state(c)} for b in (1, 8) for c in (256, 1024, 4096)]
    metrics = {"impl": "chunk", "points": points(lambda c: 1e-4, lambda c: 4096),
               "reference": {"method": "softmax", "impl": "naive",
                             "points": points(lambda c: 1e-7 * c, lambda c: 8 * c)}}
    config = {"mode": {"name": "decode"}, "seed": 0}
    return new_record("decode", config=config, config_hash=records.config_hash(config, "cpu"),
                      method={"name": method, "impl": "chunk", "params": {}}, task={"name": "decode"},
                      metrics=metrics, env={"device": "cpu", "seed": 0})


def write_fixture_results(root: Path) -> Path:
    """Records of two methods on two tasks (and one method named like a script), kernel, fidelity
    and decode records, a corrupt file and a record of an unknown schema."""
    for seed, (soft, lin) in enumerate(((0.40, 0.30), (0.50, 0.34))):
        write_record(train_record("softmax", "listops", seed, soft), root)
        write_record(train_record("linear", "listops", seed, lin), root)
        write_record(train_record("softmax", "mqar", seed, 0.9), root)
    write_record(train_record("linear", "mqar", 0, 0.8), root)
    write_record(train_record("linear", "mqar", 1, None, status="diverged", error=SCRIPT), root)
    # into tables, legends, file paths: a file from elsewhere, for the writer refuses a name that is no identifier
    scripted = train_record(SCRIPT, "mqar", 0, 0.5)
    records.record_path(scripted, root).parent.mkdir(parents=True)
    records.record_path(scripted, root).write_text(json.dumps(scripted))
    write_record(kernel_record("softmax", {"naive": lambda n: 1e-9 * n * n}), root)
    write_record(kernel_record("linear", {"chunk": lambda n: 1e-6 * n, "sdpa": lambda n: 0.5e-9 * n * n}), root)
    fidelity = write_record(fidelity_record("favor"), root)
    (fidelity.parent / "errors.svg").write_text("<svg></svg>")
    write_record(decode_record("linear"), root)
    (root / "train" / "corrupt.json").write_text('{"schema": 1, "kind": "tra')
    (root / "train" / "future.json").write_text(json.dumps({"schema": 99}))
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    root = tmp_path_factory.mktemp("site")
    results = write_fixture_results(root / "results")
    report = build_site(results, root / "out")
    return results, report.out_dir, report.problems


def built_text(out: Path) -> dict[Path, str]:
    return {p: p.read_text() for p in out.rglob("*")
            if p.is_file() and p.suffix in (".html", ".css", ".js", ".json", ".csv")}


def test_board_shows_every_method_and_task(built):
    _, out, _ = built
    board = (out / "index.html").read_text()
    for name in ("softmax", "linear", "listops", "mqar", *LRA_TASKS):
        assert f">{name}<" in board, name
    assert "Reported by the paper, not run here" in board and "36.37%" in board  # Transformer, ListOps
    assert "LRA avg" in board and "Path-X excluded" in board


def as_html(text: str) -> str:
    """``text`` as the site's templates print it (autoescaped)."""
    return pages.environment().from_string("{{ text }}").render(text=text)


SCRIPTS = ("board.js", BUNDLE, "plots.js")  # the only scripts a page loads, all from assets/


def test_record_text_is_escaped_everywhere(built):
    _, out, _ = built
    pages = built_text(out)
    for path, text in pages.items():
        if path.suffix == ".html":
            assert "<script>alert" not in text, path
            tags = re.findall(r"<script([^>]*)>", text)
            loaded = [re.fullmatch(r' src="(?:\.\./)?assets/([^"]+)"', t) for t in tags if "src=" in t]
            assert all(m and m.group(1) in SCRIPTS for m in loaded) and loaded, (path, tags)
            # Every other script is a figure's spec: JSON, not run, with record text inside it
            # written so that no "</script>" or "<" can end it (Jinja's tojson).
            specs = re.findall(r'<script type="application/json" id="spec-[^"]+">(.*?)</script>', text, re.S)
            assert len(tags) == len(loaded) + len(specs), path
            for spec in specs:
                assert "<" not in spec
                json.loads(spec)
    escaped = as_html(SCRIPT)
    assert escaped == "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    run_pages = [t for p, t in pages.items() if "runs" in p.parts and "diverged" in t]
    assert run_pages and escaped in run_pages[0]
    assert escaped in pages[out / "index.html"]  # the board's row head
    plots = pages[out / "plots.html"]
    assert "\\u003cscript\\u003ealert" in plots  # in the Pareto figures' specs, as data
    legends = [p.read_text() for p in (out / "figures").glob("*.svg")]
    assert any("&lt;script&gt;alert" in svg for svg in legends)  # in a static figure's legend, escaped
    assert not any("<script" in svg for svg in legends)


def test_bad_files_are_skipped_with_a_warning_naming_them(built, tmp_path, capsys):
    results, _, problems = built
    assert len(problems) == 2
    assert any("corrupt.json" in p for p in problems) and any("future.json" in p and "schema" in p for p in problems)
    assert main(["--results", str(results), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "warning: skipping" in err and "corrupt.json" in err and "future.json" in err


def test_no_remote_asset_is_referenced(built):
    _, out, _ = built
    texts = built_text(out)
    bundle = texts.pop(out / "assets" / BUNDLE)  # Vega's own code names URLs it could load; the site gives it none
    assert bundle.startswith("// vega-embed") and "bundled by vl-convert-python" in bundle.splitlines()[0]
    for path, text in texts.items():
        if path.parent.name == "schema":  # a JSON Schema names its meta-schema by URI (an identifier, not fetched)
            assert json.loads(text)["$schema"] == "https://json-schema.org/draft/2020-12/schema"
            text = text.replace("https://json-schema.org/draft/2020-12/schema", "")
        # A link a reader may follow (a method's paper, the repository) loads nothing: only whole
        # <a href="https://..."> elements are taken out before looking for a remote asset.
        text = re.sub(r'<a [^>]*href="https://[^"<>]*"[^>]*>[^<]*</a>', "", text)
        assert not re.search(r"https?://|//cdn|@import|url\(", text), path
    specs = re.findall(r'<script type="application/json" id="spec-[^"]+">(.*?)</script>', texts[out / "plots.html"],
                       re.S)
    for spec in specs:
        assert '"url"' not in spec  # every figure's data is inline


def test_failed_runs_are_shown_as_such_not_averaged(built):
    results, _, _ = built
    runs, _ = load_runs(results)
    rows = {r.method: r for r in board_rows(runs)}
    (lin_mqar,) = rows["linear"].task_cells("mqar")
    assert lin_mqar.values() == [0.8] and lin_mqar.spread() is None
    assert lin_mqar.failures() == {"diverged": 1}
    (soft,) = rows["softmax"].task_cells("listops")
    assert soft.mean() == pytest.approx(0.45) and soft.spread() == pytest.approx(math.sqrt(0.005))
    board = (built[1] / "index.html").read_text()
    assert "diverged" in board and "45.0%" in board and "± 7.1" in board


def test_lra_average_needs_all_five_tasks(tmp_path):
    for i, task in enumerate(LRA_TASKS):
        write_record(train_record("softmax", task, 0, 0.1 * (i + 1)), tmp_path)
        if task != "image":
            write_record(train_record("linear", task, 0, 0.5), tmp_path)
    write_record(train_record("softmax", "pathx", 0, 0.99), tmp_path)  # Path-X is not averaged
    runs, _ = load_runs(tmp_path)
    rows = {r.method: r for r in board_rows(runs)}
    assert rows["softmax"].lra_average() == pytest.approx(0.3)
    assert rows["linear"].lra_average() is None


def test_pareto_front_follows_each_metrics_direction():
    points = [(1.0, 0.5), (2.0, 0.4), (2.0, 0.6), (3.0, 0.2), (0.5, 0.6)]
    assert pareto_front(points, "higher", "higher") == [2, 3]  # fast and accurate
    assert pareto_front(points, "lower", "higher") == [4]  # small memory and accurate
    assert pareto_front(points, "lower", "lower") == [4, 0, 1, 3]


def test_crossover_of_power_laws_is_where_they_meet():
    quadratic = {n: 1e-9 * n * n for n in KERNEL_NS}
    linear = {n: 1e-6 * n for n in KERNEL_NS}
    found = curve_crossover(quadratic, linear, "lower")
    assert found["where"] == "within_grid" and found["length"] == pytest.approx(1000.0)
    assert curve_crossover(linear, quadratic, "lower")["where"] == "beyond_grid"  # never better at the longest length
    assert curve_crossover(quadratic, {n: 1e-12 for n in KERNEL_NS}, "lower")["where"] == "below_grid"  # everywhere


def spec_text(figure) -> str:
    return json.dumps(figure.spec, ensure_ascii=False)


def rows_of(figure, layer_mark: str | None = None) -> list[dict]:
    """The data rows of a figure's spec (the whole layer's, or those of a layer with that mark)."""
    if layer_mark is None:
        return figure.spec["data"]["values"]
    return [r for layer in figure.spec["layer"] if layer["mark"]["type"] == layer_mark
            for r in layer.get("data", {}).get("values", [])]


def test_kernel_decode_and_fidelity_plots(built):
    results, out, _ = built
    runs, _ = load_runs(results)
    kernel = sweep_figures(runs, "kernel", "N")
    assert [f.title for f in kernel] == ["kernel: fwd vs N, Test GPU", "kernel: fwd+bwd vs N, Test GPU",
                                         "kernel: peak mem f+b vs N, Test GPU"]
    fwd = kernel[0]
    # SDPA (0.5e-9 N^2, inside linear's record) is the best softmax; linear (1e-6 N) beats it at 2000.
    assert fwd.spec["title"]["subtitle"] == ["linear beats softmax from N≈2000"]
    assert [m["x"] for m in rows_of(fwd, "rule")] == [pytest.approx(2000.0)]
    assert "softmax · sdpa" in fwd.series() and "linear · sdpa" not in fwd.series()
    failed = [layer for layer in fwd.spec["layer"] if layer["mark"].get("shape") == "cross"]  # crosses on the top edge
    assert [(r["series"], r["x"], r["tip"]) for r in failed[0]["data"]["values"]] == [
        ("softmax · naive", 8192, "oom at 8K")]
    assert "fwd_p10_s" not in "".join(f.title for f in kernel)
    # The p10-p90 band of the kernel's times, from the points' own fields.
    sdpa = [r for r in rows_of(fwd) if r["series"] == "softmax · sdpa"]
    assert all(r["lo"] == pytest.approx(0.9 * r["y"]) and r["hi"] == pytest.approx(1.2 * r["y"]) for r in sdpa)
    assert any(layer["mark"]["type"] == "area" for layer in fwd.spec["layer"])
    assert "p10 to p90" in fwd.caption and "lo" not in rows_of(kernel[2])[0]  # memory has no band
    decode = sweep_figures(runs, "decode", "context")
    assert {f.title for f in decode} == {f"decode: {m} vs context, cpu (batch_size={b})"
                                         for m in ("median/token", "state") for b in (1, 8)}
    assert all(f.spec["title"]["subtitle"] == ["linear beats softmax from N≈1000"]
               for f in decode if "median/token" in f.title)
    fidelity = fidelity_figures(runs)
    assert [f.title for f in fidelity] == ["fidelity: denominator err vs d_phi", "fidelity: denominator err vs N",
                                           "fidelity: output err vs d_phi", "fidelity: output err vs N",
                                           "fidelity: attention TV vs d_phi", "fidelity: attention TV vs N"]
    means = sorted({r["y"] for r in rows_of(fidelity[0])})  # of the errors over queries
    assert means == pytest.approx([1 / math.sqrt(d) for d in (256, 64, 16)])
    for figure in kernel + decode + fidelity:  # valid Vega-Lite; the scaling plots zoom and pan
        validate(figure.spec)
        assert {"name": "zoom", "select": {"type": "interval"}, "bind": "scales"}.items() <= next(
            p for p in figure.spec["params"] if p["name"] == "zoom").items()
    plots = (out / "plots.html").read_text()
    pareto = 4  # 2 board points x 2 costs
    assert plots.count('<div class="chart" data-spec=') == len(kernel) + len(decode) + len(fidelity) + pareto
    assert "errors.svg" in plots and "escape.svg" not in plots  # a record cannot point outside its folder
    assert next(out.rglob("errors.svg")).read_text() == "<svg></svg>"
    static = next(out.glob("figures/plot-*-kernel__fwd_vs_N*.svg")).read_text()
    for text in ("softmax · sdpa", "linear · chunk", "linear beats softmax from N≈2000",
                 "kernel: fwd vs N (sequence length), Test GPU"):
        assert f">{text}<" in static, text  # the static figure names every series and the crossover


def svg_texts(svg: str) -> list[str]:
    return [t.text for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text") if t.text]


def test_every_figure_has_a_static_svg_in_its_place(built):
    _, out, _ = built
    for page in ("index.html", "plots.html"):
        html = (out / page).read_text()
        holders = re.findall(r'<div class="chart" data-spec="(spec-[^"]+)"><img src="([^"]+)" alt="([^"]*)" '
                             r'width="(\d+)" height="(\d+)"></div>', html)
        assert len(holders) == html.count('data-spec="') and holders, page
        for spec_id, src, alt, width, height in holders:
            assert f'<script type="application/json" id="{spec_id}">' in html
            svg = (out / src).read_text()
            root = ET.fromstring(svg)
            assert (root.get("width"), root.get("height")) == (width, height)
            marks = root.findall(".//{http://www.w3.org/2000/svg}path") + root.findall(".//{http://www.w3.org/2000/svg}line")
            assert len(marks) > 10 and alt.split(" (static figure")[0] in svg_texts(svg), src  # drawn, titled


def test_log_ticks_are_round_in_the_unit_shown(built):
    _, out, _ = built
    memory = next(out.glob("figures/plot-*-kernel__peak_mem*.svg")).read_text()
    labels = svg_texts(memory)
    byte_ticks = [t for t in labels if re.fullmatch(r"[\d.]+ (B|KiB|MiB|GiB)", t)]
    assert len(byte_ticks) >= 3 and all(re.fullmatch(r"\d+ (B|KiB|MiB|GiB)", t) for t in byte_ticks), byte_ticks
    assert [t for t in labels if re.fullmatch(r"\d+K?", t)][:3] == ["256", "512", "1K"]  # lengths in powers of two
    time_ticks = [t for t in svg_texts(next(out.glob("figures/plot-*-kernel__fwd_vs_N*.svg")).read_text())
                  if re.fullmatch(r"[\d.]+ (ns|µs|ms|s)", t)]
    assert len(time_ticks) >= 3 and all(re.fullmatch(r"(1|10|100) (µs|ms|s)", t) for t in time_ticks), time_ticks


def test_each_kind_schema_is_published_and_checks_records(built, tmp_path):
    results, out, _ = built
    runs_page = (out / "runs.html").read_text()
    records = {run.kind: run.source for run in load_runs(results)[0]}
    assert set(records) == {"train", "kernel", "fidelity", "decode"}
    for kind, source in records.items():
        assert f'href="schema/record-{kind}.json"' in runs_page
        schema_file = out / "schema" / f"record-{kind}.json"
        assert json.loads(schema_file.read_text())["title"] == f"{kind.capitalize()}Record"
        # A submitter's check: the published schema, another tool (check-jsonschema), the raw record.
        good = subprocess.run([sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema_file),
                               str(results / source)], capture_output=True, text=True)
        assert good.returncode == 0, good.stdout + good.stderr
    bad = json.loads((results / records["kernel"]).read_text())
    bad["metrics"]["points"][0]["length"] = "long"  # the swept length must be a number
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    refused = subprocess.run([sys.executable, "-m", "check_jsonschema", "--schemafile",
                              str(out / "schema" / "record-kernel.json"), str(tmp_path / "bad.json")],
                             capture_output=True, text=True)
    assert refused.returncode == 1 and "length" in refused.stdout + refused.stderr


def test_run_page_reproduces_and_links_the_raw_record(built):
    results, out, _ = built
    runs, _ = load_runs(results)
    run = next(r for r in runs if r.kind == "train" and r.method == "linear" and r.status == "ok")
    command = reproduce_command(run)
    # The groups by name, then every recorded value (tests/test_reproduce.py composes it back).
    assert command.startswith(f"python -m suite mode=train method=linear task={run.task} budget=cpu ")
    assert command.endswith(f"seed={run.seed} device=cpu") and "budget.lr=" in command
    page = (out / run.page).read_text()
    assert html.escape(command) in page and "git checkout abc123" in page
    raw = out / "records" / run.source
    assert f'href="../records/{run.source.as_posix()}"' in page and json.loads(raw.read_text()) == run.record
    assert len(json.loads((out / "records.json").read_text())) == len(runs)
    csv_lines = (out / "records.csv").read_text().splitlines()
    assert len(csv_lines) == len(runs) + 1 and csv_lines[0].startswith("run_id,kind,status")


def test_smoke_runs_show_in_a_section_of_their_own(tmp_path, capsys):
    """Issue 46: budget=smoke runs (the README's outside-method example uses that budget) were left off
    the site in silence, under "No train records yet". They are listed, marked smoke, off the tables."""
    results = tmp_path / "results"
    write_record(train_record("softmax", "mqar", 0, 0.25, budget="smoke"), results)
    write_record(train_record("linear", "mqar", 0, 0.5, budget="smoke"), results)
    assert main(["--results", str(results), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "index.html").read_text()
    assert "No train records at a learning budget yet (2 smoke runs below)" in page
    section = page[page.index('<h2 id="smoke">Smoke runs</h2>'):]
    assert "<td>softmax</td><td>mqar</td>" in section and "<td>linear</td><td>mqar</td>" in section
    assert "25.0%" in section and "50.0%" in section
    write_record(train_record("softmax", "listops", 0, 0.4), results)  # a learning budget: the board's table
    assert main(["--results", str(results), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "index.html").read_text()
    assert "No train records" not in page
    tables, smoke = page.split('<h2 id="smoke">Smoke runs</h2>')
    assert "listops" in tables and "25.0%" not in tables and "50.0%" not in tables  # smoke: never in the tables
    assert smoke.count("status-ok") == 2 and "listops" not in smoke


def test_empty_missing_and_foreign_folders(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["--results", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) == 0
    assert "No train records yet" in (tmp_path / "out" / "index.html").read_text()
    assert "the board is empty" in capsys.readouterr().err
    assert main(["--results", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(SiteError, match="refusing to overwrite"):
        build_site(tmp_path / "empty", tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_reference_numbers_match_lra_table_1():
    assert reference.accuracy("softmax", "text") == 64.27
    assert reference.accuracy("favor", "pathfinder") == 77.05
    assert reference.accuracy("Linear Transformer", "listops") == 16.13
    assert reference.accuracy("Transformer", "pathx") is None  # FAIL
    # The published Avg column (over the five tasks other than Path-X); Sinkhorn's is inconsistent.
    published = {"Transformer": 54.39, "Local Attention": 46.06, "Sparse Transformer": 51.24, "Longformer": 53.46,
                 "Linformer": 51.36, "Reformer": 50.67, "Synthesizer": 52.88, "BigBird": 55.01,
                 "Linear Transformer": 50.55, "Performer": 51.41}
    for model, avg in published.items():
        assert reference.average(model) == pytest.approx(avg, abs=0.006), model
    assert len(reference.RESULTS) == 11 * 6
    with pytest.raises(KeyError, match="Mamba"):
        reference.accuracy("Mamba", "text")


def test_a_plots_crossover_marker_is_where_the_method_stays_better_for_good():
    reference = {1024: 1.0, 2048: 2.0, 4096: 4.0}  # seconds (lower is better)
    other = {1024: 4.0, 2048: 3.0, 4096: 2.0}
    fraction = math.log(1.5) / (math.log(1.5) - math.log(0.5))  # where the log ratio crosses 0
    inverse = {x: 1 / v for x, v in reference.items()}, {x: 1 / v for x, v in other.items()}  # a rate
    for found in (curve_crossover(reference, other, "lower"), curve_crossover(*inverse, "higher")):
        assert found["where"] == "within_grid" and found["length"] == pytest.approx(2048 * 2**fraction)
    assert curve_crossover(reference, {x: v / 2 for x, v in reference.items()}, "lower")["where"] == "below_grid"
    assert curve_crossover(reference, {x: v * 2 for x, v in reference.items()}, "lower")["where"] == "beyond_grid"
