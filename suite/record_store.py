"""The records of the modes' kinds, checked when they are made, written and read: the record
vocabulary (suite/records.py: the fields, the config hash, the paths, the atomic write) composed with
the modes' registry (a record's kind is a mode's, its ``metrics`` that mode's model:
``suite.modes.record_model``). The vocabulary imports no mode, and the modes' jobs import it; this
module is above both, with the run, the protocol, the site and the validator that read and write
records.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from suite import modes
from suite.records import (
    FIELDS,
    MAX_FILE_BYTES,
    RecordError,
    RefusedFile,
    describe,
    new_run_id,
    path_name_problems,
    read_untrusted,
    record_path,
    restated_problem,
    scrub_home,
    unrepresentable,
    utc_now,
    write_atomically,
)
from suite.schema import SCHEMA, STATUSES, Record


def kinds() -> tuple[str, ...]:
    """The record kinds: one per mode (suite/modes/)."""
    return tuple(mode.kind for mode in modes.registry().values())


def new_record(
    kind: str,
    *,
    config: Mapping,
    config_hash: str,
    method: Mapping,
    task: Mapping,
    metrics: Mapping,
    env: Mapping,
    status: str = "ok",
    error: str | None = None,
    run_id: str | None = None,
) -> dict:
    """A complete record; ``run_id`` is given when something had to know it before the job (the
    experiment logger names its run after it), else a new one (``new_run_id``).
    The user's home directory is scrubbed from every string, error messages included."""
    if kind not in kinds():
        raise ValueError(f"unknown record kind {kind!r}; valid: {', '.join(kinds())}")
    if status not in STATUSES:
        raise ValueError(f"unknown record status {status!r}; valid: {', '.join(STATUSES)}")
    return {
        "schema": SCHEMA,
        "kind": kind,
        "run_id": run_id or new_run_id(config_hash),
        "created": utc_now(),
        "status": status,
        "error": scrub_home(error),
        "method": scrub_home(dict(method)),
        "task": scrub_home(dict(task)),
        "config": scrub_home(dict(config)),
        "config_hash": config_hash,
        "metrics": scrub_home(dict(metrics)),
        "env": scrub_home(dict(env)),
    }


def write_record(record: Mapping, results_dir: str | Path) -> Path:
    """Check ``record`` against its kind's schema, write it atomically under ``results_dir`` and
    return its path; RecordError (nothing written) when it does not validate."""
    text = json.dumps(record, indent=2, sort_keys=False, allow_nan=False, default=str) + "\n"
    parsed = json.loads(text)  # what a reader will see (tuples as lists, other objects as text)
    validate(parsed, f"record {parsed.get('run_id')!r}")
    for at, value, rule in path_name_problems(parsed):  # each becomes a folder or the file's name
        raise RecordError(f"record {parsed.get('run_id')!r}: field {at!r} is {value!r}; expected {rule}")
    path = record_path(parsed, results_dir)
    if not path.resolve().is_relative_to(Path(results_dir).resolve()):  # a link in the way: still refused
        raise RecordError(f"record {parsed['run_id']!r}: its path {str(path)!r} leads outside results_dir")
    write_atomically(path, lambda tmp: tmp.write_text(text))
    return path


def validate(record: Any, where: str) -> Record:
    """``record`` (parsed JSON) as its kind's model; RecordError naming ``where`` and the fields
    that are wrong."""
    if not isinstance(record, dict):
        raise RecordError(f"{where}: not a record (top level is {type(record).__name__})")
    version = record.get("schema")
    if type(version) is not int or version != SCHEMA:  # `true == 1` in Python: not a schema number
        raise RecordError(f"{where}: unknown schema {version!r} (this suite reads {SCHEMA})")
    missing = [f for f in FIELDS if f not in record]
    if missing:
        raise RecordError(f"{where}: missing fields {', '.join(missing)}")
    kind = record["kind"]
    if not isinstance(kind, str) or kind not in kinds():
        raise RecordError(f"{where}: field 'kind': unknown kind {kind!r}; valid: {', '.join(kinds())}")
    try:
        bad = unrepresentable(record)
    except RecursionError:
        bad = ("", "nested too deep")
    if bad is not None:
        raise RecordError(f"{where}: field {bad[0]!r}: {bad[1]}")
    try:
        model = modes.record_model(kind).model_validate(record)
    except ValidationError as exc:
        raise RecordError(f"{where}: {describe(exc)}") from None
    restated = restated_problem(record)
    if restated is not None:
        raise RecordError(f"{where}: {restated}")
    missing = [m for m in modes.get(kind).ok_requires if record["status"] == "ok" and record["metrics"].get(m) is None]
    if missing:
        raise RecordError(f"{where}: field 'metrics.{missing[0]}': missing from an ok {kind} record; expected a number")
    return model


def load_record(path: str | Path) -> tuple[dict, Record]:
    """Parse and check one record: the JSON as written and its schema model; RecordError names
    the file and what is wrong."""
    path = Path(path)
    try:
        record = json.loads(read_untrusted(path))
    except RefusedFile as exc:
        raise RecordError(f"{exc}; expected a regular file of at most {MAX_FILE_BYTES:,} bytes") from None
    except (ValueError, RecursionError) as exc:  # ValueError: bad UTF-8 or bad JSON
        raise RecordError(f"{path}: not a readable JSON record ({type(exc).__name__}: {exc})") from exc
    return record, validate(record, str(path))


def read_record(path: str | Path) -> dict:
    """Parse and check one record; RecordError names the file and what is wrong."""
    return load_record(path)[0]


def iter_loaded(results_dir: str | Path, skip: tuple[str, ...] = ()) -> Iterator[tuple[Path, dict, Record]]:
    """Every valid record under ``results_dir`` with its model (but the files named in ``skip``, at
    its top); invalid files are skipped with a warning naming them."""
    for path in sorted(Path(results_dir).rglob("*.json")):
        if path.parent == Path(results_dir) and path.name in skip:
            continue
        try:
            yield path, *load_record(path)
        except RecordError as exc:
            warnings.warn(f"skipping {exc}", stacklevel=2)


def iter_records(results_dir: str | Path) -> Iterator[tuple[Path, dict]]:
    """Every valid record under ``results_dir``; invalid files are skipped with a warning naming them."""
    for path, record, _ in iter_loaded(results_dir):
        yield path, record


def read_kept(path: Path, config_hash: str) -> dict:
    """A record kept by a run that could not write it; ConfigError if it is not a valid record of
    this config (then it is left for the user to look at)."""
    from suite.errors import ConfigError

    try:
        record, _ = load_record(path)
    except RecordError as exc:
        raise ConfigError(f"a kept record of this run cannot be written: {exc}; move it away to run again") from None
    if record["config_hash"] != config_hash:
        raise ConfigError(f"{path} is the record of another config ({record['config_hash']}; this run's is "
                          f"{config_hash}); move it away to run again")
    return record
