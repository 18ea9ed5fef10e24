"""The kernel benchmark of every method on one GPU: conf/mode/kernel.yaml's paper grid.

    python scripts/gpu_kernel_bench.py                     # all five methods, records under results/
    python scripts/gpu_kernel_bench.py --methods linear    # a subset
    python scripts/gpu_kernel_bench.py --smoke             # the smoke grid on the CPU (checks the script)

Writes one kind=kernel record per method (with the GPU, driver and library versions in ``env`` and
the device's properties in ``metrics``) and prints each method's table. Needs only torch (triton
and fla for their implementations; PyYAML to read the grid, else the copy in suite/kernel). Exits 0
with a message when there is no CUDA.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

METHODS = ("softmax", "linear", "favor", "taylor", "loglinear")


def load_yaml(path: Path) -> dict | None:
    """The parsed file, or None where PyYAML is not installed."""
    try:
        import yaml
    except ImportError:
        return None
    return yaml.safe_load(path.read_text())


def grids() -> dict:
    """The grids of conf/mode/kernel.yaml; without PyYAML, the paper grid kept in suite/kernel."""
    from suite.modes.kernel.job import PAPER_GRID

    mode = load_yaml(REPO / "conf" / "mode" / "kernel.yaml")
    return mode["grids"] if mode else {"paper": PAPER_GRID}


def method_block(name: str) -> dict:
    """conf/method/<name>.yaml, or the method's defaults where PyYAML is absent."""
    block = load_yaml(REPO / "conf" / "method" / f"{name}.yaml")
    return block or {"name": name, "impl": "auto", "options": {}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--results-dir", default=str(REPO / "results"))
    parser.add_argument("--smoke", action="store_true", help="the smoke grid on the CPU: checks this script")
    args = parser.parse_args()
    if not args.smoke and not torch.cuda.is_available():
        print("no CUDA: nothing to run here (this script benchmarks the kernels on a GPU; "
              "`python -m suite mode=kernel method=... budget=small` runs the CPU grid)")
        return 0

    from suite.run import run

    budget, device = ("smoke", "cpu") if args.smoke else ("paper", "cuda")
    started, written = time.perf_counter(), []
    for name in args.methods:
        config = {
            "mode": {"name": "kernel", "grids": grids()}, "budget": {"name": budget},
            "method": method_block(name), "device": device, "seed": 0, "results_dir": args.results_dir,
            "task": {"name": "attention_op"}, "force": True,
        }
        path, outcome = run(config)
        written.append((name, outcome.status, path))
        print(flush=True)
    print(f"{len(written)} methods in {time.perf_counter() - started:.0f} s:")
    for name, status, path in written:
        print(f"  {name:<10} {status:<12} {path}")
    return 0 if all(status == "ok" for _, status, _ in written) else 1


if __name__ == "__main__":
    sys.exit(main())
