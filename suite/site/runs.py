"""Reading results/ for the site: every record becomes a :class:`Run` with the few facts the pages
group by (method, task, budget, device, dtype, seed), read defensively.

A file that is not a valid record, or a record whose fields have the wrong shape, is skipped with a
message naming the file; the build goes on.
"""

from __future__ import annotations

import math
import re
import shlex
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suite import metrics as declared
from suite.records import iter_records

PLOT_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".webp")


@dataclass(frozen=True)
class Run:
    """One record plus what the site derives from it."""

    record: dict
    source: Path  # the record's path relative to the results folder
    page: str  # the run's page, relative to the site root: runs/<safe run id>.html
    plots: tuple[str, ...] = ()  # image files the record names that lie beside it

    @property
    def kind(self) -> str:
        return self.record["kind"]

    @property
    def status(self) -> str:
        return self.record["status"]

    @property
    def method(self) -> str:
        return str(self.record["method"].get("name", "?"))

    @property
    def impl(self) -> str:
        return str(self.record["method"].get("impl", "?"))

    @property
    def task(self) -> str:
        return str(self.record["task"].get("name", "?"))

    @property
    def metrics(self) -> dict:
        return self.record["metrics"]

    @property
    def budget(self) -> str:
        budget = self.record["config"].get("budget")
        return str(budget.get("name", "?")) if isinstance(budget, Mapping) else "-"

    @property
    def device(self) -> str:
        """'cpu', or the GPU's name: throughput is only comparable on the same device."""
        env = self.record["env"]
        if env.get("device") == "cpu":
            return "cpu"
        return str(env.get("device_name") or env.get("device") or "?")

    @property
    def dtype(self) -> str:
        """The compute dtype: the config's or metrics' ``dtype`` if recorded, else the train loop's
        rule (bf16 autocast on CUDA, float32 on the CPU)."""
        for block in (self.record["config"], self.metrics):
            if isinstance(block.get("dtype"), str):
                return block["dtype"]
        return "bf16 autocast" if self.record["env"].get("device") == "cuda" else "float32"

    @property
    def seed(self) -> Any:
        return self.record["config"].get("seed", self.record["env"].get("seed"))

    @property
    def run_id(self) -> str:
        return str(self.record["run_id"])

    @property
    def created(self) -> str:
        """ISO time the run was written ('' if not recorded): orders reruns of one config."""
        return str(self.record.get("created") or "")

    @property
    def config_hash(self) -> str:
        """What defines the run; reruns of one config share it (a record without one is its own)."""
        return str(self.record.get("config_hash") or self.run_id)

    @property
    def lr(self) -> float | None:
        budget = self.record["config"].get("budget")
        return number(budget.get("lr")) if isinstance(budget, Mapping) else None


def number(value: Any) -> float | None:
    """``value`` as a finite float, or None (booleans, text, NaN and inf are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def declared_metrics(kind: str | None = None) -> dict[str, declared.Metric]:
    """The metrics the modes declare for records of ``kind``, or for every kind, by name."""
    return declared.declared(kind)


def metric_for(name: str) -> declared.Metric:
    """The declaration of metric ``name``; an undeclared one is read from its name's unit suffix
    (DESIGN: units in names), so a new metric still plots before it is declared."""
    known = declared_metrics()
    if name in known:
        return known[name]
    label = name.replace("_", " ").replace(".", " ")
    for suffix, unit, better in (("_per_s", "per s", "higher"), ("_bytes", "bytes", "lower"),
                                 ("_s", "s", "lower"), ("_error", "ratio", "lower")):
        if name.endswith(suffix):
            return declared.Metric(name, label, unit, better)
    return declared.Metric(name, label, "ratio", None)


def safe_name(text: str) -> str:
    """``text`` reduced to characters safe in a file name and a URL."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:120] or "run"


def check_shape(record: dict) -> None:
    """Raise ValueError when a record's fields cannot be read by the pages."""
    for field in ("run_id", "kind", "status"):
        if not isinstance(record[field], str):
            raise ValueError(f"field {field!r} is not text")
    if not isinstance(record["method"].get("name"), str) or not isinstance(record["task"].get("name"), str):
        raise ValueError("method.name or task.name is not text")


def load_runs(results_dir: Path) -> tuple[list[Run], list[str]]:
    """The runs under ``results_dir`` and one message per skipped file."""
    runs: list[Run] = []
    problems: list[str] = []
    pages: set[str] = set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for path, record in iter_records(results_dir):
            try:
                check_shape(record)
            except ValueError as exc:
                problems.append(f"skipping {path}: {exc}")
                continue
            page = f"runs/{safe_name(record['run_id'])}.html"
            suffix = 2
            while page in pages:  # two files with one run id (a copied record): both get a page
                page = f"runs/{safe_name(record['run_id'])}-{suffix}.html"
                suffix += 1
            pages.add(page)
            runs.append(Run(record, path.relative_to(results_dir), page, plots_beside(record, path)))
    problems = [str(w.message) for w in caught] + problems
    return runs, problems


def plots_beside(record: dict, path: Path) -> tuple[str, ...]:
    """Image files a record lists under ``plots`` (top level or in metrics) that exist beside it;
    plain file names only, so a record cannot point the site outside results/."""
    names = record.get("plots", record["metrics"].get("plots", []))
    names = [names] if isinstance(names, str) else names if isinstance(names, list) else []
    return tuple(
        n for n in names
        if isinstance(n, str) and Path(n).name == n and Path(n).suffix.lower() in PLOT_SUFFIXES
        and (path.parent / n).is_file()
    )


def reproduce_command(run: Run) -> str:
    """The command line that reruns this record's config (its groups, seed and device)."""
    config = run.record["config"]
    parts = ["python", "-m", "suite"]
    for group in ("mode", "method", "task", "budget"):
        block = config.get(group)
        if isinstance(block, Mapping) and block.get("name") is not None:
            parts.append(f"{group}={block['name']}")
    method = config.get("method")
    if isinstance(method, Mapping) and method.get("impl") not in (None, "auto"):
        parts.append(f"method.impl={method['impl']}")
    if config.get("seed") is not None:
        parts.append(f"seed={config['seed']}")
    device = run.record["env"].get("device")
    if device in ("cpu", "cuda"):
        parts.append(f"device={device}")
    return " ".join(shlex.quote(str(p)) for p in parts)
