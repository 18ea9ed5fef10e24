"""The kernel benchmark of every method on one GPU: conf/mode/kernel.yaml's grids, through the suite.

    python scripts/gpu_kernel_bench.py                     # every method, the paper grid, records under results/
    python scripts/gpu_kernel_bench.py --methods linear    # a subset
    python scripts/gpu_kernel_bench.py --grid gpu_run      # the one-shot run's grid: N = 1K..32K, causal, bf16
    python scripts/gpu_kernel_bench.py --smoke             # the smoke grid on the CPU (checks the script)

Writes one kind=kernel record per method (with the GPU, driver and library versions in ``env`` and
the device's properties in ``metrics``) and prints each method's table: each implementation of the
method beside SDPA softmax and flash-linear-attention's kernels, CUDA-event timings with the L2
cache flushed before each call (suite/modes/measure.py). SDPA is pinned to its flash backend
on CUDA. Needs only torch (triton and fla for their implementations; PyYAML to read the grids, else
the copies kept here). Exits 0 with a message when there is no CUDA.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

import methods  # noqa: E402
from suite.__main__ import CONF_DIR  # noqa: E402

# scripts/gpu_run.sh's grid (a few minutes for every method on an H100-class GPU): the lengths
# of the issue, one head size, the training dtype, the causal form a language model runs.
GPU_RUN_GRID = {
    "lengths": [1024, 2048, 4096, 8192, 16384, 32768], "batch": 1, "heads": 8, "head_dims": [64],
    "value_dim": None, "dtypes": ["bfloat16"], "causal": [True], "impls": ["naive", "chunk", "triton", "sdpa"],
    "peers": ["sdpa", "fla"], "warmup": 2, "repeats": 5, "point_budget_s": 0.1, "time_limit_s": 1.0,
    "max_length": {"naive": 8192}, "matmul_size": 8192, "cpu_threads": None,
}
# Its dry run on the CPU: every stage and peer, tiny.
DRY_RUN_GRID = {
    **GPU_RUN_GRID, "lengths": [64, 128], "heads": 2, "head_dims": [16], "dtypes": ["float32"],
    "impls": ["chunk", "triton", "sdpa"], "warmup": 1, "repeats": 3, "point_budget_s": 0.05, "matmul_size": 256,
    "cpu_threads": 1,
}
EXTRA_GRIDS = {"gpu_run": GPU_RUN_GRID, "dry_run": DRY_RUN_GRID}


def load_yaml(path: Path) -> dict:
    """The parsed file (PyYAML comes with omegaconf, which the suite needs anyway)."""
    import yaml

    return yaml.safe_load(path.read_text())


def grids() -> dict:
    """The grids of conf/mode/kernel.yaml and this script's own."""
    return {**load_yaml(CONF_DIR / "mode" / "kernel.yaml")["grids"], **EXTRA_GRIDS}


def method_block(name: str) -> dict:
    """The method's config as the suite runs it (made from its class: suite/groups.py)."""
    import methods
    from suite.groups import method_config

    return method_config(methods.get(name))


def flash_only(device: str):
    """SDPA pinned to its flash backend on CUDA (the peer the issue names)."""
    if device != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION])


def run_method(name: str, grid: str, device: str, results_dir: str) -> tuple[str, Path]:
    """One kind=kernel record of ``name`` on ``grid``: (status, record path)."""
    from suite.run import run

    config = {
        "mode": {"name": "kernel", "grids": grids()}, "budget": {"name": grid},
        "method": method_block(name), "device": device, "seed": 0, "results_dir": results_dir,
        "task": {"name": "attention_op"}, "force": True,
    }
    with flash_only(device):
        path, outcome = run(config)
    return outcome.status, path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=list(methods.available()), choices=methods.available())
    parser.add_argument("--results-dir", default=str(REPO / "results"))
    parser.add_argument("--grid", default="paper", help="a grid of conf/mode/kernel.yaml, or gpu_run")
    parser.add_argument("--smoke", action="store_true", help="the smoke grid on the CPU: checks this script")
    args = parser.parse_args()
    if not args.smoke and not torch.cuda.is_available():
        print("no CUDA: nothing to run here (this script benchmarks the kernels on a GPU; "
              "`python -m suite mode=kernel method=... budget=small` runs the CPU grid)")
        return 0

    grid, device = ("smoke", "cpu") if args.smoke else (args.grid, "cuda")
    started, written = time.perf_counter(), []
    for name in args.methods:
        status, path = run_method(name, grid, device, args.results_dir)
        written.append((name, status, path))
        print(flush=True)
    print(f"{len(written)} methods in {time.perf_counter() - started:.0f} s:")
    for name, status, path in written:
        print(f"  {name:<10} {status:<12} {path}")
    return 0 if all(status == "ok" for _, status, _ in written) else 1


if __name__ == "__main__":
    sys.exit(main())
