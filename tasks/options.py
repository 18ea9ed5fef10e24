"""Reading a task's options from its config: one TaskError naming the key for a bad value."""

from __future__ import annotations

from collections.abc import Mapping

from tasks.base import SPLITS, TaskError


def int_option(config: Mapping, key: str, minimum: int = 1) -> int:
    """``config[key]`` as an int >= ``minimum``; a TaskError naming the key otherwise."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TaskError(f"task.{key}={value!r}: expected an integer >= {minimum}")
    return value


def choice_option(config: Mapping, key: str, choices: tuple[str, ...]) -> str:
    """``config[key]`` if it is one of ``choices``; a TaskError listing them otherwise."""
    value = config.get(key)
    if value not in choices:
        raise TaskError(f"task.{key}={value!r}: valid choices are {', '.join(choices)}")
    return value


def split_sizes(config: Mapping) -> dict[str, int]:
    """``num_train``, ``num_val`` and ``num_test`` of the task config, validated."""
    return {split: int_option(config, f"num_{split}") for split in SPLITS}
