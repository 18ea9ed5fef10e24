"""Result records: one JSON file per run, the leaderboard's only input (DESIGN.md, "The record").

A record is written to a temporary file in its destination folder, flushed to disk, then renamed
over its final name, so a reader (or a crash) never sees half a record. The writer and the reader
(suite/record_store.py) check a record against its kind's schema (suite/schema.py), the one the site
reads and publishes. This module is the records' vocabulary (their fields, config hash, paths, atomic
write, the checks every kind shares): it imports no mode, and the modes' jobs import it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from suite import recipe, schema
from suite.schema import INT_LIMIT

# Every field of a record and the JSON type it must have (read from the schema).
FIELD_TYPES: dict[str, type | tuple[type, ...]] = schema.top_level_types()
FIELDS = tuple(FIELD_TYPES)
SHOWN_PROBLEMS = 3  # of a record that does not validate, the problems its error message lists

# Where a run's files go, how it is watched or scheduled, or how many CPU threads it takes does not
# change what the run measures (the threads change its speed, which the record reports beside).
NON_DEFINING_KEYS = frozenset({"results_dir", "data_dir", "hydra", "logger", "force", "protocol", "cpu_threads",
                               "resume"})
# How often a run saves a checkpoint does not change its result either (a resumed run ends the same).
NON_DEFINING_BUDGET_KEYS = frozenset({"checkpoint_every"})
# A model's name labels its sizes, which are all in the block: two models of the same sizes compute the same.
NON_DEFINING_MODEL_KEYS = frozenset({"name"})
# Keys added to the config after records were published, each with the value that computes what a
# config without the key computed: a config holding that value hashes as one that lacks the key, so
# a new key never makes a finished run look unfinished. (A key whose value is null is never hashed
# either: null is "off" or "the default" everywhere in conf/.) Raise HASH_VERSION instead when a change of
# the code alters what an unchanged config computes: every earlier run then counts as another config.
NEUTRAL_VALUES: dict[tuple[str, ...], Any] = {
    ("model", "mixers"): ["attention"],
    ("model", "position"): "learned",
    ("model", "mlp"): True,
    ("model", "conv_kernel"): 3,
    ("method", "version"): 1,  # the method's code version (suite.run.with_method_version)
    ("task", "test_lengths"): [],
    # The suite's own recipe is what every run computed before recipes existed: the block hashes
    # only when it differs (another recipe, or a switch set), and then whole, its name with it,
    # so that no two recipes' runs share a hash or a board cell.
    ("recipe",): recipe.SUITE,
}
HASH_VERSION = 1
# What the learning-rate protocol varies inside one board cell (see suite.protocol).
SWEPT_KEYS = (("budget", "lr"), ("seed",))


class RecordError(ValueError):
    """A file under results/ that is not a readable record of a known schema."""


def scrub_home(value: Any) -> Any:
    """``value`` with the user's home directory replaced by ``~`` in every string, recursively."""
    home = str(Path.home())
    if isinstance(value, str):
        return value.replace(home, "~") if home not in ("/", "") else value
    if isinstance(value, Mapping):
        return {k: scrub_home(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_home(v) for v in value]
    return value


def _without_neutral(node: Mapping, path: tuple[str, ...] = ()) -> dict:
    """``node`` without null values and without added keys at their neutral value, recursively."""
    kept = {}
    for key, value in node.items():
        at = (*path, key)
        if value is None or (at in NEUTRAL_VALUES and value == NEUTRAL_VALUES[at]):
            continue
        kept[key] = _without_neutral(value, at) if isinstance(value, Mapping) else value
    return kept


def defining_config(config: Mapping) -> dict:
    """The part of ``config`` that defines what a run measures (not where it writes, how it is
    scheduled or watched, how often it checkpoints), in the form that is hashed."""
    defining = {k: v for k, v in config.items() if k not in NON_DEFINING_KEYS}
    if isinstance(defining.get("budget"), Mapping):
        defining["budget"] = {k: v for k, v in defining["budget"].items() if k not in NON_DEFINING_BUDGET_KEYS}
    if isinstance(defining.get("model"), Mapping):
        defining["model"] = {k: v for k, v in defining["model"].items() if k not in NON_DEFINING_MODEL_KEYS}
    mode, budget = defining.get("mode"), defining.get("budget")
    if isinstance(mode, Mapping) and isinstance(mode.get("grids"), Mapping) and isinstance(budget, Mapping):
        # A mode reads the grid of the run's budget only: another budget's grid changing changes nothing.
        defining["mode"] = {**mode, "grids": {k: v for k, v in mode["grids"].items() if k == budget.get("name")}}
    return _without_neutral(defining)


def _digest(defining: Mapping) -> str:
    versioned = {**defining, "hash_version": HASH_VERSION} if HASH_VERSION > 1 else defining
    canonical = json.dumps(versioned, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def config_hash(config: Mapping, device_type: str) -> str:
    """A stable hash of what defines a run: the config without paths, plus the resolved device."""
    return _digest({**defining_config(config), "device": device_type})


def record_config_hash(record: Mapping) -> str:
    """The config hash of a record's run under today's rule (the stored ``config_hash`` is the one
    of the rule it was written under)."""
    return config_hash(record["config"], str(record["env"].get("device", "cpu")))


def hash_problem(record: Mapping) -> str | None:
    """Why a record's stored config hash is not its config's (a hand edit of the config, the lr
    say, that would move it to another cell), in words; None when it recomputes."""
    recomputed = record_config_hash(record)
    if recomputed != record["config_hash"]:
        return (f"{record['config_hash']!r} does not recompute from the stored config and env.device (it gives "
                f"{recomputed!r})")
    return None


# A character that reorders the text around it on a page (a "Trojan Source" device name reads as another).
BIDI = re.compile("[\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")


def leaves(value: Any, at: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every scalar in a parsed JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{at}.{key}" if at else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from leaves(item, f"{at}[{i}]")
    else:
        yield at, value


def bidi_control(value: Any) -> str | None:
    """What is wrong with ``value`` if it is a text holding a bidirectional control, in words."""
    match = BIDI.search(value) if isinstance(value, str) else None
    return f"holds the bidirectional control character U+{ord(match.group()):04X}" if match else None


def bidi_problems(record: Mapping) -> list[tuple[str, str]]:
    """(field, what) of each text of ``record`` that holds a bidirectional control (validate refuses
    the record; the site leaves it out, since a device name that reads as another splits a cell)."""
    return [(at, what) for at, value in leaves(record) if (what := bidi_control(value))]


def number_or_none(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def train_problems(record: Mapping) -> list[tuple[str, str]]:
    """Why an ok train record cannot be compared, as (field, why): its early-stop fields contradict
    its validation curve or its steps (suite/training.py stops at the first evaluation at or above
    budget.target_val_accuracy, and stopped_early is steps < max_steps), or it states no test size
    (the comparison test's binomial term needs it: budget.num_test, else task.num_test)."""
    if record.get("kind") != "train" or record.get("status") != "ok":
        return []
    metrics, config = record.get("metrics") or {}, record.get("config") or {}
    budget = config.get("budget") if isinstance(config.get("budget"), Mapping) else {}
    task = record.get("task") if isinstance(record.get("task"), Mapping) else {}
    problems = []
    if number_or_none(budget.get("num_test")) is None and number_or_none(task.get("num_test")) is None:
        problems.append(("task.num_test", "states no test size (nor budget.num_test): the comparison test needs it"))
    stopped, steps = metrics.get("stopped_early"), number_or_none(metrics.get("steps"))
    target, limit = number_or_none(budget.get("target_val_accuracy")), number_or_none(budget.get("max_steps"))
    curve = [p for p in metrics.get("val_curve") or [] if isinstance(p, list) and len(p) == 2
             and number_or_none(p[0]) is not None and number_or_none(p[1]) is not None]
    best = number_or_none(metrics.get("val_accuracy"))
    if stopped is True:
        if target is None:
            problems.append(("metrics.stopped_early", "is true, but the budget sets no target_val_accuracy to stop at"))
        elif best is not None and best < target:
            problems.append(("metrics.stopped_early", f"is true, but the best validation accuracy {best!r} is below "
                             f"budget.target_val_accuracy {target!r}"))
        elif curve and max(a for _, a in curve) < target:
            problems.append(("metrics.stopped_early", f"is true, but no point of metrics.val_curve reaches "
                             f"budget.target_val_accuracy {target!r}"))
        if steps is not None and limit is not None and steps >= limit:
            problems.append(("metrics.stopped_early", f"is true, but metrics.steps {steps:g} is budget.max_steps"))
    if stopped is False:
        if target is not None and limit is not None and any(a >= target and s < limit for s, a in curve):
            problems.append(("metrics.stopped_early", f"is false, but metrics.val_curve reaches "
                             f"budget.target_val_accuracy {target!r} before budget.max_steps, where the run stops"))
        if steps is not None and limit is not None and steps < limit:
            problems.append(("metrics.stopped_early", f"is false, but metrics.steps {steps:g} is below "
                             f"budget.max_steps {limit:g}"))
    return problems


THREADS = re.compile(r"\(\d+ threads\)$")  # the end of a CPU's env.device_name: "AMD EPYC (1 threads)"


def hardware_class(record: Mapping) -> str:
    """The machine's class of a record: the device's model (a GPU's name; a CPU's model with the
    threads the run used, as env.device_name states them: 'AMD EPYC (1 threads)'); speed and memory
    compare only between runs of one hardware class, and a board cell's runs share one. A CPU record
    with env.hardware names the same class as one without, so one machine is never two hosts."""
    env = record.get("env") or {}
    if env.get("device") == "cpu" and env.get("device_name"):
        # Records before a3321d7 named the launching process's threads; the run's own are in its record.
        threads = (record.get("metrics") or {}).get("cpu_threads") or (record.get("config") or {}).get("cpu_threads")
        if isinstance(threads, int) and not isinstance(threads, bool) and threads > 0:
            return THREADS.sub(f"({threads} threads)", str(env["device_name"]))
        return str(env["device_name"])
    model = (env.get("hardware") or {}).get("device_model")
    return str(model or env.get("device_name") or env.get("device") or "not recorded")


def cell_key(config: Mapping) -> str:
    """A hash of what defines a board cell: the run's defining config without the learning rate
    and the seed, which the protocol sweeps inside the cell."""
    defining = defining_config(config)
    defining["budget"] = {k: v for k, v in defining.get("budget", {}).items() if k != "lr"}
    defining.pop("seed", None)
    return _digest(defining)


def measured_key(config: Mapping) -> str:
    """What a cell's configuration is, whichever mode measured it: its cell_key without the mode's
    block. A train record and the cost record of the same configuration share it (the site joins a
    cell's accuracy to what it costs by it)."""
    return cell_key({k: v for k, v in config.items() if k != "mode"})


def select_lr(runs: list[Mapping]) -> float | None:
    """The learning rate a sweep chooses from its records (one per rate at the first seed): the best
    validation accuracy of an ok run, ties broken by fewer steps, then the smaller rate; None when
    no run is ok."""
    ok = [r for r in runs if r["status"] == "ok" and r["metrics"].get("val_accuracy") is not None]
    if not ok:
        return None
    best = max(ok, key=lambda r: (r["metrics"]["val_accuracy"], -r["metrics"].get("steps", 0),
                                  -r["config"]["budget"]["lr"]))
    return best["config"]["budget"]["lr"]


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def new_run_id(config_hash: str) -> str:
    """The UTC time, the config hash and a random suffix (32 bits: concurrent runs of one config in
    one second must not overwrite each other's records)."""
    stamp = utc_now().replace("-", "").replace(":", "")
    return f"{stamp}_{config_hash[:8]}_{secrets.token_hex(4)}"


# A record's kind, task, method and run id name the folders and the file it is stored at, so each
# must be one plain path component: no separator, no "..", nothing a shell or a page reads as markup.
# A kind's, task's or method's name is an identifier, the method registry's rule (methods/registry.py
# NAME: methods/ imports no harness, so a test holds the two equal); a run id is a plain file name.
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
NAME_RULE = "a lower-case letter, then lower-case letters, digits and _, at most 64"
PATH_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
PATH_NAME_RULE = "letters, digits and _ . + -, at most 128, starting with a letter or digit"
PATH_FIELDS = ((("kind",), NAME, NAME_RULE), (("task", "name"), NAME, NAME_RULE),
               (("method", "name"), NAME, NAME_RULE), (("run_id",), PATH_NAME, PATH_NAME_RULE))


def path_name_problems(record: Mapping) -> list[tuple[str, Any, str]]:
    """(field, value, rule) of each field of ``record`` that names a folder or file but breaks its rule."""
    found = []
    for at, pattern, rule in PATH_FIELDS:
        value: Any = record
        for key in at:
            value = value.get(key) if isinstance(value, Mapping) else None
        if not isinstance(value, str) or not pattern.fullmatch(value):
            found.append((".".join(at), value, rule))
    return found


# What a record states twice: where the board and the file's path read it, and in the config the run
# composed. A hand edit of one copy (a linear record renamed softmax at the top) is refused, not shown.
RESTATED = ((("method", "name"), ("config", "method", "name")), (("kind",), ("config", "mode", "name")),
            (("env", "seed"), ("config", "seed")))


def restated_problem(record: Mapping) -> str | None:
    """The first field of ``record`` whose two copies (RESTATED) disagree, in words; None if none
    does (a copy absent, as in records older than the field, is not compared)."""
    for first, second in RESTATED:
        values = []
        for at in (first, second):
            value: Any = record
            for key in at:
                value = value.get(key) if isinstance(value, Mapping) else None
            values.append(value)
        if None not in values and values[0] != values[1]:
            return (f"field {'.'.join(first)!r} is {values[0]!r} but {'.'.join(second)!r} is {values[1]!r}; "
                    "expected one value")
    return None


def record_path(record: Mapping, results_dir: str | Path) -> Path:
    """``<results_dir>/<kind>/<task>/<method>/<run_id>.json``."""
    return (
        Path(results_dir) / record["kind"] / record["task"]["name"] / record["method"]["name"]
        / f"{record['run_id']}.json"
    )


# The most a file from outside (a record, BOARD_COMMIT, submission.json, a kept record) may hold:
# validate and the site read with one cap. The largest committed record (a kernel sweep) is ~330 kB.
MAX_FILE_BYTES = 2 * 2**20
FILE_TYPES = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
              stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symbolic link (not followed)"}


class RefusedFile(Exception):
    """A file from outside that is not read: ``reason`` says why, never what the file holds."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def read_untrusted(path: str | Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, or RefusedFile. A link is refused,
    not followed (it could lead to any file, or to /dev/zero), and so is anything but a regular file
    (a FIFO or a device would block or never end); the size is checked before reading, and again on
    the open file, which is opened non-blocking and without following a link put there meanwhile."""
    path = Path(path)
    try:
        kind = stat.S_IFMT(os.lstat(path).st_mode)
        if kind != stat.S_IFREG:
            raise RefusedFile(path, FILE_TYPES.get(kind, "not a regular file"))
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            opened = os.fstat(fd)  # the file opened, which may have been swapped since lstat
            if not stat.S_ISREG(opened.st_mode):
                raise RefusedFile(path, FILE_TYPES.get(stat.S_IFMT(opened.st_mode), "not a regular file"))
            data = b""
            while max(opened.st_size, len(data)) <= limit and (chunk := os.read(fd, limit + 1 - len(data))):
                data += chunk  # one byte past the cap at most: a file that grows while read is caught
        finally:
            os.close(fd)
    except OSError as exc:
        raise RefusedFile(path, f"not readable ({exc.strerror or exc})") from None
    if max(opened.st_size, len(data)) > limit:
        raise RefusedFile(path, f"{max(opened.st_size, len(data)):,} bytes, above the cap of {limit:,} bytes")
    return data


PIN_FILE = "BOARD_COMMIT"  # in a kind's folder: the commit its board ran at (scripts/board_cpu.sh)
FULL_COMMIT = re.compile(r"[0-9a-f]{40}")


def read_pin(path: str | Path) -> str:
    """The commit a BOARD_COMMIT file pins, or RefusedFile (read as any file from outside; what a
    file that holds no commit holds is not repeated)."""
    commit = read_untrusted(path, limit=4096).decode("ascii", "replace").strip()
    if not FULL_COMMIT.fullmatch(commit):
        raise RefusedFile(Path(path), "does not hold a commit (40 hexadecimal digits)")
    return commit


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write`` a temporary file beside ``path``, flush it to disk, then rename it over ``path``:
    a reader, a crash or a concurrent writer never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unrepresentable(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first number anywhere in ``value`` (the keys no schema names included) that no reader can
    take as it is: NaN or an infinity (JSON has neither; Python's parser reads them), or an integer
    beyond 64 bits (it overflows the float a table or chart makes of it). (field path, why) or None."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    elif isinstance(value, float) and not math.isfinite(value):
        return path, f"{value} is not a finite number"
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_LIMIT:
        return path, f"an integer of {len(str(abs(value)))} digits is beyond 64 bits (at most {INT_LIMIT})"
    else:
        return None
    for key, item in items:
        found = unrepresentable(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def describe(exc: ValidationError) -> str:
    """The first few problems of a failed validation, each naming its field's path."""
    errors = exc.errors(include_url=False)
    shown = [f"field {'.'.join(map(str, e['loc']))!r}: {e['msg']}" for e in errors[:SHOWN_PROBLEMS]]
    more = f" (and {len(errors) - SHOWN_PROBLEMS} more)" if len(errors) > SHOWN_PROBLEMS else ""
    return "; ".join(shown) + more


def file_in_the_way(folder: Path) -> Path | None:
    """The file standing where ``folder``, or a folder above it, should be; None if there is none."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def why_not_written(exc: Exception, path: Path) -> str:
    """What stopped a write of ``path``, in a line: ``<file> is a file`` where a folder should be, else
    the file and the system's reason ("No space left on device")."""
    if isinstance(exc, OSError):
        blocking = file_in_the_way(path.parent)
        if blocking is not None:
            return f"{blocking} is a file, where a folder of {path} should be"
        return f"{exc.filename or path}: {exc.strerror or exc}"
    return str(exc)


def check_folder(key: str, folder: str | Path) -> None:
    """Fail before any work if a file stands where the folder ``key`` names should be."""
    from suite.errors import ConfigError

    blocking = file_in_the_way(Path(folder).expanduser())
    if blocking is not None:
        what = "is a file" if blocking == Path(folder).expanduser() else f"lies under a file, {blocking}"
        raise ConfigError(f"{key}={str(folder)!r} {what}; name a folder")


def check_writable(results_dir: str | Path) -> None:
    """Fail before any work if records cannot be written to ``results_dir`` (read-only, full disk)."""
    from suite.errors import ConfigError

    root = Path(results_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=root)
        try:
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"results_dir={str(results_dir)!r} is not writable: {exc.strerror or exc}") from exc
