"""``attention-suite validate [--submission] PATH...`` (also ``python -m suite.validate``): check
records as untrusted input, before they reach the board (docs/SUBMITTING.md).

Each problem is one line: the file, the field, what is wrong and what was expected. The exit code
is 0 when every record is valid, 1 when any problem was found, 2 when a PATH does not exist. The
check needs no GPU and no network and never writes: a file is read once, as bytes.

What is checked, per file: its size; that it parses as JSON without NaN or infinities or repeated
keys; the schema of its kind (suite/schema.py); that its kind, task, method and run id are plain
names and are where the file lies (``<kind>/<task>/<method>/<run_id>.json``); that no text holds
markup; that the config hash recomputes from the stored config; that the figures a method declares
(the state bytes of a train record, the FLOPs of a kernel record's points) recompute from the
config and the method; and the provenance. Across the files under one PATH: duplicates, and that
the runs of one board cell share one commit and differ only in the seed and the learning rate.

Provenance: every record names the commit and whether the tree was clean (or, installed from a
wheel or an index, the suite's released version in their place), the device, torch and the
method's code version. With ``--submission`` (the CI check of a pull request) it must also
name the suite's version, the method's distribution and the hardware block (suite/env.py), and
come from a clean tree; records written before those fields existed (the project's own results/)
are checked without ``--submission``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tasks
from suite import board, record_store, records
from suite import submission as packages

MARKUP = re.compile(r"<\s*/?\s*[A-Za-z!?]")  # the start of an HTML tag, comment or declaration
EXIT_PROBLEMS, EXIT_USER_ERROR = 1, 2
# (field, what it is) of the provenance every record carries, and of what a submission adds.
PROVENANCE = ((("env", "git_commit"), "the suite's commit"), (("env", "git_dirty"), "the clean-tree flag"),
              (("env", "device"), "the device type"), (("env", "device_name"), "the device's name"),
              (("env", "torch"), "torch's version"), (("method", "version"), "the method's code version"))
SUBMISSION_PROVENANCE = (
    (("env", "suite_version"), "the suite's version"),
    (("method", "distribution", "name"), "the package the method came from"),
    (("method", "distribution", "version"), "that package's version"),
    (("env", "hardware", "device_model"), "the device's model"),
    (("env", "hardware", "device_memory_bytes"), "the device's memory"),
    (("env", "hardware", "torch"), "torch's version"),
)
GIT_PROVENANCE = (("env", "git_commit"), ("env", "git_dirty"))
# A released version (PEP 440 without a dev or local part): what a wheel of the suite records in place of a commit.
RELEASE = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?")
# Present in a submission's hardware block even when null (null: not installed, or not on a GPU).
SUBMISSION_HARDWARE_KEYS = ("driver", "cuda", "triton", "fla")
CUDA_HARDWARE = ("driver", "cuda")  # must not be null on a GPU


@dataclass(frozen=True)
class Problem:
    path: Path
    field: str
    what: str
    expected: str

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.what}; expected {self.expected}"


@dataclass
class Checked:
    """A file that parsed and matched its schema, for the checks across files."""

    path: Path
    record: dict
    digest: str


def get(record: Any, at: tuple[str, ...]) -> Any:
    for key in at:
        record = record.get(key) if isinstance(record, dict) else None
    return record


def has(record: Any, at: tuple[str, ...]) -> bool:
    for key in at:
        if not isinstance(record, dict) or key not in record:
            return False
        record = record[key]
    return True


def unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object's keys, refusing a repeated one (json keeps the last silently: the record a
    reader sees would not be the one a reviewer read)."""
    keys = Counter(k for k, _ in pairs)
    repeated = [k for k, n in keys.items() if n > 1]
    if repeated:
        raise ValueError(f"key {repeated[0]!r} appears {keys[repeated[0]]} times in one object")
    return dict(pairs)


# -- one file -----------------------------------------------------------------------------------------

FILE_EXPECTED = f"a regular file (not a link, folder, FIFO or device) of at most {records.MAX_FILE_BYTES:,} bytes"


def read(path: Path) -> tuple[bytes | None, list[Problem]]:
    """The bytes of a file from outside (suite/records.py, read_untrusted: the site's reader and cap),
    or the problem that says why it was not read, never what it holds."""
    try:
        return records.read_untrusted(path), []
    except records.RefusedFile as exc:
        return None, [Problem(path, "file", exc.reason, FILE_EXPECTED)]


def parse(path: Path, data: bytes) -> tuple[Any, list[Problem]]:
    """The file's JSON, or the problem that stops every other check of it."""
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=unique_keys), []
    except UnicodeDecodeError as exc:
        return None, [Problem(path, "file", f"not UTF-8 text ({exc.reason} at byte {exc.start})", "a UTF-8 JSON file")]
    except json.JSONDecodeError as exc:
        return None, [Problem(path, "file", f"not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno})",
                              "one complete JSON object")]
    except (ValueError, RecursionError) as exc:
        return None, [Problem(path, "file", f"not a usable JSON object ({exc})", "each key once, nesting < 1000")]


def check_file(path: Path, submission: bool) -> tuple[Checked | None, list[Problem]]:
    """The file's problems, and the record when its JSON and schema are sound."""
    data, problems = read(path)
    if not problems:
        record, problems = parse(path, data)
    if problems:
        return None, problems
    problems = [Problem(path, at, f"{value} is not a number JSON allows",
                        "a finite number (null where nothing was measured)")
                for at, value in records.leaves(record) if isinstance(value, float) and not math.isfinite(value)]
    if problems:
        return None, problems
    try:
        record_store.validate(record, "record")
    except records.RecordError as exc:
        return None, [Problem(path, "schema", str(exc).removeprefix("record: "), "a record of its kind's schema "
                              "(the site's schema/record-<kind>.json)")]
    problems += [Problem(path, at, f"{value!r} names a folder or file but is not a plain name (it could lead "
                         "outside the folder)", rule)
                 for at, value, rule in records.path_name_problems(record)]
    problems += markup_problems(path, record)
    if not problems:
        problems += location_problems(path, record)
    problems += hash_problems(path, record) + seed_problems(path, record) + baseline_problems(path, record)
    problems += [Problem(path, at, why, "a record as suite/training.py writes it")
                 for at, why in records.train_problems(record)]
    problems += provenance_problems(path, record, submission)
    if not problems:  # a method is built only from a record that passed every check above
        problems += declared_problems(path, record)
    return Checked(path, record, hashlib.sha256(data).hexdigest()), problems


def markup_problems(path: Path, record: dict) -> list[Problem]:
    """Text that a page could read as markup, or that reorders the text around it (the site escapes
    markup; a record has no reason to hold either)."""
    found = []
    for at, value in records.leaves(record):
        if isinstance(value, str) and (match := MARKUP.search(value)):
            found.append(Problem(path, at, f"holds markup {value[match.start():match.start() + 12]!r}", "plain text"))
        if what := records.bidi_control(value):
            found.append(Problem(path, at, what, "plain text"))
    return found


def location_problems(path: Path, record: dict) -> list[Problem]:
    """A record lies at <kind>/<task>/<method>/<run_id>.json under its folder."""
    expected = records.record_path(record, ".").parts[-4:]
    if path.parts[-4:] != expected:
        where = "/".join(path.parts[-4:])
        return [Problem(path, "location", f"the file lies at .../{where}",
                        f".../{'/'.join(expected)} (kind/task/method/run_id.json, from its fields)")]
    return []


def hash_problems(path: Path, record: dict) -> list[Problem]:
    problem = records.hash_problem(record)
    return [Problem(path, "config_hash", problem, "the hash of the config as stored")] if problem else []


def seed_problems(path: Path, record: dict) -> list[Problem]:
    """A train run of a board's budget is one of its protocol's seeds (the site leaves any other out of its cell)."""
    budget, seed = get(record, ("config", "budget", "name")), get(record, ("config", "seed"))
    seeds = board.protocol_seeds().get(budget)
    if record["kind"] == "train" and seeds is not None and seed not in seeds:
        return [Problem(path, "config.seed", f"{seed!r} is not a seed of the {budget} board's protocol",
                        f"one of {', '.join(map(str, seeds))}")]
    return []


def baseline_problems(path: Path, record: dict) -> list[Problem]:
    """A train record's baseline is its task's, where the task defines it from its config alone
    (tasks.baseline: chance in a recall task; a generated task's majority class from its family's
    table), not the record's to say."""
    stated, task = get(record, ("metrics", "baseline_accuracy")), get(record, ("config", "task"))
    budget = get(record, ("config", "budget"))
    defined = tasks.baseline(task.get("name"), task, budget) if isinstance(task, dict) else None
    if record["kind"] != "train" or stated is None or defined is None or stated == defined:
        return []
    return [Problem(path, "metrics.baseline_accuracy", f"{stated!r} is not its task's baseline",
                    f"{defined!r}, as the task's config defines it")]


def provenance_problems(path: Path, record: dict, submission: bool) -> list[Problem]:
    required = PROVENANCE + (SUBMISSION_PROVENANCE if submission else ())
    if get(record, ("env", "git_commit")) is None and released(get(record, ("env", "suite_version"))):
        # a wheel or an index release names its code by version; it has no checkout to be clean or not
        required = tuple(item for item in required if item[0] not in GIT_PROVENANCE)
    found = [Problem(path, ".".join(at), "missing" if not has(record, at) else "null", what)
             for at, what in required if get(record, at) is None]
    commit = get(record, ("env", "git_commit"))
    if isinstance(commit, str) and not records.FULL_COMMIT.fullmatch(commit):
        found.append(Problem(path, "env.git_commit", f"{commit!r} is not a commit", "40 hexadecimal digits"))
    if not submission:
        return found
    if get(record, ("env", "git_dirty")) is True:
        found.append(Problem(path, "env.git_dirty", "true: the checkout had uncommitted changes",
                             "false (a submission runs from a clean checkout of a suite commit)"))
    hardware = get(record, ("env", "hardware"))
    if isinstance(hardware, dict):
        found += [Problem(path, f"env.hardware.{key}", "missing", "the key, null if not installed or not on a GPU")
                  for key in SUBMISSION_HARDWARE_KEYS if key not in hardware]
        if get(record, ("env", "device")) == "cuda":
            found += [Problem(path, f"env.hardware.{key}", "null on a GPU", f"the {key} version")
                      for key in CUDA_HARDWARE if key in hardware and hardware[key] is None]
    return found


def released(version: object) -> bool:
    """Whether ``version`` names a release of the suite (0.1.0, 1.2rc1), not a development build."""
    return isinstance(version, str) and RELEASE.fullmatch(version) is not None


# -- what a method declares, recomputed ---------------------------------------------------------------

def build_method(record: dict, head_dim: int, layer: int = 0):
    """The record's method as its run built it (suite/model.py: a method that draws at random
    draws per attention layer, from its seed plus the layer's index)."""
    import methods

    config = record["config"]["method"]
    options = dict(config.get("options") or {})
    if "seed" in methods.get(config["name"]).method_options:
        options["seed"] = (options.get("seed") or 0) + layer
    return methods.build(config["name"], head_dim=head_dim, impl=config.get("impl", "auto"), **options)


def train_state_bytes(record: dict) -> int:
    """The decoding state after a full-length prompt, summed over attention layers, as the method
    declares it (``state_bytes``); what suite/model.py (recurrent_state_bytes) measures from ``prefill_state``."""
    model = record["config"]["model"]
    mixers = model.get("mixers") or ["attention"]
    layers = [mixers[i % len(mixers)] for i in range(model["num_layers"])].count("attention")
    heads, head_dim = model["num_heads"], model["d_model"] // model["num_heads"]
    return sum(build_method(record, head_dim, layer).state_bytes(1, heads, record["task"]["seq_len"], head_dim)
               for layer in range(layers))


def kernel_flops(record: dict, point: dict) -> dict[str, float]:
    """The forward and forward+backward FLOPs of one of the method's own points, as declared."""
    module = build_method(record, point["head_dim"])
    args = (point["batch"], point["heads"], point["length"], point["value_dim"], point["causal"])
    forward = module.forward_flops(*args, impl=point["impl"])
    return {"fwd_flops": forward, "fwdbwd_flops": forward + module.backward_flops(*args, impl=point["impl"])}


def close(stored: Any, recomputed: float) -> bool:
    return isinstance(stored, (int, float)) and math.isclose(stored, recomputed, rel_tol=1e-9)


def declared_problems(path: Path, record: dict) -> list[Problem]:
    """The state bytes (train) and FLOPs (kernel) a record states, against the method's declaration."""
    import methods

    # Only what is installed and registered here (the suite's methods and installed distributions'
    # entry points): a record's method.import_path is never imported, for a record is untrusted input
    # and importing a module runs its code (installing a submission's package is CI's step, before this).
    name = record["method"]["name"]
    if name not in methods.available():
        return [Problem(path, "method.name", f"unknown method {name!r} (validate imports no module a record names), "
                        "so what it declares cannot be recomputed",
                        f"one of {', '.join(methods.available())}, or its package installed with its entry point")]
    ran, current = record["method"].get("version", 1), methods.get(name).version
    if ran != current:  # what that version declared is in the code of the commit it names, not here
        return [Problem(path, "method.version", f"{name} version {ran!r} is not this suite's version {current}, so "
                        "what it declares cannot be recomputed here", f"a record of {name} version {current}")]
    found = []
    try:
        if record["kind"] == "train" and record["status"] == "ok":
            stored = record["metrics"].get("state_bytes")
            recurrent = "recurrent" in methods.get(name).capabilities()
            recomputed = train_state_bytes(record) if recurrent else None
            if stored is not None and not recurrent:
                found.append(Problem(path, "metrics.state_bytes", f"{stored} for {name}, which has no recurrent form",
                                     "null (no decoding state)"))
            elif stored is not None and stored != recomputed:
                found.append(Problem(path, "metrics.state_bytes", f"{stored} does not recompute from the config and "
                                     f"the method ({recomputed})", f"{recomputed}"))
        if record["kind"] == "kernel":
            for i, point in enumerate(record["metrics"].get("points") or []):
                if point.get("source") != "method" or point.get("status") == "skipped" and "fwd_flops" not in point:
                    continue
                if point.get("fwd_flops") is None and "flops" not in record["method"].get("capabilities", ["flops"]):
                    continue  # a method that declares no FLOPs is timed without them
                for key, recomputed in kernel_flops(record, point).items():
                    if key in point and not close(point[key], recomputed):
                        found.append(Problem(path, f"metrics.points[{i}].{key}", f"{point[key]} does not recompute "
                                             f"from the point and the method ({recomputed:g})", f"{recomputed:g}"))
    except (KeyError, TypeError, ValueError, ZeroDivisionError, methods.MethodError) as exc:
        found.append(Problem(path, "config", f"the method cannot be built from it ({type(exc).__name__}: {exc})",
                             "the config the run was made with"))
    return found


# -- across files -------------------------------------------------------------------------------------

# What the runs of one board cell share besides their config: one code version and one setting.
# The config hash leaves these out (the commit, the thread count), yet a cell mixing them averages
# runs of different code or different speed.
CELL_SHARED = ((("env", "git_commit"), "one commit per cell"),
               (("env", "suite_version"), "one suite version per cell"),
               (("method", "distribution", "version"), "one version of the method's package per cell"),
               (("env", "device_name"), "one device per cell"),
               (("env", "hardware", "device_model"), "one device model per cell"),
               (("config", "cpu_threads"), "one CPU thread count per cell"))


def cell_shared(record: dict, at: tuple[str, ...]) -> Any:
    """The value at ``at`` that a board cell's runs share. A CPU's env.device_name is read as the site
    reads it (records.hardware_class): with the threads the run itself used, which a record before
    a3321d7 has in its metrics, not in its device name (the launching process's threads)."""
    if at == ("env", "device_name") and get(record, at) is not None:
        return records.hardware_class(record)
    return get(record, at)


def board_cell(record: dict) -> tuple:
    """A train run's board cell (suite/site/board.py): its configuration without the seed and the
    learning rate (records.cell_key), on one device type."""
    return records.cell_key(record["config"]), record["env"].get("device")


def duplicate_problems(checked: list[Checked]) -> list[Problem]:
    found, by_id, by_digest = [], {}, {}
    for item in checked:
        run_id = item.record["run_id"]
        if run_id in by_id:
            found.append(Problem(item.path, "run_id", f"{run_id!r} is also the run id of {by_id[run_id]}",
                                 "one file per run"))
        elif item.digest in by_digest:
            found.append(Problem(item.path, "file", f"the same bytes as {by_digest[item.digest]}", "one file per run"))
        by_id.setdefault(run_id, item.path)
        by_digest.setdefault(item.digest, item.path)
    return found


def cell_problems(checked: list[Checked]) -> list[Problem]:
    """The runs of one board cell share one code version and one setting (CELL_SHARED); the one
    that differs from most of its cell is named."""
    cells: dict[tuple, list[Checked]] = {}
    for item in checked:
        if item.record["kind"] == "train":
            cells.setdefault(board_cell(item.record), []).append(item)
    found = []
    for runs in cells.values():
        for at, expected in CELL_SHARED:
            values = Counter(json.dumps(cell_shared(r.record, at)) for r in runs)
            usual, count = values.most_common(1)[0]
            for run in runs:
                mine = json.dumps(cell_shared(run.record, at))
                if mine != usual and get(run.record, at) is not None:  # a missing value is told as provenance
                    found.append(Problem(run.path, ".".join(at), f"{mine} while {count} of the {len(runs) - 1} other "
                                         f"runs of its board cell have {usual}", expected))
    return found


# -- the command --------------------------------------------------------------------------------------

def files_under(root: Path) -> tuple[list[Path], list[Problem]]:
    """The .json files under ``root`` (itself if a file); links are refused, not followed: a link
    could lead a check, or the site, outside the submitted folder."""
    if root.is_symlink():
        return [], [Problem(root, "file", "a symbolic link", "a plain file or folder")]
    if not root.is_dir():
        return [root], []  # a FIFO or device too: the reader refuses it in one line
    found, problems = [], []
    for folder, dirs, names in os.walk(root):
        for name in sorted(dirs + names):
            path = Path(folder, name)
            if path.is_symlink():
                problems.append(Problem(path, "file", "a symbolic link", "a plain file inside the folder"))
            elif name.endswith(".json") and name in names and name != SUBMISSION_FILE:
                found.append(path)  # not only regular files: the reader refuses a FIFO or device in one line
        dirs[:] = sorted(d for d in dirs if not Path(folder, d).is_symlink())
    return sorted(found), problems


SUBMISSION_FILE = "submission.json"  # a submission folder's metadata (docs/SUBMITTING.md)
SUBMISSION_KEYS = {"submitter": "who ran the records (a name, or a GitHub handle)",
                   "added": "the date the records were submitted, YYYY-MM-DD"}


def metadata_problems(root: Path) -> list[Problem]:
    """A submission folder's submission.json: who submitted it and when (docs/SUBMITTING.md)."""
    path = root / SUBMISSION_FILE
    if path.is_symlink():
        return []  # files_under refuses it
    if not path.exists():
        return [Problem(path, "file", "missing", 'a JSON object {"submitter": ..., "added": "YYYY-MM-DD"}')]
    data, problems = read(path)
    if not problems:
        data, problems = parse(path, data)
    if problems:
        return problems
    if not isinstance(data, dict):
        return [Problem(path, "file", "not a JSON object", 'a JSON object {"submitter": ..., "added": "YYYY-MM-DD"}')]
    found = [Problem(path, key, "missing or not text", what) for key, what in SUBMISSION_KEYS.items()
             if not isinstance(data.get(key), str)]
    if isinstance(data.get("added"), str) and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["added"]):
        found.append(Problem(path, "added", f"{data['added']!r}", "a date, YYYY-MM-DD"))
    return found + markup_problems(path, data)


def check_folder(root: Path, submission: bool) -> tuple[int, list[Problem]]:
    """(files checked, problems) of every record under ``root`` (and, of a submission, its metadata)."""
    paths, problems = files_under(root)
    if submission and root.is_dir():
        problems += metadata_problems(root)
    checked = []
    for path in paths:
        item, found = check_file(path, submission)
        problems += found
        if item is not None:
            checked.append(item)
    problems += duplicate_problems(checked) + cell_problems(checked) + pinned_problems(root, checked)
    if submission and root.is_dir():  # the packages its outside methods and tasks need (suite/submission.py)
        problems += [Problem(*found) for found in packages.problems(root, [(c.path, c.record) for c in checked])]
    return len(paths), problems


def pinned_problems(root: Path, checked: list[Checked]) -> list[Problem]:
    """The records under a folder that pins its board's commit (BOARD_COMMIT) ran at that commit."""
    found = []
    for pin in sorted(root.rglob(records.PIN_FILE)) if root.is_dir() else []:
        if pin.is_symlink():
            continue  # files_under refuses it
        try:
            pinned = records.read_pin(pin)
        except records.RefusedFile as exc:
            found.append(Problem(pin, "file", exc.reason, "a regular file holding the board's commit"))
            continue
        for item in checked:
            commit = get(item.record, ("env", "git_commit"))
            if item.path.is_relative_to(pin.parent) and commit is not None and commit != pinned:
                found.append(Problem(item.path, "env.git_commit", f"{str(commit)[:12]} under a board pinned at "
                                     f"{pinned[:12]} ({pin})", "the pinned commit"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attention-suite validate", description=__doc__.split("\n\n")[1])
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="record files or folders of records")
    parser.add_argument("--submission", action="store_true",
                        help="require a submission's provenance: suite version, method distribution, hardware, "
                        "clean tree, submission.json")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists() and not p.is_symlink()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USER_ERROR
    files, problems = 0, []
    for root in args.paths:
        count, found = check_folder(root, args.submission)
        files, problems = files + count, problems + found
    for problem in problems:
        print(problem)
    bad = len({p.path for p in problems})
    if problems:
        print(f"validate: {len(problems)} problem(s) in {bad} file(s) of {files} checked", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"validate: {files} record(s), all valid", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
