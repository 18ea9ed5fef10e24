"""Task families: each module builds datasets and declares what a task is (length, vocab, metric).

``tasks.load(name, config, data_dir)`` returns :class:`tasks.base.TaskData`. ``config`` is the
``task`` group of the resolved Hydra config (a mapping); each loader reads the keys it declares.
"""

from __future__ import annotations

import csv
import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from tasks.base import TaskData, TaskError, TaskInfo

# A field of a real release (a long DNA sequence in a CSV, a long line of a TSV) may pass the csv
# module's default limit of 128 KiB; every reader under tasks/ takes it whole.
csv.field_size_limit(sys.maxsize)

# name -> "module:function", gathered from each family's ``LOADERS``; a task's module is imported
# on use so its heavy dependencies load only when needed.
FAMILIES = ("tasks.lra", "tasks.recall", "tasks.genomics")
LOADERS: dict[str, str] = {}
for _family in FAMILIES:
    try:
        LOADERS.update(importlib.import_module(_family).LOADERS)
    except ModuleNotFoundError as exc:  # a family not written yet
        if exc.name != _family:
            raise


def available() -> tuple[str, ...]:
    """The task names the harness can run."""
    return tuple(LOADERS)


def loader(name: str) -> Callable[[Mapping, Path], TaskData]:
    """The load function of task ``name``; a clear error listing the valid names otherwise."""
    if name not in LOADERS:
        raise TaskError(f"unknown task {name!r}; valid tasks: {', '.join(available())}")
    module_name, func = LOADERS[name].split(":")
    return getattr(importlib.import_module(module_name), func)


def load(name: str, config: Mapping, data_dir: str | Path) -> TaskData:
    """Build (or read from cache) the splits of task ``name``."""
    return loader(name)(config, Path(data_dir))


__all__ = ["TaskData", "TaskError", "TaskInfo", "available", "load", "loader"]
