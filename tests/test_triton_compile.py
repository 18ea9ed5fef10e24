"""Every Triton kernel compiled for the GPUs the suite targets, on the CPU (scripts/triton_compile.py):
it compiles, fits the target's shared memory per block and spills no register.

The compiles run in a child process: this one imported triton under TRITON_INTERPRET=1 (conftest.py),
which swaps the kernels for the interpreter. Triton's cache (~/.triton/cache, or TRITON_CACHE_DIR) keeps
the compiled kernels and their ptxas figures, so a second run compiles nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "triton_compile.py"
from scripts import triton_compile  # noqa: E402  (after the importorskip: the script imports triton)

# The script drives Triton's own launch binder (triton/runtime/jit.py), which is not a public API.
pytestmark = pytest.mark.skipif(not triton.__version__.startswith("3.9."),
                                reason=f"the compile check reads triton 3.9's launch code, not {triton.__version__}")


def compile_check(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Run the script without the interpreter; its exit and its JSON rows."""
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    rows = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--json", str(rows), *args], cwd=REPO,
                          env=environment, capture_output=True, text=True, timeout=1800)
    return done, json.loads(rows.read_text()) if rows.exists() else None


def check_rows(done: subprocess.CompletedProcess, found: dict, targets: set[str]) -> None:
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert found["uncovered"] == []
    rows = found["results"]
    assert rows and all(row["compiled"] and not row["problems"] for row in rows)
    for row in rows:
        assert row["shared"] <= row["shared_limit"], row
        assert row["spill_stores"] == row["spill_loads"] == 0 or row["spills_without_flag"] == 0, row
    # Every kernel of both Triton packages, on every target asked for.
    kernels = {row["kernel"] for row in rows}
    assert {"chunk_states_kernel", "attend_over_features_kernel", "attend_over_values_kernel", "_intra_forward",
            "_intra_backward", "_inter_forward", "_inter_backward"} <= kernels
    assert {(row["kernel"], row["target"]) for row in rows} == {(k, t) for k in kernels for t in targets}


@pytest.mark.slow
def test_the_representative_subset_compiles_fits_and_does_not_spill(tmp_path):
    done, found = compile_check(tmp_path)
    check_rows(done, found, {f"sm_{c}" for c in triton_compile.SUBSET_TARGETS})


@pytest.mark.slow
def test_every_variant_the_configs_launch_compiles_fits_and_does_not_spill(tmp_path):
    done, found = compile_check(tmp_path, "--full")
    check_rows(done, found, {t.name for t in triton_compile.TARGETS})


def test_a_variant_over_the_shared_memory_limit_is_reported(tmp_path):
    # bfloat16 tiles of 128 (block_size overrides the launch table): the reverse, weighted states of
    # the backward need more shared memory than an A100 gives a block; the forward's fit.
    done, found = compile_check(tmp_path, "--core", "1,1,128,128,128", "--dtype", "bfloat16", "--block-size", "128",
                                "--kernels", "chunk_states_kernel", "--targets", "80")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    failed = [row for row in found["results"] if row["problems"]]
    assert len(failed) == 1 and "REVERSE=True WEIGHTED=True" in failed[0]["configuration"]
    assert re.fullmatch(r"needs [\d,]+ B of shared memory, more than the 166,912 B a block gets on sm_80",
                        failed[0]["problems"][0])
    assert failed[0]["problems"][0] in done.stdout


def test_spills_and_a_register_file_overrun_are_reported():
    row = triton_compile.Result("k", "sm_90", "", [], compiled=True, shared=1024, shared_limit=232_448,
                                registers=255, spill_stores=0, spill_loads=0, threads=256)
    assert triton_compile.problems(row) == []
    row.spill_stores, row.spill_loads, row.spills_without_flag = 8, 4, 12
    assert triton_compile.problems(row) == ["spills 8 B stored, 4 B loaded"] and row.accepted is None
    # Spills that ptxas makes only with Triton's --regAllocOptLevel=2 are accepted, with the reason.
    row.spills_without_flag = 0
    assert triton_compile.problems(row) == [] and "none without ptxas --regAllocOptLevel=2" in row.accepted
    row.spill_stores = row.spill_loads = 0
    row.threads = 512
    assert triton_compile.problems(row) == ["255 registers x 512 threads exceed the 65,536 of a block"]
