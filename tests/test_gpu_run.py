"""The one-shot GPU script (scripts/gpu_run.sh): its dry run on the CPU goes through every stage
(kernel checks interpreted, timings, training through the suite) and writes what a GPU run writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import methods

REPO = Path(__file__).resolve().parents[1]


def dry_run_records_in_results() -> set[str]:
    """Records under results/ of the budgets a dry run uses (smoke training, dry_run kernel grid);
    a board sweep running beside the tests may add records of its own there."""
    found = set()
    for path in (REPO / "results").rglob("*.json"):
        try:
            budget = json.loads(path.read_text())["config"]["budget"]["name"]
        except (ValueError, KeyError, TypeError):
            continue
        if budget in ("smoke", "dry_run"):
            found.add(str(path))
    return found


@pytest.mark.slow  # 10-16 s: .ci/run runs it
def test_dry_run_checks_times_trains_and_summarises(tmp_path):
    # No --results-dir: a dry run's records go under its --out folder and results/ stays as it was.
    out, results = tmp_path / "run", tmp_path / "run" / "results"
    environment = {**os.environ, "PYTHON": sys.executable, "SUITE_DATA_DIR": str(tmp_path / "data")}
    before = dry_run_records_in_results()
    done = subprocess.run(
        ["bash", "scripts/gpu_run.sh", "--dry-run", "--out", str(out)],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert dry_run_records_in_results() == before
    report = json.loads((out / "gpu_run.json").read_text())
    assert report["dry_run"] and report["properties"]["name"] == "cpu" and report["env"]["torch"]
    # Every Triton method checked against its naive path, and the shared core, all passing.
    checked = {row["case"].split()[0] for row in report["checks"]}
    assert checked == {n for n in methods.available() if "triton" in methods.get(n).impls} | {"core"}
    assert all(row["ok"] for row in report["checks"])
    # Timed through the suite's kernel sweep: each method's CPU paths and SDPA; Triton and fla
    # skipped with their reasons; one kind=kernel record per method.
    timed = {(r["method"], r["impl"]): r for r in report["timings"]}
    for name in methods.available():
        assert timed[(name, "sdpa")]["status"] == "ok" and timed[(name, "sdpa")]["fwdbwd_median_s"] > 0
    assert timed[("linear", "chunk")]["fwdbwd_flops"] > 0
    assert "CUDA" in timed[("linear", "fla.chunk_linear_attn")]["reason"]
    # Trained through the suite: one kind=train record per method in the results folder given.
    assert [row["status"] for row in report["training"]] == ["ok"] * len(methods.available())
    for kind in ("kernel", "train"):
        assert len(list((results / kind).rglob("*.json"))) == len(methods.available()), kind
    summary = (out / "summary.txt").read_text()
    for name in methods.available():
        assert re.search(rf"^{name}\s", summary, re.MULTILINE), summary
    assert summary in done.stdout


def test_the_bundle_holds_every_dependency_the_suite_declares():
    """The wheels built for the GPU host cover pyproject's dependencies (torch is the host's own)."""
    script = (REPO / "scripts" / "gpu_run.sh").read_text()
    bundle = {re.split(r"[=<>]", item)[0].lower().replace("_", "-")
              for item in re.findall(r'"([A-Za-z][^"]*)"', script.split("REQUIREMENTS=(")[1].split(")")[0])}
    pyproject = (REPO / "pyproject.toml").read_text()
    declared = pyproject.split("dependencies = [")[1].split("]")[0]
    names = {re.split(r"[=<>\s]", line.strip().strip('",'))[0].lower().replace("_", "-")
             for line in declared.splitlines() if line.strip().startswith('"')}
    assert names - {"torch"} <= bundle, names - {"torch"} - bundle
    assert "fla-core" in bundle
