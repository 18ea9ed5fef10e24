"""Synthetic recall tasks: Zoology's multi-query associative recall and Mamba's selective copying."""

from collections.abc import Mapping

# name -> "module:function" of the loader; merged into ``tasks.LOADERS``.
LOADERS = {
    "mqar": "tasks.recall.mqar:load",
    "selective_copying": "tasks.recall.selective_copying:load",
}


def mqar_baseline(task: Mapping) -> float:
    """A value of the context at random: one over the key-value pairs."""
    return 1.0 / task["num_kv_pairs"]


def selective_copying_baseline(task: Mapping) -> float:
    """Chance over the data symbols (the vocabulary less padding and the marker)."""
    return 1.0 / (task["vocab_size"] - 2)


# name -> the task's baseline from its config alone (the task block a record holds), for the tasks
# whose trivial predictor needs no data: validate and the site check a record's baseline against it.
BASELINES = {"mqar": mqar_baseline, "selective_copying": selective_copying_baseline}
