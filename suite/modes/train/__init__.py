"""mode=train: train a method on a task and test it at the best validation step (suite/modes/train/job.py)."""

from suite.metrics import Metric
from suite.modes import Mode, Section

RECORD_METRICS = (
    Metric("test_accuracy", "test acc", "fraction", "higher"),
    Metric("baseline_accuracy", "baseline acc", "fraction", None),
    Metric("val_accuracy", "best val acc", "fraction", "higher"),
    Metric("train_tokens_per_s", "train tok/s", "tokens/s", "higher"),
    Metric("median_step_time_s", "median step", "s", "lower"),
    Metric("peak_memory_bytes", "peak memory", "bytes", "lower"),
    Metric("state_bytes", "state", "bytes", "lower"),
    Metric("param_count", "params", "count", None),
    Metric("wall_time_s", "wall time", "s", "lower"),
)

MODE = Mode(name="train", order=0, job="suite.modes.train.job", metrics={"record": RECORD_METRICS},
            section=Section("Accuracy against cost (Pareto)", "pareto"))
