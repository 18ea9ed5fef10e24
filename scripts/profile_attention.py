"""Where each attention method's CPU time goes, for comparing two versions of the code.

Run it against a source tree by putting that tree first on PYTHONPATH; everything it measures
(methods, suite, tasks, conf/) is read from that tree, never from this file's own checkout:

    PYTHONPATH=/path/to/tree python scripts/profile_attention.py --out tree.json [--threads 1] [--quick]

Part 1 profiles the causal forward+backward of each method's fast path (B=1, H=4, D=64, float32)
at N = 2048, 4096, 8192: median wall time, the log-log slope over N, and the ops with the most
self CPU time with their own slopes (an op growing faster than N, slope > 1.1, is flagged).
Part 2 times one AdamW training step of the CPU board's MQAR models (hybrid and small; batch 64,
vocabulary 512, N = 64, 128, 256). Only the JSON file and a compact table are written.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import yaml
from torch.profiler import ProfilerActivity, profile

# Imported from PYTHONPATH: the tree under test (main() checks all three come from one tree).
import methods
from suite.model import build_model, token_loss
from tasks.recall import mqar

FAST_PATH = {"softmax": "sdpa", "linear": "chunk", "favor": "chunk", "taylor": "chunk", "loglinear": "chunk"}
SHAPE = {"batch": 1, "heads": 4, "head_dim": 64}
TRAIN_BATCH, TRAIN_VOCAB = 64, 512
TRAIN_MODELS = ("hybrid", "small")  # hybrid is the board's model; small exists in every version
SLOPE_FLAG = 1.1
TOP_OPS = 10


def conf_dir(tree: Path) -> Path | None:
    """conf/method of an older tree (conf/ or suite/conf/); None for a tree whose method configs
    come from the classes (suite/groups.py)."""
    for candidate in (tree / "conf", tree / "suite" / "conf"):
        if (candidate / "method").is_dir():
            return candidate
    return None


def method_options(conf: Path | None, name: str) -> dict:
    if conf is None:
        from suite.groups import method_config

        return method_config(methods.get(name))["options"]
    return dict(yaml.safe_load((conf / "method" / f"{name}.yaml").read_text()).get("options") or {})


def loglog_slope(lengths: list[int], values: list[float]) -> float | None:
    """Least-squares slope of log(value) on log(N); None when any point is missing or zero."""
    if len(lengths) < 2 or any(v is None or v <= 0 for v in values):
        return None
    return float(np.polyfit(np.log(lengths), np.log(values), 1)[0])


def median_seconds(fn, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def self_times_ms(fn) -> dict[str, tuple[float, int]]:
    """One profiled call: op name -> (self CPU ms, calls), summed over every call of that op."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {e.key: (e.self_cpu_time_total / 1e3, e.count) for e in prof.key_averages()}


def profile_method(name: str, conf: Path, lengths: list[int], repeats: int) -> dict:
    impl = FAST_PATH[name]
    # eval(): FAVOR+ must not redraw its projection between timed calls.
    module = methods.build(name, head_dim=SHAPE["head_dim"], impl=impl, **method_options(conf, name)).eval()
    medians, ops = {}, {}
    for n in lengths:
        gen = torch.Generator().manual_seed(n)
        size = (SHAPE["batch"], SHAPE["heads"], n, SHAPE["head_dim"])
        q, k, v, grad_out = (torch.randn(size, generator=gen) for _ in range(4))
        q, k, v = (t.requires_grad_() for t in (q, k, v))

        def forward_backward(q=q, k=k, v=v, grad_out=grad_out):
            out = module(q, k, v, causal=True)  # the same contract in both versions (methods/base.py)
            torch.autograd.grad(out, (q, k, v), grad_out)

        medians[n] = median_seconds(forward_backward, warmup=1, repeats=repeats)
        ops[n] = self_times_ms(forward_backward)
    largest = lengths[-1]
    top = sorted(ops[largest], key=lambda op: -ops[largest][op][0])[:TOP_OPS]
    top_ops = []
    for op in top:
        self_ms = [ops[n].get(op, (0.0, 0))[0] for n in lengths]
        slope = loglog_slope(lengths, self_ms)
        top_ops.append({"op": op, "self_ms": dict(zip(map(str, lengths), self_ms)),
                        "calls": {str(n): ops[n].get(op, (0.0, 0))[1] for n in lengths},
                        "slope": slope, "flag": slope is not None and slope > SLOPE_FLAG})
    return {"impl": impl, "options": dict(module.options),
            "median_s": {str(n): t for n, t in medians.items()},
            "slope": loglog_slope(lengths, [medians[n] for n in lengths]),
            "profiled_self_ms": {str(n): sum(t for t, _ in ops[n].values()) for n in lengths},
            "top_ops": top_ops}


def train_step_ms(model_config: dict, name: str, conf: Path, n: int, warmup: int, repeats: int) -> float:
    # As the new tree's benchmarks/test_attention_ops.py::test_board_training_step builds it; the old
    # tree has the same suite.model.build_model(backbone, info, model, method) and mqar.make(...).
    ids, labels = mqar.make(TRAIN_BATCH, n, n // 16, TRAIN_VOCAB, seed=0)
    shift = getattr(mqar, "ID_SHIFT", 1)  # ids are shifted up so that 0 is padding
    info = SimpleNamespace(name="mqar", vocab_size=TRAIN_VOCAB + shift, seq_len=n,
                           num_classes=TRAIN_VOCAB + shift, extra={})
    torch.manual_seed(0)
    method_block = {"name": name, "impl": "auto", "options": method_options(conf, name)}
    model = build_model("decoder", info, model_config, method_block)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = {"input_ids": ids, "label": labels}

    def step():
        logits, target = model(batch)
        loss = token_loss(logits, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return 1e3 * median_seconds(step, warmup=warmup, repeats=repeats)


def git_state(tree: Path) -> dict:
    def git(*args):
        # --no-optional-locks: a read that never rewrites the tree's index.
        return subprocess.run(["git", "--no-optional-locks", "-C", str(tree), *args],
                              capture_output=True, text=True, check=False)
    head = git("rev-parse", "HEAD")
    return {"commit": head.stdout.strip() or None,
            "dirty": git("diff-index", "--quiet", "HEAD", "--").returncode != 0 if head.returncode == 0 else None}


def fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def short(op: str, width: int = 46) -> str:
    # Cut the middle: forward and backward ops often differ only at the end (..._backward).
    return op if len(op) <= width else op[: width // 2 - 1] + ".." + op[-(width - width // 2 - 1):]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="tiny lengths and repeats: a smoke check only")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    tree = Path(methods.__file__).resolve().parents[1]
    # A tree missing a package would silently fall back to the venv's editable install: refuse.
    strays = [name for name in ("suite.model", "tasks.recall.mqar")
              if tree not in Path(sys.modules[name].__file__).resolve().parents]
    if strays:
        raise SystemExit(f"{', '.join(strays)} not imported from {tree}; put the tree first on PYTHONPATH")
    conf = conf_dir(tree)
    lengths = [256, 512] if args.quick else [2048, 4096, 8192]
    train_lengths = [64] if args.quick else [64, 128, 256]
    repeats, train_warmup, train_repeats = (2, 1, 2) if args.quick else (5, 2, 10)
    result = {"tree": str(tree), **git_state(tree), "torch": torch.__version__, "threads": torch.get_num_threads(),
              "python": platform.python_version(), "machine": platform.processor() or platform.machine(),
              "quick": args.quick, "conf": str(conf or "the method classes (suite/groups.py)")}

    result["profile"] = {"shape": SHAPE, "causal": True, "lengths": lengths, "repeats": repeats, "methods": {}}
    for name in ("softmax", "linear", "favor", "taylor", "loglinear"):
        print(f"profiling {name} ...", flush=True)
        result["profile"]["methods"][name] = profile_method(name, conf, lengths, repeats)

    result["train"] = {"batch": TRAIN_BATCH, "vocab_size": TRAIN_VOCAB, "lengths": train_lengths,
                       "repeats": train_repeats, "models": {}}
    for model_name in TRAIN_MODELS:
        path = conf / "model" / f"{model_name}.yaml"
        if not path.exists():  # an older tree without the board's hybrid model
            result["train"]["models"][model_name] = "n/a"
            continue
        model_config = yaml.safe_load(path.read_text())
        per_method = {}
        for name in FAST_PATH:
            print(f"training step {model_name} {name} ...", flush=True)
            per_method[name] = {str(n): train_step_ms(model_config, name, conf, n, train_warmup, train_repeats)
                                for n in train_lengths}
        result["train"]["models"][model_name] = {"config": model_config, "median_ms": per_method}

    Path(args.out).write_text(json.dumps(result, indent=1))
    print_tables(result)
    print(f"wrote {args.out}")


def print_tables(result: dict) -> None:
    print(f"\ntree {result['tree']} @ {(result['commit'] or '?')[:10]}{' (dirty)' if result['dirty'] else ''}; "
          f"torch {result['torch']}, {result['threads']} thread(s)")
    lengths = result["profile"]["lengths"]
    print(f"\n{'causal fwd+bwd, ms (B=1 H=4 D=64)':<48}" + "".join(f"{n:>10}" for n in lengths) + "     slope")
    for name, m in result["profile"]["methods"].items():
        times = "".join(f"{1e3 * m['median_s'][str(n)]:10.1f}" for n in lengths)
        print(f"  {name + ' ' + m['impl']:<46}{times}{fmt(m['slope'], '10.2f')}")
    for name, m in result["profile"]["methods"].items():
        print(f"\n{name}: top self-CPU ops at N={lengths[-1]} (ms per call of fwd+bwd; * slope > {SLOPE_FLAG})")
        for op in m["top_ops"]:
            times = "".join(f"{op['self_ms'][str(n)]:10.2f}" for n in lengths)
            print(f"  {short(op['op']):<46}{times}{fmt(op['slope'], '8.2f')}{' *' if op['flag'] else ''}")
    train = result["train"]
    title = f"training step, ms (batch {train['batch']}, vocab {train['vocab_size']})"
    print(f"\n{title:<48}" + "".join(f"{'N=' + str(n):>10}" for n in train["lengths"]))
    for model_name, entry in train["models"].items():
        if entry == "n/a":
            print(f"  {model_name}: n/a (no conf/model/{model_name}.yaml in this tree)")
            continue
        for name, per_n in entry["median_ms"].items():
            print(f"  {model_name + ' ' + name:<46}" + "".join(f"{per_n[str(n)]:10.1f}" for n in train["lengths"]))


if __name__ == "__main__":
    main()
