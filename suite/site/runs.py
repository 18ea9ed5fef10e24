"""Reading results/ for the site: every record becomes a :class:`Run`, its schema model
(suite/schema.py) beside the JSON as written; the pages group by the few facts a run has (method,
task, budget, device, dtype, seed), read from the schema's fields.

A file that is not a valid record of its kind's schema is skipped with a message naming the file
and the field; the build goes on.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tasks
from suite import board as boards
from suite import modes, recipe, records
from suite.metrics import Metric
from suite.record_store import iter_loaded
from suite.schema import Record

PLOT_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".webp")


@dataclass(frozen=True)
class Run:
    """One record: the JSON as written, its schema model, and what the site derives from it."""

    record: dict
    model: Record
    source: Path  # the record's path relative to the results folder
    page: str  # the run's page, relative to the site root: runs/<safe run id>.html
    plots: tuple[str, ...] = ()  # image files the record names that lie beside it
    file: Path | None = None  # where the record was read from
    tier: str = "verified"  # TIERS: run by the project, or submitted by someone else
    origin: str | None = None  # a submitted record's submission folder
    submission: dict = field(default_factory=dict)  # that folder's submission.json (submitter, added, notes)
    pinned: str | None = None  # a verified run's board commit (<kind>/BOARD_COMMIT of the project's folder)

    @property
    def hardware(self) -> str:
        """The machine's class (records.hardware_class): speed and memory compare only between runs
        of one hardware class."""
        return records.hardware_class(self.record)

    @property
    def timed(self) -> bool:
        """Whether its speed and memory may stand as cost figures: not for the project's runs of a
        board that declares its training runs' timings none (suite.board.untimed_folders)."""
        folder = self.source.parts[0] if self.source.parts else None
        return not (self.tier == "verified" and folder in boards.untimed_folders())

    @property
    def added(self) -> str:
        """When the result was added: a submission's date, else when the project's run wrote it."""
        added = self.submission.get("added")
        return added if isinstance(added, str) else self.created

    @property
    def kind(self) -> str:
        return self.model.kind

    @property
    def status(self) -> str:
        return self.model.status

    @property
    def method(self) -> str:
        return self.model.method.name

    @property
    def impl(self) -> str:
        return str(self.model.method.impl)

    @property
    def task(self) -> str:
        return self.model.task.name

    @property
    def metrics(self) -> dict:
        """The metrics as written (every key, for the run's page and the downloads)."""
        return self.record["metrics"]

    def metric(self, name: str) -> Any:
        """The value of metric ``name``, a field of the kind's metrics schema (None if not recorded)."""
        fields = type(self.model.metrics).model_fields
        if name not in fields:
            raise KeyError(f"{name!r} is not a field of the {self.kind} metrics schema; fields: {', '.join(fields)}")
        return getattr(self.model.metrics, name)

    @property
    def recipe(self) -> str:
        """The training recipe (suite.recipe.label): 'suite' for a record that predates recipes."""
        return recipe.label(self.record["config"])

    @property
    def budget(self) -> str:
        budget = self.model.config.budget
        return "-" if budget is None else str(budget.name or "?")

    @property
    def device(self) -> str:
        """'cpu', or the GPU's name: throughput is only comparable on the same device."""
        env = self.model.env
        if env.device == "cpu":
            return "cpu"
        return str(env.device_name or env.device or "?")

    @property
    def dtype(self) -> str:
        """The compute dtype: the config's ``dtype`` if recorded, else the train loop's rule (bf16
        autocast on CUDA, float32 on the CPU)."""
        if self.model.config.dtype:
            return self.model.config.dtype
        return "bf16 autocast" if self.model.env.device == "cuda" else "float32"

    @property
    def seed(self) -> Any:
        return self.model.config.seed if self.model.config.seed is not None else self.model.env.seed

    @property
    def run_id(self) -> str:
        return self.model.run_id

    @property
    def created(self) -> str:
        """ISO time the run was written: orders reruns of one config."""
        return self.model.created

    @property
    def config_hash(self) -> str:
        """What defines the run; reruns of one config share it."""
        return self.model.config_hash

    @property
    def lr(self) -> float | None:
        budget = self.model.config.budget
        return None if budget is None else budget.lr

    @property
    def stateless(self) -> bool:
        """Whether the record says its method has no recurrent form (``method.capabilities``), so no
        decoding state: its state size is not applicable (records before the field: False)."""
        capabilities = self.model.method.capabilities
        return capabilities is not None and "recurrent" not in capabilities


def number(value: Any) -> float | None:
    """``value`` as a finite float, or None (booleans, text, NaN and inf are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value) if math.isfinite(value) else None
    except OverflowError:  # an integer beyond any float (the schema refuses them in records)
        return None


def declared_metrics(kind: str | None = None) -> dict[str, Metric]:
    """The metrics the modes declare for records of ``kind``, or for every kind, by name."""
    return modes.declared(kind)


def metric_for(name: str) -> Metric:
    """The declaration of metric ``name`` (KeyError naming the declared ones otherwise)."""
    known = declared_metrics()
    if name not in known:
        raise KeyError(f"metric {name!r} is not declared by any mode; declared: {', '.join(known)}")
    return known[name]


def safe_name(text: str) -> str:
    """``text`` reduced to characters safe in a file name and a URL."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:120] or "run"


def origin_of(folder: Path) -> str:
    """A submission folder's origin: its name as a file name, which names its rows and its copy in the build."""
    return safe_name(folder.name)


# Where a record comes from (DESIGN.md, "Submitted records"): verified, run by the project itself
# (its board command or scheduled workflow, from a pinned commit) into its results folder; or
# submitted, run by anyone else on their machine and added by pull request under submissions/.
TIERS = ("verified", "submitted")
SUBMISSION_FILE = "submission.json"  # a submission folder's metadata (docs/SUBMITTING.md)
SUBMISSION_FIELDS = ("submitter", "added", "notes")  # its text fields the site shows


def load_runs(results_dir: Path, submitted: tuple[Path, ...] = ()) -> tuple[list[Run], list[str]]:
    """The runs under ``results_dir`` (verified) and under each submission folder in ``submitted``,
    and one message per skipped file."""
    runs: list[Run] = []
    pages: set[str] = set()
    problems: list[str] = []
    sources = [(Path(results_dir), "verified", None)] + [(Path(f), "submitted", origin_of(Path(f))) for f in submitted]
    for folder, tier, origin in sources:
        metadata, problem = submission_metadata(folder) if tier == "submitted" else ({}, None)
        problems += [problem] if problem else []
        pins: dict[Path, str | None] = {}  # a BOARD_COMMIT: its pinned commit, each pin read (and refused) once
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for path, record, model in iter_loaded(folder, skip=(SUBMISSION_FILE,)):
                refused = leaves_folder(path, folder, record)
                if refused is None and (problem := records.hash_problem(record)):
                    refused = f"config_hash {problem}"  # as validate: an edited config would move the run's cell
                if refused is None and (found := records.bidi_problems(record)):
                    refused = " ".join(found[0])  # as validate: a name that reads as another would split its cell
                if refused is None and (found := records.train_problems(record)):
                    refused = "; ".join(f"{at} {why}" for at, why in found)  # as validate: no comparison reads it
                if refused:
                    problems.append(f"{path}: {refused}; skipped")
                    continue
                page = f"runs/{safe_name(model.run_id)}.html"
                suffix = 2
                while page in pages:  # two files with one run id (a copied record): both get a page
                    page = f"runs/{safe_name(model.run_id)}-{suffix}.html"
                    suffix += 1
                pages.add(page)
                source = path.relative_to(folder)
                if origin is not None:  # a submission's records sit apart from the project's in the build
                    source = Path("submitted", origin, source)
                pin = board_pin(path, folder) if tier == "verified" else None
                if pin is not None and pin not in pins:
                    pins[pin], problem = pinned_commit(pin)
                    problems += [problem] if problem else []
                pinned = pins.get(pin)
                runs.append(Run(record, model, source, page, plots_beside(model, path), path, tier, origin, metadata,
                                pinned))
        problems += [str(w.message) for w in caught]
    refused = not_the_tasks_baseline(runs)
    problems += [f"{run.file}: {why}; skipped" for run, why in refused]
    return [run for run in runs if all(run is not r for r, _ in refused)], problems


def data_key(run: Run) -> str:
    """What defines a train run's task data (its config's task block with the budget's split sizes
    written over it, as the loader reads it: tasks.data_config), and so its baseline."""
    config = run.record["config"]
    task, budget = config.get("task"), config.get("budget")
    return json.dumps(tasks.data_config(task, budget) if isinstance(task, dict) else task, sort_keys=True, default=str)


def not_the_tasks_baseline(runs: list[Run]) -> list[tuple[Run, str]]:
    """The train runs whose baseline_accuracy is not their task's, and why. The baseline is the
    task's, not a record's to say: where the task defines it from its config alone (chance in a
    recall task: tasks.baseline), that value; else (a majority class, a function of the data) the
    value the verified records of the same task data agree on (most of them, where they differ). A
    task no verified record ran keeps its records' own."""
    told: dict[str, Counter] = {}
    for run in runs:
        if run.kind == "train" and run.tier == "verified" and run.metric("baseline_accuracy") is not None:
            told.setdefault(data_key(run), Counter())[run.metric("baseline_accuracy")] += 1
    agreed = {key: counts.most_common(1)[0][0] for key, counts in told.items()}
    refused = []
    for run in runs:
        if run.kind != "train":
            continue
        config = run.record["config"].get("task")
        budget = run.record["config"].get("budget")
        defined = tasks.baseline(config.get("name"), config, budget) if isinstance(config, dict) else None
        expected, whose = ((defined, "its task's config") if defined is not None
                           else (agreed.get(data_key(run)), "the verified records' of the same task data"))
        stated = run.metric("baseline_accuracy")
        if stated is not None and expected is not None and stated != expected:  # one it does not state: validate's rule
            refused.append((run, f"field 'metrics.baseline_accuracy' is {stated!r}, not "
                                 f"its task's {expected!r} (from {whose})"))
    return refused


def board_pin(path: Path, folder: Path) -> Path | None:
    """The BOARD_COMMIT that pins a record: the nearest one above it inside ``folder`` (a board with a
    folder of its own, ``results/long/train/``, pins its records apart from ``results/train/``)."""
    for parent in path.parents:
        if not parent.is_relative_to(folder):
            return None
        pin = parent / records.PIN_FILE
        if pin.exists() or pin.is_symlink():  # a link is found, then refused by pinned_commit
            return pin
    return None


def leaves_folder(path: Path, folder: Path, record: dict) -> str | None:
    """Why a record leads outside its folder, or None: a link that resolves outside it, or a kind,
    task, method or run id (the parts of its path, records.record_path) such as ``../../x``. Other
    odd names (markup, spaces) stay inside and are shown escaped; validate refuses them."""
    root = folder.resolve()
    if not path.resolve().is_relative_to(root):
        return f"the file resolves to {str(path.resolve())!r}, outside {str(folder)!r}"
    for at, value, rule in records.path_name_problems(record):
        if not isinstance(value, str) or not (root / value).resolve().is_relative_to(root) or value in (".", ".."):
            return f"field {at!r} is {value!r}: as a path it would leave its folder (expected {rule})"
    if not records.record_path(record, root).resolve().is_relative_to(root):
        return f"its path {str(records.record_path(record, folder))!r} would leave its folder"
    return None


def submission_metadata(folder: Path) -> tuple[dict, str | None]:
    """A submission folder's submission.json (its text fields only), and a message when it is unusable."""
    path = folder / SUBMISSION_FILE
    if not path.exists() and not path.is_symlink():
        return {}, f"{path}: missing; the submission is shown without a submitter or date"
    try:
        data = json.loads(records.read_untrusted(path))
    except records.RefusedFile as exc:
        return {}, f"{exc}; the submission is shown without a submitter or date"
    except (ValueError, RecursionError) as exc:
        return {}, f"{path}: not readable JSON ({exc}); the submission is shown without a submitter or date"
    if not isinstance(data, dict):
        return {}, f"{path}: not a JSON object; the submission is shown without a submitter or date"
    return {k: data[k] for k in SUBMISSION_FIELDS if isinstance(data.get(k), str)}, None


def pinned_commit(pin: Path) -> tuple[str | None, str | None]:
    """The commit a kind's BOARD_COMMIT pins (None where there is none), and a message when it is
    refused; what a refused pin holds is never shown."""
    if not pin.exists() and not pin.is_symlink():
        return None, None
    try:
        return records.read_pin(pin), None
    except records.RefusedFile as exc:
        return None, f"{exc}; its board's runs are shown without a pinned commit"


def plots_beside(model: Record, path: Path) -> tuple[str, ...]:
    """Image files a record's metrics list under ``plots`` that exist beside it; plain file names
    only, so a record cannot point the site outside results/."""
    names = getattr(model.metrics, "plots", None) or []
    return tuple(
        n for n in names
        if Path(n).name == n and Path(n).suffix.lower() in PLOT_SUFFIXES and (path.parent / n).is_file()
    )


# What a reproduce command sets: the config groups by name, then every value of these blocks (the
# groups' own and whatever the run overrode: a learning rate, a board point's sizes, method options),
# then the top-level keys that define a run. Paths, logging and scheduling are the user's own.
REPRODUCED_GROUPS = ("mode", "method", "task", "budget", "model", "recipe")  # recipe: absent before recipes
REPRODUCED_KEYS = ("seed", "device", "cpu_threads", "memory_cap_bytes")  # cpu_threads sets every speed
NOT_REPRODUCED = {("method", "version"), ("method", "package")}  # the code's, not the user's: the harness sets them


def override_value(value: Any) -> str:
    """``value`` in Hydra's override grammar: null, true/false, numbers, [lists], quoted strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    text = str(value)
    if re.fullmatch(r"[A-Za-z_][\w.\-/]*", text) and text not in ("null", "true", "false"):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def leaf_overrides(block: Any, prefix: tuple[str, ...]) -> list[str]:
    """``key=value`` for every leaf under ``block`` (dicts are descended, lists are values)."""
    if isinstance(block, dict):
        found = []
        for key, value in block.items():
            found += leaf_overrides(value, (*prefix, str(key)))
        return found
    if prefix in NOT_REPRODUCED or prefix[-1] == "name" and len(prefix) == 2:
        return []
    return [f"{'.'.join(prefix)}={override_value(block)}"]


def outside_method(run: Run) -> str | None:
    """The import path of the record's method when its code is not the suite's own (another
    package's, or a module on the path), else None (records written before import paths were
    recorded are the suite's)."""
    path = run.record["method"].get("import_path")
    return path if path and path.split(".")[0] != "methods" else None


def install_lines(run: Run) -> list[str]:
    """What to install before the reproduce command: the suite at its recorded commit (a checkout)
    or release, then each outside distribution the record's method and task came from, the way it
    was installed (distribution_line)."""
    env_block = run.record.get("env") or {}
    if env_block.get("git_commit"):
        lines = [f"git checkout {env_block['git_commit']}"]
    elif env_block.get("suite_version"):
        lines = [f"pip install {shlex.quote('attention-suite==' + env_block['suite_version'])}"]
    else:
        lines = ["# the suite's commit and version were not recorded"]
    outside = []
    path = outside_method(run)
    if path is not None:
        outside.append((path.partition(":")[0], run.record["method"].get("distribution") or {}))
    task = run.record.get("task") or {}
    if task.get("loader"):
        outside.append((task["loader"].partition(":")[0], task.get("distribution") or {}))
    for module, dist in outside:
        line = distribution_line(module, dist)
        if line not in lines:  # a package that ships both the method and the task: one line
            lines.append(line)
    return lines


def distribution_line(module: str, dist: dict) -> str:
    """How to install one outside distribution as it was installed: an index release by version, a
    git URL at its commit, an archive by its URL; a folder or file on the machine that ran it, or a
    module on the path, is said in words (no index name is guessed: a stranger may own it there)."""
    name, version, url, commit, source = (dist.get(k) for k in ("name", "version", "url", "commit", "source"))
    dirty = " (with uncommitted changes)" if dist.get("dirty") else ""
    checkout = f", from a checkout at commit {commit}{dirty}" if commit else ""
    if url and commit and source in (None, "git"):
        return f"pip install {shlex.quote(f'git+{url}@{commit}')}"
    if name is None:
        return (f"# {module} ran from a folder on the Python path, not an installed package{checkout}: "
                "put it on PYTHONPATH")
    if source == "index":
        return f"pip install {shlex.quote(f'{name}=={version}')}"
    if source == "url" and url:
        return f"pip install {shlex.quote(url)}"
    if source == "local":
        return f"# {name} {version} was installed from a local folder or file{checkout}: not reproducible from here"
    return f"# {name} {version}: how it was installed was not recorded{checkout}: not reproducible from here"


def reproduce_command(run: Run) -> str:
    """The command line that reruns this record's config exactly: its groups by name (a method from
    outside the suite by its import path), then every value of those groups as recorded (overrides
    included), then seed, device and memory cap. A mode's grids are reproduced for the record's
    budget only (the one the run read)."""
    config = run.record["config"]
    parts = ["python", "-m", "suite"]
    for group in REPRODUCED_GROUPS:
        block = config.get(group)
        if group == "method" and outside_method(run):
            parts.append(f"method={outside_method(run)}")
        elif isinstance(block, dict) and block.get("name") is not None:
            parts.append(f"{group}={block['name']}")
    for group in REPRODUCED_GROUPS:
        block = config.get(group)
        if not isinstance(block, dict):
            continue
        if group == "mode" and isinstance(block.get("grids"), dict):
            budget = (config.get("budget") or {}).get("name")
            block = {**block, "grids": {k: v for k, v in block["grids"].items() if k == budget}}
        parts += leaf_overrides(block, (group,))
    for key in REPRODUCED_KEYS:
        if key in config:
            value = run.model.env.device if key == "device" and run.model.env.device in ("cpu", "cuda") else config[key]
            parts.append(f"{key}={override_value(value)}")
    return " ".join(shlex.quote(str(p)) for p in parts)
