"""mode=train: train a method on a task and test it at the best validation step (suite/modes/train/job.py)."""

from suite.metrics import metric_table
from suite.modes.declare import Mode, Section

RECORD_METRICS = metric_table("""
    test_accuracy      | test acc     | fraction | higher
    baseline_accuracy  | baseline acc | fraction |
    val_accuracy       | best val acc | fraction | higher
    train_tokens_per_s | train tok/s  | tokens/s | higher
    median_step_time_s | median step  | s        | lower
    peak_memory_bytes  | peak memory  | bytes    | lower
    state_bytes        | state        | bytes    | lower
    param_count        | params       | count    |
    wall_time_s        | wall time    | s        | lower
""")

MODE = Mode(name="train", order=0, package=__name__, metrics={"record": RECORD_METRICS},
            section=Section("Accuracy against cost (Pareto)", "pareto"), ok_requires=("test_accuracy",))
