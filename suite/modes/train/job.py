"""mode=train: train the method on the task with the loop of suite/training.py, test it at the best
validation step, and measure its decoding state where it has a recurrent form."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

import tasks
from methods.base import AttentionMethod
from suite import training
from suite.job import JobResult, Outcome, is_out_of_memory
from suite.metrics import format_value
from suite.model import recurrent_state_bytes
from suite.modes.common import heading
from suite.modes.train import RECORD_METRICS


def job(config: Mapping, device: torch.device, config_hash: str) -> JobResult:
    """mode=train: train on the task, test at the best validation step."""
    tasks.loader(config["task"]["name"])  # unknown task: fail before any work
    data = training.load_data(config)
    training.check_length_tests(config, data)
    resolved = None
    try:
        outcome, model = training.train(config, data, device, config_hash)
        attention = next(m for m in model.modules() if isinstance(m, AttentionMethod))
        # A method without a recurrent form has no decoding state: its size is not applicable (null).
        outcome.metrics["state_bytes"] = (recurrent_state_bytes(model, data.info.seq_len)
                                          if "recurrent" in attention.capabilities() else None)
        resolved = attention.resolved_options()
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        outcome = Outcome(status="oom", error=str(exc).strip().split("\n")[0] or "out of memory")
    info = data.info
    task = {"name": info.name, "family": info.family, "seq_len": info.seq_len,
            "vocab_size": info.vocab_size, "num_classes": info.num_classes, "target": info.target,
            "metric": info.metric, "num_train": len(data.train), "num_val": len(data.val),
            "num_test": len(data.test), **info.extra}
    return JobResult(kind=config["mode"]["name"], outcome=outcome, task=task, resolved=resolved)


def summary(record: Mapping) -> str:
    """The closing table: accuracy beside the task's baseline, then speed and memory."""
    m = record["metrics"]
    rows = []
    for metric in RECORD_METRICS:
        value = format_value(metric, m.get(metric.name))
        if metric.name == "baseline_accuracy":
            value += f" ({m.get('baseline_name', 'baseline')})"
        rows.append((metric.label, value))
    width = max(len(label) for label, _ in rows)
    lines = heading(record, f"{record['method']['name']} on {record['task']['name']}")
    lines += [f"{label:<{width}}  {value}" for label, value in rows]
    if record["error"]:
        lines.append(f"{'error':<{width}}  {record['error']}")
    verdict = baseline_verdict(m.get("test_accuracy"), m.get("baseline_accuracy"), m.get("baseline_name"),
                               record["task"].get("num_test"))
    return "\n".join(lines + ([verdict] if verdict else []))


def baseline_verdict(accuracy: float | None, baseline: float | None, name: str | None,
                     num_test: int | None) -> str | None:
    """One sentence saying whether the test accuracy is clearly above the task's baseline: by more
    than two binomial standard errors of an accuracy measured on ``num_test`` examples."""
    if accuracy is None or baseline is None or not num_test:
        return None
    which = f"the baseline of {100 * baseline:.1f}%" + (f" ({name})" if name else "")
    two_se = 2 * math.sqrt(max(accuracy * (1 - accuracy), 1e-12) / num_test)
    if accuracy - two_se > baseline:
        return (f"test accuracy {100 * accuracy:.1f}% is above {which} by {100 * (accuracy - baseline):.1f} points "
                f"(two standard errors of the test accuracy: {100 * two_se:.1f})")
    return f"test accuracy {100 * accuracy:.1f}% is not above {which}: nothing was learned at this budget"
