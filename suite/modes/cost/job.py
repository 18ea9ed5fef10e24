"""mode=cost: what one run's configuration costs at the lengths it trains and is tested at.

The model is built as mode=train builds it (suite/training.py ``build_run``: the same seed, model,
recipe, AdamW and schedule), from the task's own examples. Then, each point measured as the kernel
mode measures a call (suite/modes/measure.py: warm-up, one untimed call for the peak memory, timed
repeats, median and p10/p90):

- the training step (suite/training.py ``train_step``: forward, loss, backward, clipping, optimizer
  and schedule step) on one batch of ``budget.batch_size`` training examples, at ``task.seq_len``;
- inference (forward only, no gradients, eval mode, as ``training.evaluate`` runs it) on a batch of
  the grid's ``eval_batch`` test examples at ``task.seq_len`` and at each of ``task.test_lengths``;
  per sequence: the batch's time over the batch.

The task's data is made (generated tasks) or read (real ones) with its splits cut to what one
batch needs: ``budget.batch_size`` training examples, ``eval_batch`` test examples per length (and
one validation example): the same kind of examples a train run sees, without making its splits.

A point that runs out of memory is recorded as oom, one that fails as error; after an oom, or an
inference point slower than the grid's ``time_limit_s``, the longer lengths are skipped with that
reason (as the kernel sweep skips them). Ratios to softmax are not stored: a record is one method;
they come from the softmax record of the same host and commit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch.utils.data import DataLoader

import tasks
from methods.base import AttentionMethod
from suite import training
from suite.data import collate, real_tokens
from suite.hardware import high_water_mark_usable
from suite.job import JobResult, Outcome
from suite.metrics import format_bytes, format_seconds
from suite.modes.common import error_lines, heading, select_grid, text_table
from suite.modes.measure import failure, load_average, measure_phase, release

NOTE = ("ratios to softmax are not stored here: they come from the softmax record of the same host and commit "
        "(env.cpu / env.device_name, env.git_commit)")


def sized(config: Mapping, grid: Mapping) -> dict:
    """``config`` with the budget's split sizes cut to what the points need: one training batch,
    one evaluation batch per length (and one validation example, which nothing times)."""
    budget = {**config["budget"], "num_train": config["budget"]["batch_size"], "num_val": 1,
              "num_test": grid["eval_batch"]}
    return {**config, "budget": budget}


def first_batch(split, batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    """The first ``batch_size`` examples of ``split``, collated as training collates them."""
    return training.to_device(next(iter(DataLoader(split, batch_size=batch_size, collate_fn=collate))), device)


def measured(fn: Callable[[], object], device: torch.device, grid: Mapping) -> dict:
    """The point's timing and memory (measure_phase), or its status, oom or error; never a crash
    (one point's failure must not end the run)."""
    try:
        return {"status": "ok", "reason": None, **measure_phase(fn, device, grid)}
    except Exception as exc:  # noqa: BLE001 - recorded as the point's status
        failed = failure(exc)
    release(device)
    return failed


def point(phase: str, task: str, batch: dict[str, torch.Tensor], extra: Mapping, found: Mapping) -> dict:
    """One point's record: what it is, then what was measured (rates from the median)."""
    size, length = batch["input_ids"].shape
    found = dict(found)
    if found["status"] == "ok":
        found["per_sequence_s"] = found["median_s"] / size
        found["tokens_per_s"] = real_tokens(batch) / found["median_s"]
    return {"phase": phase, "task": task, "length": length, "batch": size, **extra, **found}


def describe(p: Mapping) -> str:
    """One progress line for a finished point."""
    head = f"{p['phase']:<10} N={p['length']:>6} batch={p['batch']:<4}: "
    if p["status"] != "ok":
        return head + f"{p['status']} ({p['reason']})"
    return head + (f"median {format_seconds(p['median_s'])} ({format_seconds(p['per_sequence_s'])} per sequence), "
                   f"peak {format_bytes(p['peak_memory_bytes'])}")


def step_point(run: training.Run, progress: training.Progress, batch: dict, task: str, extra: Mapping,
               grid: Mapping) -> dict:
    """The training step as a train run takes it, on one batch, at the trained length."""
    outcome = Outcome()

    def step():
        if training.train_step(run, progress, batch, outcome) is None:  # the loss was not finite
            raise FloatingPointError(outcome.error)

    run.model.train()
    return point("train_step", task, batch, extra, measured(step, run.device, grid))


def inference_points(model: torch.nn.Module, batches: list[tuple[dict, dict]], task: str, device: torch.device,
                     grid: Mapping, log: Callable[[str], None]) -> list[dict]:
    """Inference at each length, shortest first; after an oom or a point over ``time_limit_s``, the
    longer lengths are skipped with that reason."""
    points, stop_reason = [], None
    model.eval()
    for batch, extra in batches:
        def infer(batch=batch):
            with torch.no_grad(), training.autocast(device):
                model(batch)

        found = {"status": "skipped", "reason": stop_reason} if stop_reason else measured(infer, device, grid)
        p = point("inference", task, batch, extra, found)
        points.append(p)
        log(describe(p))
        if p["status"] == "oom":
            stop_reason = f"ran out of memory at N={p['length']}"
        elif p["status"] == "ok" and p["median_s"] > grid["time_limit_s"]:
            stop_reason = (f"inference took {p['median_s']:.2f} s at N={p['length']}, over "
                           f"time_limit_s={grid['time_limit_s']}")
    model.train()
    return points


def job(config: Mapping, device: torch.device, config_hash: str, log: Callable[[str], None] = print) -> JobResult:
    """mode=cost: build the run's model as mode=train does, time its training step and inference."""
    tasks.loader(config["task"]["name"])  # unknown task: fail before any work
    grid = select_grid(config)
    data = training.load_data(sized(config, grid))
    training.check_length_tests(config, data)
    info = data.info
    run, progress = training.build_run(config, data, device, config_hash)
    load_before = load_average()
    points: list[dict] = []
    status, error = "ok", None
    try:
        # What sets a longer test apart (its pairs), as the task says it of its own length too.
        own = {key: info.extra[key] for t in data.length_tests for key in t.extra if key in info.extra}
        p = step_point(run, progress, first_batch(data.train, config["budget"]["batch_size"], device), info.name,
                       own, grid)
        points.append(p)
        log(describe(p))
        batches = [(first_batch(data.test, grid["eval_batch"], device), own)]
        batches += [(first_batch(t.split, grid["eval_batch"], device), dict(t.extra))
                    for t in sorted(data.length_tests, key=lambda t: t.seq_len)]
        points += inference_points(run.model, batches, info.name, device, grid, log)
    except KeyboardInterrupt:
        status, error = "interrupted", f"interrupted after {len(points)} points"
    finally:
        run.memory.stop()  # build_run's measure of a training run: not this mode's
    statuses = {p["status"] for p in points}
    if status == "ok" and "ok" not in statuses:
        status = "oom" if "oom" in statuses else "error"
        error = next((p["reason"] for p in points if p["reason"]), "no point measured")
    metrics = {
        "points": points,
        "trained_length": info.seq_len,
        "test_lengths": [t.seq_len for t in data.length_tests],
        "train_batch": config["budget"]["batch_size"],
        "eval_batch": grid["eval_batch"],
        "param_count": run.param_count,
        "timing": "cuda_events" if device.type == "cuda" else "perf_counter",
        "memory": "cuda_allocator" if device.type == "cuda" else (
            "process_rss_high_water_mark" if high_water_mark_usable() else "process_rss_sampled_1ms"),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "cpu_threads": torch.get_num_threads() if device.type == "cpu" else None,
    }
    task = {"name": info.name, "family": info.family, "seq_len": info.seq_len, "vocab_size": info.vocab_size,
            "num_classes": info.num_classes, "target": info.target, "metric": info.metric,
            "test_lengths": metrics["test_lengths"], **info.extra}
    attention = next((m for m in run.model.modules() if isinstance(m, AttentionMethod)), None)
    return JobResult(kind=config["mode"]["name"], outcome=Outcome(status=status, error=error, metrics=metrics),
                     task=task, resolved=attention.resolved_options() if attention is not None else None)


def summary(record: Mapping) -> str:
    """The points as a table: phase, length, batch, median with its spread, per sequence, memory."""
    m = record["metrics"]
    detail = (f"trained at {m.get('trained_length')}, batch {m.get('train_batch')}; "
              f"inference batch {m.get('eval_batch')}")
    lines = heading(record, f"{record['method']['name']} cost on {record['task']['name']}", detail,
                    device=record["env"].get("device_name"))
    rows = []
    for p in m.get("points", []):
        what = [p["phase"], str(p["length"]), str(p["batch"])]
        if p["status"] != "ok":
            rows.append([*what, f"{p['status']}: {p['reason']}"])
            continue
        rows.append([*what, format_seconds(p["median_s"]),
                     f"{format_seconds(p['p10_s'])} - {format_seconds(p['p90_s'])}",
                     format_seconds(p["per_sequence_s"]), f"{p['tokens_per_s']:,.0f}",
                     format_bytes(p["peak_memory_bytes"])])
    if rows:
        lines += text_table(["phase", "N", "batch", "median", "p10 - p90", "per sequence", "tok/s", "peak memory"],
                            rows)
    lines.append(f"load average before/after: {m.get('load_average_before')} / {m.get('load_average_after')}; "
                 f"{m.get('cpu_threads')} thread(s)")
    lines.append(NOTE)
    return "\n".join(lines + error_lines(record))
