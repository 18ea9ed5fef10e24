"""Modes: what kind of job a run is. Each is one package, ``suite/modes/<name>/``, found the way
methods are: its ``__init__`` declares ``MODE``, a :class:`Mode` (its job module, its metrics, its
section of the site); the job module holds ``job(config, device) -> JobResult`` and
``summary(record) -> str``. Adding a mode is its package plus ``conf/mode/<name>.yaml``: the run's
dispatch, the record kinds, the metric declarations and the site's sections all come from here.

A mode's ``__init__`` imports nothing heavy (no torch): the site reads these declarations too.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType

from suite.metrics import Metric

# How the site draws a mode's records on the plots page: "pareto" (accuracy against cost over
# board cells), "sweep" (each metric of the record's points against its length, log-log, one line
# per method and implementation), "fidelity" (errors against feature size and length).
FIGURE_STYLES = ("pareto", "sweep", "fidelity")


@dataclass(frozen=True)
class Section:
    """A mode's section of the site's plots page."""

    title: str
    figures: str  # one of FIGURE_STYLES
    x_label: str = ""  # what a sweep puts on x


@dataclass(frozen=True)
class Mode:
    """What the harness and the site know of a mode."""

    name: str  # also the ``kind`` of its records
    order: int  # its place among the modes (site sections, lists)
    job: str  # the module holding job() and summary(); imported when a run needs it
    metrics: dict[str, tuple[Metric, ...]] = field(default_factory=dict)  # its tables, by what a row is
    section: Section | None = None

    @property
    def kind(self) -> str:
        return self.name

    def job_module(self) -> ModuleType:
        return importlib.import_module(self.job)

    def all_metrics(self) -> tuple[Metric, ...]:
        """Every metric the mode declares, its tables in order, each once."""
        seen: dict[str, Metric] = {}
        for table in self.metrics.values():
            for metric in table:
                seen.setdefault(metric.name, metric)
        return tuple(seen.values())


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


def get(name: str) -> Mode:
    """The mode ``name``; KeyError naming the valid ones."""
    modes = registry()
    if name not in modes:
        raise KeyError(f"unknown mode {name!r}; valid modes: {', '.join(modes)}")
    return modes[name]
