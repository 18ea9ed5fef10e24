"""One run from a resolved config to a written record: validate, pick the device, build the task,
run the mode's job, write the record, print the summary and where the record went."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

import torch

import methods
import tasks
from suite import env, records
from suite.data import capped
from suite.errors import ConfigError
from suite.metrics import TRAIN_METRICS, format_value
from suite.model import check_model_config
from suite.train import Outcome, train

DEVICES = ("auto", "cpu", "cuda")
SPLIT_LIMITS = ("num_train", "num_val", "num_test")


def quiet_datasets() -> None:
    """Hide `datasets`' per-shard progress bars: the run's own bar is the one to watch."""
    import datasets

    datasets.disable_progress_bars()


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else the CPU; ``cuda`` without CUDA is a user error."""
    if name not in DEVICES:
        raise ConfigError(f"unknown device {name!r}; valid: {', '.join(DEVICES)}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA device is available here; use device=cpu or device=auto")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def check_budget(budget: Mapping) -> None:
    for key in ("max_steps", "batch_size", "eval_every"):
        if not isinstance(budget[key], int) or budget[key] <= 0:
            raise ConfigError(f"budget.{key} must be a positive integer, got {budget[key]!r}")
    for key in ("eval_batches", *SPLIT_LIMITS):
        value = budget[key]
        if value is not None and (not isinstance(value, int) or value <= 0):
            raise ConfigError(f"budget.{key} must be a positive integer or null, got {value!r}")
    if budget["warmup_steps"] < 0 or budget["lr"] <= 0:
        raise ConfigError(f"budget.lr must be > 0 and budget.warmup_steps >= 0, got "
                          f"{budget['lr']!r} and {budget['warmup_steps']!r}")


def task_config(config: Mapping) -> dict:
    """The task group with the budget's split sizes written over the task's own (when set)."""
    merged = dict(config["task"])
    for key in SPLIT_LIMITS:
        if config["budget"][key] is not None:
            merged[key] = config["budget"][key]
    return merged


@contextmanager
def sigterm_as_interrupt():
    """Let SIGTERM (a cluster's pre-emption, `kill`) end a run the way Ctrl-C does."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(config: Mapping) -> tuple[Path, Outcome]:
    """Run one job of ``config`` (a resolved plain dict); return the record path and outcome."""
    started = time.perf_counter()
    mode = config["mode"]["name"]
    if mode != "train":
        raise ConfigError(f"unknown mode {mode!r}; valid: train")
    methods.get(config["method"]["name"])  # unknown method: fail before any work
    load_task = tasks.loader(config["task"]["name"])
    check_budget(config["budget"])
    check_model_config(config["model"], config["task"]["seq_len"])
    device = resolve_device(config["device"])
    records.check_writable(config["results_dir"])
    torch.manual_seed(config["seed"])

    tcfg = task_config(config)
    quiet_datasets()
    data = load_task(tcfg, Path(config["data_dir"]).expanduser())
    data.train, data.val, data.test = (
        capped(split, tcfg[key]) if key in tcfg else split
        for split, key in ((data.train, "num_train"), (data.val, "num_val"), (data.test, "num_test"))
    )
    with sigterm_as_interrupt():
        try:
            outcome = train(config, data, device)
        except torch.cuda.OutOfMemoryError as exc:
            outcome = Outcome(status="oom", error=str(exc).splitlines()[0])
        except MemoryError:
            outcome = Outcome(status="oom", error="out of host memory")
    outcome.metrics["wall_time_s"] = time.perf_counter() - started

    method = config["method"]
    record = records.new_record(
        "train",
        config=config,
        config_hash=records.config_hash(config, device.type),
        method={"name": method["name"], "impl": method["impl"], "params": dict(method["options"])},
        task={"name": data.info.name, "seq_len": data.info.seq_len, "family": data.info.family,
              "vocab_size": data.info.vocab_size, "num_classes": data.info.num_classes,
              "target": data.info.target, "metric": data.info.metric,
              "num_train": len(data.train), "num_val": len(data.val), "num_test": len(data.test),
              **data.info.extra},
        metrics=outcome.metrics,
        env=env.capture(device, config["seed"]),
        status=outcome.status,
        error=outcome.error,
    )
    path = records.write_record(record, config["results_dir"])
    print_summary(record)
    print(f"record: {path}")
    return path, outcome


def print_summary(record: Mapping) -> None:
    """The closing table: accuracy beside the task's baseline, then speed and memory."""
    m = record["metrics"]
    head = (f"{record['method']['name']} on {record['task']['name']} "
            f"({record['config']['budget']['name']} budget, {record['env']['device']}): {record['status']}")
    rows = [(metric.label, format_value(metric, m.get(metric.name))) for metric in TRAIN_METRICS
            if metric.name != "baseline_accuracy"]
    baseline = f"{format_value(TRAIN_METRICS[1], m.get('baseline_accuracy'))} ({m.get('baseline_name', 'baseline')})"
    rows.insert(1, ("baseline", baseline))
    width = max(len(label) for label, _ in rows)
    lines = [head, "-" * len(head)] + [f"{label:<{width}}  {value}" for label, value in rows]
    if record["error"]:
        lines.append(f"{'error':<{width}}  {record['error']}")
    print("\n".join(lines), file=sys.stdout, flush=True)
