"""Modes: what kind of job a run is. Each is one package, ``suite/modes/<name>/``, found the way
methods are: its ``__init__`` declares ``MODE``, a :class:`Mode` (its name, its metrics, its section
of the site; suite/modes/declare.py, which a mode imports instead of this registry), and the
package holds three modules of fixed names:

- ``job.py``: ``job(config, device, config_hash) -> JobResult`` (suite/job.py; the run checks the config
  and hashes it once, and hands both over) and ``summary(record) -> str``;
- ``config.py``: ``Run``, the schema of the config blocks the mode reads (its own keys and grids),
  which suite/config.py checks beside what every run reads;
- ``schema.py``: ``Metrics``, the model of its records' ``metrics`` (suite/schema.py builds the
  record around it), and ``SWEEP`` where the site draws its records as sweeps.

Adding a mode is its package plus ``conf/mode/<name>.yaml``: the run's dispatch, the config check,
the record kinds and schemas, the metric declarations and the site's sections all come from here.
What modes share (grid selection, the summary's heading, the text table) is in suite/modes/common.py.

The vocabulary the modes build on (suite/config.py, suite/schema.py, suite/records.py, suite/metrics.py)
imports no mode and not this registry: the registry hands it each mode's parts (``run_schemas``,
``metrics_model``, ``record_model``, ``sweep_layout``, ``declared``).

A mode's ``__init__`` and ``schema.py`` import nothing heavy (no torch): the site reads them too.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from suite import schema
from suite.metrics import Metric
from suite.modes.declare import FIGURE_STYLES, Mode  # noqa: F401 - FIGURE_STYLES: the site reads it here


@cache
def registry() -> dict[str, Mode]:
    """Every mode under suite/modes/, by name, in their declared order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            mode = getattr(importlib.import_module(f"{__name__}.{info.name}"), "MODE", None)
            if isinstance(mode, Mode):
                found.append(mode)
    return {m.name: m for m in sorted(found, key=lambda m: (m.order, m.name))}


def available() -> tuple[str, ...]:
    return tuple(registry())


def declared(kind: str | None = None) -> dict[str, Metric]:
    """The metrics the modes declare (suite/modes/<mode>/__init__.py) for records of ``kind``, or
    for every kind, by name, in declaration order (a name declared by two modes: the first)."""
    found: dict[str, Metric] = {}
    for mode in registry().values():
        if kind in (None, mode.kind):
            for metric in mode.all_metrics():
                found.setdefault(metric.name, metric)
    return found


def run_schemas() -> dict[str, type]:
    """Each mode's config schema (its config.py's ``Run``), by name: what suite/config.py checks a
    run's config against (``validate``, ``added_key``) beside what every run reads."""
    return {name: mode.part("config").Run for name, mode in registry().items()}


def metrics_model(kind: str) -> type[schema.RecordObject]:
    """The model of the ``metrics`` of records of ``kind``: its mode's (schema.py ``Metrics``)."""
    return get(kind).part("schema").Metrics


def sweep_layout(kind: str) -> schema.SweepLayout:
    """How the points of a record of ``kind`` read, where the site draws the kind as sweeps (its
    mode's schema.py ``SWEEP``)."""
    return get(kind).part("schema").SWEEP


def record_model(kind: str) -> type[schema.Record]:
    """The model of a record of ``kind`` (suite/schema.py's record around its mode's metrics);
    KeyError for a kind no mode declares."""
    if kind not in registry():
        raise KeyError(kind)
    return schema.record_model(kind, metrics_model(kind))


def get(name: str) -> Mode:
    """The mode ``name``; KeyError naming the valid ones."""
    modes = registry()
    if name not in modes:
        raise KeyError(f"unknown mode {name!r}; valid modes: {', '.join(modes)}")
    return modes[name]
