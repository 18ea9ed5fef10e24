"""The one-shot GPU run: kernel checks, timings and a short bf16 training of every method, in minutes.

    scripts/gpu_run.sh --wheels DIR          # on the GPU host (installs from DIR first, see there)
    python scripts/gpu_run.py                # the same without installing
    python scripts/gpu_run.py --dry-run      # tiny shapes on the CPU, Triton interpreted: checks the script

Stages, each given a share of ``--budget-s`` (default 8 minutes; time one stage leaves is the next one's):

1. checks (scripts/check_triton_gpu.py): every Triton kernel against the naive path, forward and
   backward, float32 and bfloat16, causal and not, on awkward shapes (N = 1, 777, 1000, D = 40).
2. timings (scripts/gpu_kernel_bench.py, its gpu_run grid): the suite's kernel sweep of each
   method's implementations against SDPA's flash backend and flash-linear-attention, causal fwd
   and fwd+bwd, N = 1K..32K in bf16, CUDA events with the L2 flushed before each call; one
   kind=kernel record per method (with the GPU's properties) in ``--results-dir``.
3. training: MQAR at the CPU board's first point (model=hybrid, sequence 64, 4 pairs, batch 64), a
   few hundred bf16-autocast steps per method through the suite itself (``suite.run``), whose
   kind=train records go to ``--results-dir``.

Writes ``<out>/gpu_run.json`` (the GPU's properties, the environment, every check, timed point and
training run, with the paths of the records) and ``<out>/summary.txt``, and prints that summary
table. Exits 1 when a check fails or a stage errs, 0 otherwise; without CUDA (and without
--dry-run) it says so and exits 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

SHARES = {"checks": 0.35, "timings": 0.35, "training": 0.30}
TRAIN_STEPS = 400
DRY_TRAIN_STEPS = 2


def device_properties(device) -> dict:
    """What bounds a kernel on this device: memory, compute capability, multiprocessors, L2."""
    import torch

    if device.type != "cuda":
        return {"name": "cpu", "threads": torch.get_num_threads()}
    props = torch.cuda.get_device_properties(device)
    return {"name": props.name, "total_memory_bytes": props.total_memory, "capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count, "l2_cache_bytes": getattr(props, "L2_cache_size", None),
            "bf16_supported": torch.cuda.is_bf16_supported()}


def run_checks(device: str, dry_run: bool, deadline: float) -> list[dict]:
    """Every kernel check of check_triton_gpu.py that fits before ``deadline``."""
    import check_triton_gpu as checks
    import torch

    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # the references are exact float32
    rows = []
    for case in checks.cases(device, smoke=dry_run, names=checks.triton_methods(), quick=dry_run):
        if time.perf_counter() > deadline:
            rows.append({"case": case.name, "ok": None, "error": "not run: out of time for this stage"})
            continue
        rows.append(checks.evaluate(case))
        print(checks.format_row(rows[-1]), flush=True)
    return rows


def run_timings(device: str, dry_run: bool, deadline: float, results_dir: Path) -> list[dict]:
    """The suite's kernel sweep of every method on gpu_kernel_bench.py's run grid (one kind=kernel
    record each, in ``results_dir``); one row per measured point."""
    import gpu_kernel_bench

    import methods
    from suite.record_store import read_record

    rows = []
    for method in methods.available():
        if time.perf_counter() > deadline:
            rows.append({"method": method, "impl": None, "status": "skipped", "reason": "out of time for this stage"})
            continue
        status, path = gpu_kernel_bench.run_method(method, "dry_run" if dry_run else "gpu_run", device,
                                                   str(results_dir))
        for point in read_record(path)["metrics"]["points"]:
            rows.append({"method": method, "record": str(path), **{k: point.get(k) for k in (
                "impl", "source", "length", "dtype", "status", "reason", "fwd_median_s", "fwdbwd_median_s",
                "fwdbwd_flops", "fwdbwd_flops_per_s", "fwdbwd_peak_memory_bytes", "sdpa_backend")}})
    return rows


def train_config(method: str, device: str, dry_run: bool, results_dir: Path, data_dir: Path) -> dict:
    """The suite's config for a short MQAR run of ``method`` (Hydra compose, as the tests do)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from suite.groups import store

    overrides = [f"method={method}", f"device={device}", f"results_dir={results_dir}", f"data_dir={data_dir}",
                 "logger=none", "protocol=single", "force=true", "resume=false"]
    if dry_run:
        overrides += ["task=mqar", "model=hybrid", "budget=smoke", f"budget.max_steps={DRY_TRAIN_STEPS}"]
    else:
        overrides += ["point=cpu_mqar_64x4", f"budget.max_steps={TRAIN_STEPS}", "budget.eval_every=100",
                      "budget.warmup_steps=40", "budget.checkpoint_every=null", "budget.target_val_accuracy=null"]
    store()  # the method group is made from the classes
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return OmegaConf.to_container(compose("config", overrides=overrides), resolve=True)


def run_training(device: str, dry_run: bool, deadline: float, results_dir: Path, data_dir: Path) -> list[dict]:
    """A short training run of every method through the suite; one row per method."""
    import methods
    from suite.record_store import read_record
    from suite.run import run

    rows = []
    for method in methods.available():
        row = {"method": method, "status": None, "record": None}
        rows.append(row)
        if time.perf_counter() > deadline:
            row.update(status="skipped", error="out of time for this stage")
            continue
        try:
            path, outcome = run(train_config(method, device, dry_run, results_dir, data_dir), resume=False)
            metrics = read_record(path)["metrics"]
            row.update(status=outcome.status, record=str(path), error=outcome.error,
                       **{k: metrics.get(k) for k in ("test_accuracy", "val_accuracy", "median_step_time_s",
                                                       "train_tokens_per_s", "peak_memory_bytes", "wall_time_s")})
        except Exception as exc:  # recorded; the other methods still train
            traceback.print_exc()
            row.update(status="error", error=f"{type(exc).__name__}: {exc}")
    return rows


def summary(report: dict) -> str:
    """One table, a row per method: checks passed, its fastest implementation's fwd+bwd at the
    longest length measured against SDPA and fla there, and the training run."""
    import methods

    lines = [f"GPU run on {report['properties']['name']} ({report['env'].get('torch')}, triton "
             f"{report['env'].get('triton')}), {report['seconds']:.0f} s of {report['budget_s']:.0f} s"]
    head = (f"{'method':<10} {'checks':>7} {'N':>6} {'best own impl':>18} {'fwd+bwd ms':>10} {'GFLOP/s':>8} "
            f"{'SDPA/own':>8} {'fla/own':>8} {'train':>6} {'test acc':>8} {'step ms':>8}")
    lines += [head, "-" * len(head)]
    for method in methods.available():
        checks = [r for r in report["checks"] if r["case"].startswith(method + " ")]
        passed = f"{sum(bool(r['ok']) for r in checks)}/{len(checks)}" if checks else "-"
        timed = [r for r in report["timings"] if r["method"] == method and r["status"] == "ok"]
        longest = max((r["length"] for r in timed), default=None)
        at = [r for r in timed if r["length"] == longest]
        own = [r for r in at if r["source"] == "method"]
        best = min(own, key=lambda r: r["fwdbwd_median_s"], default=None)
        sdpa = next((r for r in at if r["impl"] == "sdpa"), None)
        fla = min((r for r in at if r["impl"].startswith("fla")), key=lambda r: r["fwdbwd_median_s"], default=None)
        def ratio(peer: dict | None, best: dict | None = best) -> str:  # this row's best, bound now
            return f"{peer['fwdbwd_median_s'] / best['fwdbwd_median_s']:.2f}" if peer and best else "-"
        train = next((r for r in report["training"] if r["method"] == method), {})
        acc = f"{train['test_accuracy']:.3f}" if train.get("test_accuracy") is not None else "-"
        step = f"{train['median_step_time_s'] * 1e3:.1f}" if train.get("median_step_time_s") else "-"
        lines.append(
            f"{method:<10} {passed:>7} {longest or '-':>6} {best['impl'] if best else '-':>18} "
            f"{best['fwdbwd_median_s'] * 1e3 if best else float('nan'):>10.2f} "
            f"{best['fwdbwd_flops_per_s'] / 1e9 if best else float('nan'):>8.1f} {ratio(sdpa):>8} {ratio(fla):>8} "
            f"{train.get('status') or '-':>6} {acc:>8} {step:>8}")
    failed = [r["case"] for r in report["checks"] if r.get("ok") is False]
    if failed:
        lines.append(f"failed checks: {', '.join(failed)}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU, Triton interpreted")
    parser.add_argument("--out", help="folder for gpu_run.json and summary.txt (default .cache/gpu_run/<time>)")
    parser.add_argument("--results-dir", help="where the kernel and training records go (default: the repository's "
                        "results/; with --dry-run, <out>/results, so that a dry run never adds to the board)")
    parser.add_argument("--budget-s", type=float, default=480.0, help="the whole run's time (default 8 minutes)")
    args = parser.parse_args()
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"  # read when triton is first imported, below
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA: nothing to run here (--dry-run runs this script's stages on the CPU)")
        return 0
    from suite import env

    started = time.perf_counter()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else REPO / ".cache" / "gpu_run" / stamp
    out.mkdir(parents=True, exist_ok=True)
    if args.results_dir is None:
        args.results_dir = str(out / "results" if args.dry_run else REPO / "results")
    device = torch.device("cpu" if args.dry_run else "cuda")
    report = {"created": stamp, "dry_run": args.dry_run, "budget_s": args.budget_s,
              "properties": device_properties(device), "env": env.capture(device, seed=0)}
    deadline = started
    failed = False
    for stage, share in SHARES.items():
        deadline = max(deadline, time.perf_counter()) + share * args.budget_s
        print(f"\n== {stage} (until {deadline - started:.0f} s)", flush=True)
        try:
            if stage == "checks":
                report[stage] = run_checks(device.type, args.dry_run, deadline)
                failed |= any(r.get("ok") is False for r in report[stage])
            elif stage == "timings":
                report[stage] = run_timings(device.type, args.dry_run, deadline, Path(args.results_dir))
                failed |= any(r["status"] == "error" for r in report[stage])
            else:
                report[stage] = run_training(device.type, args.dry_run, deadline, Path(args.results_dir), out / "data")
                failed |= any(r["status"] == "error" for r in report[stage])
        except Exception as exc:  # a broken stage is reported; the others still run
            traceback.print_exc()
            report[stage], failed = [], True
            report[f"{stage}_error"] = f"{type(exc).__name__}: {exc}"
    report["seconds"] = time.perf_counter() - started
    (out / "gpu_run.json").write_text(json.dumps(report, indent=1, default=str))
    text = summary(report)
    (out / "summary.txt").write_text(text + "\n")
    print("\n" + text)
    print(f"\nwritten: {out / 'gpu_run.json'}, {out / 'summary.txt'}; training records under {args.results_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
