"""Task families: each module builds datasets and declares what a task is (length, vocab, metric).

``tasks.load(name, config, data_dir)`` returns :class:`tasks.base.TaskData`. ``config`` is the
``task`` group of the resolved Hydra config (a mapping); each loader reads the keys it declares.

A family is a module with ``LOADERS`` (task name -> ``"module:function"``): the built-in ones below,
and those installed distributions declare in the entry-point group ``attention_suite.tasks``
(``my_family = "my_pkg.tasks"``). An outside family also declares its tasks' configs, ``CONFIGS``
(task name -> the ``task`` group's config, as conf/task/<name>.yaml would hold it): they become
choices of ``task=`` (suite/groups.py).
"""

from __future__ import annotations

import csv
import importlib
import importlib.metadata
import re
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
ENTRY_POINTS = "attention_suite.tasks"
# A task's name becomes a folder of results and a row of the site: an identifier, the rule of the
# method registry and the records (methods/registry.py, suite/records.py NAME; tasks/ imports
# neither, so a test holds the three equal).
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
NAME_RULE = "a lower-case letter, then lower-case letters, digits and _, at most 64"
LOADERS: dict[str, str] = {}
# name -> the task's baseline from its config alone (a family's ``BASELINES``): a closed form where
# its trivial predictor needs no data, a table computed from the data for a generated majority class
BASELINES: dict[str, Callable[[Mapping], float]] = {}
CONFIGS: dict[str, dict] = {}  # the outside families' task configs (the built-in ones are conf/task/*.yaml)
for _family in FAMILIES:
    try:
        _module = importlib.import_module(_family)
        LOADERS.update(_module.LOADERS)
        BASELINES.update(getattr(_module, "BASELINES", {}))
    except ModuleNotFoundError as exc:  # a family not written yet
        if exc.name != _family:
            raise
_discovered = False


def _discover() -> None:
    """Add the families installed distributions declare (entry points); one TaskError naming the
    distribution and the entry point for one that cannot be loaded."""
    global _discovered
    if _discovered:
        return
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        dist = getattr(entry.dist, "name", None) or "an unnamed distribution"
        where = f"entry point {entry.name} = {entry.value!r} of {dist} (group {ENTRY_POINTS})"
        try:
            family = entry.load()
            loaders, configs = dict(family.LOADERS), dict(getattr(family, "CONFIGS", {}))
        except Exception as err:  # whatever the outside package raises while importing: said in one line
            raise TaskError(f"cannot load the {where}: {type(err).__name__}: {err}") from err
        odd = sorted(repr(n) for n in loaders if not isinstance(n, str) or not NAME.fullmatch(n))
        if odd:
            raise TaskError(f"the {where} declares task name(s) {', '.join(odd)}, which are not names: {NAME_RULE}")
        taken = sorted(set(loaders) & set(LOADERS))
        if taken:
            raise TaskError(f"the {where} declares task(s) {', '.join(taken)}, which another family has")
        LOADERS.update(loaders)
        CONFIGS.update(configs)
    _discovered = True


def available() -> tuple[str, ...]:
    """The task names the harness can run."""
    _discover()
    return tuple(LOADERS)


def configs() -> dict[str, dict]:
    """The task configs the outside families declare, by task name."""
    _discover()
    return dict(CONFIGS)


def loader(name: str) -> Callable[[Mapping, Path], TaskData]:
    """The load function of task ``name``; a clear error listing the valid names otherwise."""
    _discover()
    if name not in LOADERS:
        raise TaskError(f"unknown task {name!r}; valid tasks: {', '.join(available())}")
    module_name, func = LOADERS[name].split(":")
    return getattr(importlib.import_module(module_name), func)


SPLITS = ("num_train", "num_val", "num_test")  # the split sizes a budget may set over a task's own


def data_config(task: Mapping, budget: Mapping | None = None) -> dict:
    """What a task's loader reads: the task config with the budget's split sizes written over its own
    (where the budget sets them)."""
    merged = dict(task)
    for key in SPLITS:
        if isinstance(budget, Mapping) and budget.get(key) is not None:
            merged[key] = budget[key]
    return merged


def baseline(name: str, task: Mapping, budget: Mapping | None = None) -> float | None:
    """The baseline of built-in task ``name`` as its config defines it (``task``, with ``budget``'s
    split sizes), without loading its data or any installed package's code (validate and the site
    read it off an untrusted record): a closed form (chance in a recall task), or for a generated
    task whose baseline needs its data (a majority class) the value its family's table holds for
    that exact config; None for any other."""
    if task.get("loader"):  # a task from outside the suite, by import path: not the built-in one of that name
        return None
    try:
        return float(BASELINES[name](data_config(task, budget)))
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None


def load(name: str, config: Mapping, data_dir: str | Path) -> TaskData:
    """Build (or read from cache) the splits of task ``name``."""
    return loader(name)(config, Path(data_dir))


__all__ = ["TaskData", "TaskError", "TaskInfo", "available", "baseline", "load", "loader"]
