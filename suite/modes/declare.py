"""What a mode declares of itself (its ``MODE``: a :class:`Mode`, with its :class:`Section` of the
site): the types a mode's ``__init__`` imports, apart from the registry (suite/modes/__init__.py) that
finds the modes, so that the modes import these without importing the registry (which loads the
modes and composes the vocabulary they build on: suite/config.py, suite/schema.py, suite/records.py).
Plain Python, no torch: the site reads them too."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
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
    package: str  # its package (the ``__name__`` of its ``__init__``), holding job, config and schema
    metrics: dict[str, tuple[Metric, ...]] = field(default_factory=dict)  # its tables, by what a row is
    section: Section | None = None
    # The method capabilities its job calls (methods.base.CAPABILITIES); a run of a method that lacks
    # one writes a record of status not_applicable saying which, instead of running the job.
    needs: frozenset[str] = frozenset()
    # The metrics an ok record of the mode must hold: what the board reads of it (a train record
    # without its accuracy would drop out of its cell in silence).
    ok_requires: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.name

    def part(self, module: str) -> ModuleType:
        """The package's module ``job``, ``config`` or ``schema``, imported when first needed."""
        return importlib.import_module(f"{self.package}.{module}")

    def job_module(self) -> ModuleType:
        return self.part("job")

    def all_metrics(self) -> tuple[Metric, ...]:
        """Every metric the mode declares, its tables in order, each once."""
        seen: dict[str, Metric] = {}
        for table in self.metrics.values():
            for metric in table:
                seen.setdefault(metric.name, metric)
        return tuple(seen.values())
