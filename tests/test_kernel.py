"""mode=kernel: records with time and memory per length, failures kept per point, the derived
figures (FLOP model, slopes, crossovers) on synthetic inputs, and no Hydra/wandb/datasets needed."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from suite import record_store, scaling
from suite.config import validate
from suite.errors import ConfigError
from suite.modes import measure, run_schemas
from suite.modes.kernel import implementations, sweep
from suite.run import run

REPO = Path(__file__).resolve().parent.parent
PAPER_GRID = yaml.safe_load((REPO / "conf/mode/kernel.yaml").read_text())["grids"]["paper"]
SMOKE_LENGTHS = [64, 128, 256]


def kernel_config(make_config, *overrides: str) -> dict:
    return make_config("mode=kernel", "device=cpu", *overrides)


def points_of(record: dict, impl: str, causal: bool = True) -> list[dict]:
    return [p for p in record["metrics"]["points"] if p["impl"] == impl and p["causal"] == causal]


def test_smoke_record_has_time_and_memory_per_length(make_config, capsys):
    path, outcome = run(kernel_config(make_config, "method=linear"))
    record = record_store.read_record(path)
    assert outcome.status == "ok" and record["kind"] == "kernel" and record["status"] == "ok"
    assert record["task"]["name"] == "attention_op" and record["task"]["lengths"] == SMOKE_LENGTHS
    chunk = points_of(record, "chunk")
    assert [p["length"] for p in chunk] == SMOKE_LENGTHS
    for point in chunk:
        assert point["status"] == "ok"
        assert 0 < point["fwd_p10_s"] <= point["fwd_median_s"] <= point["fwd_p90_s"]
        assert point["fwdbwd_median_s"] > 0 and point["fwdbwd_repeats"] >= 3
        assert point["fwdbwd_peak_memory_bytes"] >= 0
        assert point["fwdbwd_flops"] > point["fwd_flops"] > 0  # the counts: test_points_carry_the_flops_...
        assert point["fwdbwd_matmul_fraction"] == pytest.approx(
            point["fwdbwd_flops_per_s"] / record["metrics"]["matmul_reference"]["float32"]["flops_per_s"])
    matmul = record["metrics"]["matmul_reference"]["float32"]
    assert len(matmul["measured_flops_per_s"]) == 2 and matmul["flops_per_s"] == max(matmul["measured_flops_per_s"])
    # The peer reference, with the backend PyTorch chose for it.
    assert all(p["status"] == "ok" and p["sdpa_backend"] for p in points_of(record, "sdpa"))
    # Absent or unusable implementations are points skipped with a reason, not missing.
    for impl in ("triton", "fla.chunk_linear_attn"):
        assert {p["status"] for p in points_of(record, impl)} == {"skipped"}
        assert all(p["reason"] for p in points_of(record, impl))
    naive = {p["length"]: p for p in points_of(record, "naive")}
    assert naive[128]["status"] == "ok" and naive[256]["status"] == "skipped"
    assert "max_length 128" in naive[256]["reason"]
    summary = {(row["impl"], row["causal"]): row for row in record["metrics"]["summary"]}
    chunk_row = summary[("chunk", True)]
    assert chunk_row["longest_length"] == 256 and chunk_row["slope_fwdbwd"] is not None
    assert chunk_row["crossover_fwd"]["where"] in ("within_grid", "below_grid", "beyond_grid")
    assert record["metrics"]["load_average_before"] is not None
    out = capsys.readouterr().out
    assert "x-over f+b" in out and "of matmul" in out and f"record: {path}" in out


def test_an_oom_at_one_length_is_recorded_and_the_sweep_goes_on(make_config, monkeypatch):
    real = implementations._call_impl

    def short_of_memory(module, forward_name, q, k, v, causal):
        if forward_name == "_forward_chunk" and q.shape[2] == 128:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
        return real(module, forward_name, q, k, v, causal)

    monkeypatch.setattr(implementations, "_call_impl", short_of_memory)
    path, outcome = run(kernel_config(make_config, "method=linear"))
    record = record_store.read_record(path)
    assert outcome.status == "ok"
    for causal in (True, False):
        chunk = {p["length"]: p for p in points_of(record, "chunk", causal)}
        assert chunk[64]["status"] == "ok"
        assert chunk[128]["status"] == "oom" and "out of memory" in chunk[128]["reason"]
        assert chunk[256]["status"] == "skipped" and "ran out of memory at N=128" in chunk[256]["reason"]
        # Other implementations are measured at every length.
        assert all(p["status"] == "ok" for p in points_of(record, "sdpa", causal))


def test_a_failing_point_is_an_error_point_not_a_crash():
    failing = implementations.Implementation(name="broken", source="method", flops=lambda *shape: (1.0, 2.0),
                                             run=lambda q, k, v, causal: 1 / 0)
    grid = {**PAPER_GRID, "lengths": [16, 32], "max_length": {}, "warmup": 1, "repeats": 1}
    shape = {"batch": 1, "heads": 1, "head_dim": 8, "query_key_dim": 8, "value_dim": 8, "dtype": "float32",
             "causal": True}
    points = sweep.measure_series(failing, shape, grid, torch.device("cpu"), 0, None)
    assert [p["status"] for p in points] == ["error", "error"]
    assert points[0]["reason"].startswith("ZeroDivisionError")


def test_host_allocation_failures_count_as_oom():
    from suite.job import is_out_of_memory  # the one test of out-of-memory every job uses

    assert is_out_of_memory(MemoryError())
    assert is_out_of_memory(
        RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))


def test_absent_fla_is_skipped_with_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "fla", None)  # import fla -> ImportError
    monkeypatch.setitem(sys.modules, "fla.ops.linear_attn", None)
    module = kernel_module("linear")
    found = implementations.fla_implementations(module, torch.device("cuda"))
    assert [f.name for f in found] == ["fla.chunk_linear_attn"]
    assert "not importable" in found[0].skip_reason and "[gpu]" in found[0].skip_reason
    assert found[0].unusable(causal=True) == found[0].skip_reason
    import methods

    taylor = methods.build("taylor", head_dim=64)
    based = {f.name: f.skip_reason for f in implementations.fla_implementations(taylor, torch.device("cuda"))}
    assert "not importable" in based["fla.parallel_based"]
    assert based["fla.fused_chunk_based"] == "fla.fused_chunk_based takes q/k dims up to 16, this module's are 64"


def kernel_module(name: str):
    import methods

    return methods.build(name, head_dim=16)


def test_peers_sdpa_is_the_reference_and_softmax_does_not_list_it_twice():
    cpu = torch.device("cpu")
    linear_peers = implementations.peer_implementations(kernel_module("linear"), ["sdpa", "fla"], cpu)
    assert [p.name for p in linear_peers] == ["sdpa", "fla.chunk_linear_attn"]
    assert linear_peers[1].unusable(causal=False)  # fla: not on the CPU, and causal only
    softmax = kernel_module("softmax")
    names = [i.name for i in implementations.method_implementations(softmax, ["naive", "chunk", "sdpa"], cpu)
             + implementations.peer_implementations(softmax, ["sdpa", "fla"], cpu)]
    assert names == ["naive", "sdpa"]


def test_loglog_slope_recovers_power_laws():
    lengths = [1024, 2048, 4096, 8192]
    for power in (1.0, 1.5, 2.0):
        assert scaling.loglog_slope(lengths, [3e-6 * n**power for n in lengths]) == pytest.approx(power)
    # Only the lengths inside the range: quadratic below 2K, linear from 2K to 8K.
    times = [1.0, 4.0, 8.0, 16.0, 32.0]
    assert scaling.slope_between([512, 1024, 2048, 4096, 8192], times, 2048, 8192) == pytest.approx(1.0)
    assert scaling.slope_between([512, 1024], [1.0, 4.0], 2048, 8192) is None
    # Not both ends of the range: no slope "from 2K to 8K" of a series that stopped at 4K.
    assert scaling.slope_between([2048, 4096], [1.0, 2.0], 2048, 8192) is None


def test_crossover_is_interpolated_in_log_space():
    lengths = [1024, 2048, 4096, 8192]
    reference = [1.0, 4.0, 16.0, 64.0]  # quadratic
    # Ratio 4 at 1024, 2 at 2048, 1/2 at 4096: log ratio falls linearly, crossing 0 at 2048 * sqrt(2)... in
    # log2 units: 1 at 2048 and -1 at 4096, so the crossover is the geometric mean of the two.
    times = [4.0, 8.0, 8.0, 16.0]
    cross = scaling.crossover(lengths, times, reference)
    assert cross["where"] == "within_grid" and cross["length"] == pytest.approx(math.sqrt(2048 * 4096))
    assert scaling.crossover(lengths, [0.5, 1, 2, 4], reference) == {"length": 1024.0, "where": "below_grid"}
    assert scaling.crossover(lengths, [2, 8, 32, 128], reference)["where"] == "beyond_grid"
    # Faster at first, slower, then faster for good: the crossing that lasts counts.
    dips = scaling.crossover(lengths, [0.5, 8.0, 8.0, 16.0], reference)
    assert dips["where"] == "within_grid" and 2048 < dips["length"] < 4096
    assert scaling.crossover([], [], [])["where"] == "no_common_lengths"


def test_points_carry_the_flops_their_method_declares_and_sdpa_counts_as_softmax():
    import methods

    module = kernel_module("linear")
    found = {i.name: i for i in implementations.method_implementations(module, ["naive", "chunk"], torch.device("cpu"))
             + implementations.peer_implementations(module, ["sdpa"], torch.device("cpu"))}
    shape = {"batch": 2, "heads": 3, "head_dim": module.head_dim, "query_key_dim": module.query_key_dim,
             "value_dim": module.head_dim, "dtype": "float32", "causal": True}
    grid = {**PAPER_GRID, "lengths": [48], "max_length": {}, "warmup": 1, "repeats": 1}
    softmax = methods.build("softmax", head_dim=module.head_dim)
    for name, counted_by, impl in (("chunk", module, "chunk"), ("naive", module, "naive"), ("sdpa", softmax, "sdpa")):
        [point] = sweep.measure_series(found[name], shape, grid, torch.device("cpu"), 0, None)
        fwd = counted_by.forward_flops(2, 3, 48, module.head_dim, True, impl=impl)
        assert point["fwd_flops"] == fwd > 0, name
        assert point["fwdbwd_flops"] == fwd + counted_by.backward_flops(2, 3, 48, module.head_dim, True, impl=impl)

def test_cpu_peak_memory_sees_a_large_allocation():
    size = 64 * 2**20
    memory, source = measure.call_peak_memory(lambda: torch.ones(size // 4).add_(1), torch.device("cpu"))
    assert source.startswith("process_rss")
    assert 0.9 * size <= memory <= 3 * size


def test_spread_is_median_and_deciles():
    timing = measure.spread([float(x) for x in range(1, 12)])
    assert timing == {"median_s": 6.0, "p10_s": 2.0, "p90_s": 10.0, "repeats": 11}


def test_every_grid_of_the_yaml_is_valid(make_config):
    grids = yaml.safe_load((REPO / "conf/mode/kernel.yaml").read_text())["grids"]
    config = kernel_config(make_config)
    assert config["mode"]["grids"] == grids
    validate(config, run_schemas())  # the schema checks every grid of the mode
    assert max(grids["small"]["lengths"]) >= 16384 and max(grids["paper"]["lengths"]) >= 65536


def test_bad_grid_values_are_one_clear_error(make_config):
    config = kernel_config(make_config, "method=linear")
    config["mode"]["grids"]["smoke"]["dtypes"] = ["float8"]
    with pytest.raises(ConfigError, match=r"mode.grids.smoke.dtypes must be a non-empty list from float32, "
                                          r"bfloat16, float16, got \['float8'\]"):
        validate(config, run_schemas())
    config["budget"]["name"] = "huge"
    with pytest.raises(ConfigError, match="no grid for budget 'huge'; valid budgets: smoke, small, paper"):
        validate(config, run_schemas())


BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"hydra", "omegaconf", "wandb", "datasets", "yaml", "tqdm"}:
            raise ImportError(f"blocked for this test: {name}")
sys.meta_path.insert(0, Block())
"""


def test_the_kernel_job_runs_without_hydra_wandb_datasets_or_yaml(tmp_path):
    script = BLOCKER + f"""
import suite.modes.kernel.job, suite.run, suite.records, suite.env, suite.metrics, methods
from suite.run import run
grid = {{**{PAPER_GRID!r}, "lengths": [32], "head_dims": [8], "dtypes": ["float32"],
         "causal": [True], "warmup": 1, "repeats": 1, "matmul_size": 64, "cpu_threads": 1}}
config = {{"mode": {{"name": "kernel", "grids": {{"paper": grid}}}}, "budget": {{"name": "paper"}},
          "method": {{"name": "linear", "impl": "auto", "options": {{}}}}, "device": "cpu", "seed": 0,
          "results_dir": {str(tmp_path)!r}, "task": {{"name": "attention_op"}}}}
path, outcome = run(config)
assert outcome.status == "ok", outcome
print("kernel without hydra: ok")
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kernel without hydra: ok" in done.stdout


def test_cli_smoke_run_writes_a_kernel_record(tmp_path, data_dir):
    env = {**os.environ, "SUITE_DATA_DIR": str(data_dir), "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}
    done = subprocess.run(
        [sys.executable, "-m", "suite", "mode=kernel", "method=taylor", "budget=smoke", "device=cpu",
         f"results_dir={tmp_path / 'results'}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    written = list((tmp_path / "results" / "kernel" / "attention_op" / "taylor").glob("*.json"))
    assert len(written) == 1
    record = record_store.read_record(written[0])
    assert record["status"] == "ok" and {p["length"] for p in record["metrics"]["points"]} == set(SMOKE_LENGTHS)
    assert "fla.parallel_based" in done.stdout and f"record: {written[0]}" in done.stdout


def test_gpu_script_without_cuda_exits_cleanly_with_a_message(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no CUDA, also on a GPU host
    done = subprocess.run([sys.executable, "scripts/gpu_kernel_bench.py", "--results-dir", str(tmp_path)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "no CUDA" in done.stdout and not any(tmp_path.iterdir())


def test_gpu_script_smoke_writes_one_record_per_method_on_the_cpu(tmp_path):
    done = subprocess.run([sys.executable, "scripts/gpu_kernel_bench.py", "--smoke", "--methods", "softmax", "linear",
                           "--results-dir", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    written = sorted(p.parent.name for p in (tmp_path / "kernel" / "attention_op").rglob("*.json"))
    assert written == ["linear", "softmax"]
    assert "x-over f+b" in done.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_timing_flushes_l2_and_times_each_call_with_events():
    device = torch.device("cuda")
    x = torch.randn(1024, 1024, device=device)
    times = measure.time_calls(lambda: x @ x, device, 5)
    assert len(times) == 5 and all(0 < t < 1 for t in times)
    # A call that sleeps about a millisecond on the GPU measures about that long, the flush excluded.
    slept = measure.time_calls(lambda: torch.cuda._sleep(2_000_000), device, 3)
    assert all(t > 2e-4 for t in slept)
