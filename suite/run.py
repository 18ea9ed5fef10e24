"""One run from a resolved config to a written record: validate, pick the device, run the mode's
job, write the record, print the job's summary and where the record went.

A mode is a package under suite/modes/ (see suite.modes) whose job module has ``job(config, device,
config_hash) -> JobResult`` (suite/job.py) and ``summary(record) -> str``; each mode also has
``conf/mode/<name>.yaml``. A mode that needs a capability the method lacks (``Mode.needs``) runs no
job: its record says not_applicable and why. This module imports no Hydra, so a job can run from a
plain dict (e.g. on a GPU host without hydra-core).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
import warnings
from collections.abc import Mapping
from pathlib import Path

import torch

import methods
import tasks
from methods.base import CAPABILITIES
from methods.registry import qualified
from suite import checkpoint, env, logger, modes, record_store, records
from suite.config import validate
from suite.errors import USER_ERRORS, ConfigError
from suite.hardware import cpu_threads
from suite.interrupt import sigterm_as_interrupt
from suite.job import JobResult, Outcome, is_out_of_memory

# A finished run's record that could not be written, kept beside its checkpoints (not .json: no reader
# of records under results/ sees it).
KEPT_RECORD = "record.kept"


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else the CPU; ``cuda`` without CUDA is a user error."""
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA device is available here; use device=cpu or device=auto")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def find_finished(results_dir: str | Path, config_hash: str) -> Path | None:
    """A record of a finished run (status ok, or not_applicable: a run of this method and mode can
    do no more) with this config hash under ``results_dir``, if any (for resuming).
    Files that are not records are skipped with one warning line each on stderr, naming the file."""
    if not Path(results_dir).is_dir():
        return None
    with warnings.catch_warnings(record=True) as skipped:
        warnings.simplefilter("always")
        found = next((path for path, record in record_store.iter_records(results_dir)
                      if record["status"] in ("ok", "not_applicable")
                      and records.record_config_hash(record) == config_hash), None)
    for warning in skipped:
        print(f"warning: {warning.message}", file=sys.stderr)
    return found


def with_method_version(config: Mapping, method_class: type[methods.AttentionMethod]) -> dict:
    """``config`` with ``method.version``, the method's code version, and for a method from outside
    the suite ``method.package``, its distribution's name==version: both part of what defines a
    run, so that a new release of the package reruns (records.NEUTRAL_VALUES: version 1 hashes as a
    config without it; the suite's own methods have no package, so their hashes are unchanged)."""
    method = {**config["method"], "version": method_class.version}
    dist = env.distribution_of(method_class)
    if dist["name"] is not None and dist["name"] != env.SUITE_DISTRIBUTION:
        method["package"] = f"{dist['name']}=={dist['version']}"
    return {**config, "method": method}


def record_task(module, config: Mapping) -> str:
    """The task a record of this mode is filed under, whatever its status, so that one mode's
    records lie in one place: the mode's own (``record_task`` of its job module: decode, kernel,
    fidelity), else the command's task."""
    own = getattr(module, "record_task", None)
    return own(config) if own is not None else config["task"]["name"]


def task_provenance(name: str) -> dict:
    """For a task from outside the suite (an installed family's, tasks.ENTRY_POINTS): its load
    function and where its code came from, as a method's; nothing for the suite's own tasks."""
    target = tasks.LOADERS.get(name, "") if name in tasks.available() else ""
    module = target.partition(":")[0]
    if not module or module.split(".")[0] == "tasks":
        return {}
    return {"loader": target, "distribution": env.module_distribution(module)}


def missing_capabilities(mode: str, method_class: type[methods.AttentionMethod]) -> str | None:
    """Why a run of ``method_class`` in ``mode`` is not applicable (the capabilities the mode needs
    that the method does not implement), or None when it is."""
    missing = sorted(modes.get(mode).needs - method_class.capabilities())
    if not missing:
        return None
    what = "; ".join(f"{capability} ({', '.join(CAPABILITIES[capability])})" for capability in missing)
    return f"mode={mode} needs what method {method_class.name!r} does not implement: {what}"


def summary_text(module, record: Mapping) -> str:
    """The mode's closing summary of ``record``; one line for a run that was not applicable."""
    if record["status"] == "not_applicable":
        return f"{record['method']['name']}, mode={record['kind']}: not applicable: {record['error']}"
    return module.summary(record)


def run(config: Mapping, resume: bool = True) -> tuple[Path, Outcome]:
    """Run one job of ``config`` (a resolved plain dict); return the record path and outcome.
    ``config`` is checked here (the boundary: past it, the config is trusted); ``run_checked`` runs
    one that was (the protocol checks its config once for all its runs)."""
    validate(config, modes.run_schemas())
    return run_checked(config, resume)


def run_checked(config: Mapping, resume: bool = True) -> tuple[Path, Outcome]:
    """Run one job of ``config``, checked already (suite.config.validate). Its config hash is
    computed here, once, and handed to the job.

    When resuming (a sweep), a job whose config hash already has an ok record in ``results_dir`` is
    skipped (the path of that record is returned) unless ``force`` is set. A job that fails is recorded with status
    ``error`` rather than raised, so a sweep goes on; user mistakes are raised before any work.
    """
    started = time.perf_counter()
    mode = config["mode"]["name"]
    module = modes.get(mode).job_module()
    method_class = methods.get(config["method"]["name"])  # unknown method (the registry's own message): before any work
    not_applicable = missing_capabilities(mode, method_class)  # a half-done capability: refused here
    config = with_method_version(config, method_class)
    device = resolve_device(config["device"])
    config_hash = records.config_hash(config, device.type)
    if resume and not config.get("force", False):
        done = find_finished(config["results_dir"], config_hash)
        if done is not None:
            what = record_store.read_record(done)["status"]  # ok, or not_applicable: say which
            print(f"skipped: {'an ok' if what == 'ok' else f'a {what}'} record of this run already exists: {done} "
                  "(force=true reruns it)")
            return done, Outcome(status="skipped")
    if "data_dir" in config:  # read by the modes that load a task
        records.check_folder("data_dir", config["data_dir"])
    made_results_dir = not Path(config["results_dir"]).exists()
    records.check_writable(config["results_dir"])
    kept = written_kept_record(module, config["results_dir"], config_hash) if config.get("resume", True) else None
    if kept is not None:
        return kept
    torch.manual_seed(config["seed"])

    run_id = records.new_run_id(config_hash)  # known before the job, so the logger's run carries it
    # The run's threads hold until its record is written: env.capture names the host by them.
    with sigterm_as_interrupt(), logger.opened(config, run_id) as log, cpu_threads(config.get("cpu_threads"), device):
        try:
            if not_applicable:
                result = JobResult(kind=mode, task={"name": record_task(module, config)},
                                   outcome=Outcome(status="not_applicable", error=not_applicable))
            else:
                result = module.job(config, device, config_hash)
        except USER_ERRORS:
            if made_results_dir:  # a refused command leaves nothing behind, not even an empty folder
                remove_if_empty(Path(config["results_dir"]))
            raise
        except Exception as exc:  # recorded, so the sweep goes on; the traceback goes to stderr
            traceback.print_exc(file=sys.stderr)
            status = "oom" if is_out_of_memory(exc) else "error"
            result = JobResult(kind=mode, task={"name": record_task(module, config)},
                               outcome=Outcome(status=status, error=f"{type(exc).__name__}: {exc}"))
        result.outcome.metrics["wall_time_s"] = time.perf_counter() - started

        method = config["method"]
        record = record_store.new_record(
            result.kind,
            config=config,
            config_hash=config_hash,
            method={"name": method["name"], "impl": method["impl"], "params": dict(method["options"]),
                    "resolved": result.resolved, "version": method_class.version,
                    "import_path": qualified(method_class), "distribution": env.distribution_of(method_class),
                    "time_in_length": method_class.time_in_length,
                    "capabilities": sorted(method_class.capabilities())},
            task={**result.task, **task_provenance(config["task"]["name"])},
            metrics=result.outcome.metrics,
            env=env.capture(device, config["seed"]),
            status=result.outcome.status,
            error=result.outcome.error,
            run_id=run_id,
        )
        print(summary_text(module, record), flush=True)  # first: a record that cannot be written loses no number
        path = write_or_keep(record, config["results_dir"], config_hash)
        if result.outcome.status != "interrupted":  # the run ended: nothing is left to resume
            checkpoint.discard(checkpoint.folder(config["results_dir"], config_hash))
        log.finish(record, path)
    print(f"record: {path}", flush=True)
    return path, result.outcome


def remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (or gone): nothing to tidy
        pass


def write_or_keep(record: Mapping, results_dir: str, config_hash: str) -> Path:
    """Write a finished run's record; when it cannot be written (a full disk, a file where its folder
    goes), keep it beside the run's checkpoints, where the same command finds it and writes it
    without running again, and raise a ConfigError saying what failed and what was kept."""
    try:
        return record_store.write_record(record, results_dir)
    except (OSError, records.RecordError) as exc:
        failed = records.why_not_written(exc, records.record_path(record, results_dir))
    if record["status"] == "interrupted":  # not finished: the same command resumes from the checkpoints
        raise ConfigError(f"the record was not written: {failed}; the run's checkpoints, if any, are kept for the "
                          "same command to resume")
    kept = checkpoint.folder(results_dir, config_hash) / KEPT_RECORD
    try:
        records.write_atomically(kept, lambda tmp: tmp.write_text(json.dumps(record, indent=2, default=str) + "\n"))
    except OSError as exc:
        raise ConfigError(f"the record was not written: {failed}; nor could it be kept "
                          f"({records.why_not_written(exc, kept)}): the summary above is all that is left of "
                          "this run, and its checkpoints, if any, are kept for the same command to resume") from None
    raise ConfigError(f"the record was not written: {failed}; the summary above is the run's, and its record is "
                      f"kept in {kept}: the same command writes it there once the cause is fixed, without "
                      "running again")


def written_kept_record(module, results_dir: str, config_hash: str) -> tuple[Path, Outcome] | None:
    """The record a finished run of this config could not write (``write_or_keep``), written now."""
    kept = checkpoint.folder(results_dir, config_hash) / KEPT_RECORD
    if not kept.is_file():
        return None
    record = record_store.read_kept(kept, config_hash)
    print(summary_text(module, record), flush=True)
    path = write_or_keep(record, results_dir, config_hash)
    checkpoint.discard(kept.parent)
    print(f"written: the record a finished run of this config could not write (not run again): {path}", flush=True)
    return path, Outcome(record["status"], record["error"], record["metrics"])
