"""mode=cost: what one run's configuration costs at the lengths it trains and is tested at: the
training step at ``task.seq_len`` and inference per sequence at that length and at each of
``task.test_lengths`` (suite/modes/cost/job.py)."""

from suite.metrics import metric_table
from suite.modes.declare import Mode, Section

PHASES = ("train_step", "inference")  # a record's points: the training step, then inference per length
# One row per point: a phase at one length. The times are of one call on the whole batch (median
# over the repeats, p10 to p90 beside it); per_sequence_s is the median over the batch.
POINT_METRICS = metric_table("""
    length            | N            | tokens   |
    batch             | batch        | count    |
    median_s          | median       | s        | lower
    per_sequence_s    | per sequence | s        | lower
    tokens_per_s      | tok/s        | tokens/s | higher
    peak_memory_bytes | peak memory  | bytes    | lower
""")

MODE = Mode(name="cost", order=4, package=__name__, metrics={"points": POINT_METRICS},
            section=Section("Cost: a run's training step and inference against N", "sweep", "N (sequence length)"),
            needs=frozenset())  # timing needs no recurrent form and no FLOP count
