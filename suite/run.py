"""One run from a resolved config to a written record: validate, pick the device, run the mode's
job, write the record, print the job's summary and where the record went.

A mode is a package under suite/modes/ (see suite.modes) whose job module has ``job(config, device)
-> JobResult`` and ``summary(record) -> str``; each mode also has ``conf/mode/<name>.yaml``. This
module imports no Hydra, so a job can run from a plain dict (e.g. on a GPU host without hydra-core).
"""

from __future__ import annotations

import signal
import sys
import time
import traceback
import warnings
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

import methods
from suite import checkpoint, env, logger, modes, records
from suite.config import validate
from suite.errors import USER_ERRORS, ConfigError
from suite.hardware import cpu_threads


@dataclass
class Outcome:
    """What a job produced: its status, an error text when not ok, and its metrics."""

    status: str = "ok"
    error: str | None = None
    metrics: dict = field(default_factory=dict)


@dataclass
class JobResult:
    """A job's outcome plus what the record says of the task it ran on."""

    kind: str  # the record kind
    outcome: Outcome
    task: dict  # the record's ``task`` block: at least ``name``
    resolved: dict | None = None  # the method's options as the job's module resolved them (resolved_options)


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else the CPU; ``cuda`` without CUDA is a user error."""
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA device is available here; use device=cpu or device=auto")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` means the job ran out of memory: CUDA's or the CPU allocator's, or Python's."""
    if isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)):
        return True
    # torch's allocators also raise plain RuntimeErrors ("DefaultCPUAllocator: can't allocate memory",
    # "CUDA out of memory" from some kernels)
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


@contextmanager
def sigterm_as_interrupt():
    """Let SIGTERM (a cluster's pre-emption, `kill`) end a run the way Ctrl-C does."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def find_finished(results_dir: str | Path, config_hash: str) -> Path | None:
    """A record with status ok and this config hash under ``results_dir``, if any (for resuming).
    Files that are not records are skipped with one warning line each on stderr, naming the file."""
    if not Path(results_dir).is_dir():
        return None
    with warnings.catch_warnings(record=True) as skipped:
        warnings.simplefilter("always")
        found = next((path for path, record in records.iter_records(results_dir)
                      if record["status"] == "ok" and records.record_config_hash(record) == config_hash), None)
    for warning in skipped:
        print(f"warning: {warning.message}", file=sys.stderr)
    return found


def with_method_version(config: Mapping, version: int) -> dict:
    """``config`` with ``method.version``, the method's code version: part of what defines a run
    (records.NEUTRAL_VALUES: version 1 hashes as a config without it)."""
    return {**config, "method": {**config["method"], "version": version}}


def run(config: Mapping, resume: bool = True) -> tuple[Path, Outcome]:
    """Run one job of ``config`` (a resolved plain dict); return the record path and outcome.

    When resuming (a sweep), a job whose config hash already has an ok record in ``results_dir`` is
    skipped (the path of that record is returned) unless ``force`` is set. A job that fails is recorded with status
    ``error`` rather than raised, so a sweep goes on; user mistakes are raised before any work.
    """
    started = time.perf_counter()
    validate(config)  # the boundary: past it, the config is trusted
    mode = config["mode"]["name"]
    module = modes.get(mode).job_module()
    method_class = methods.get(config["method"]["name"])  # unknown method (the registry's own message): before any work
    config = with_method_version(config, method_class.version)
    device = resolve_device(config["device"])
    config_hash = records.config_hash(config, device.type)
    if resume and not config.get("force", False):
        done = find_finished(config["results_dir"], config_hash)
        if done is not None:
            print(f"skipped: an ok record of this run already exists: {done} (force=true reruns it)")
            return done, Outcome(status="skipped")
    records.check_writable(config["results_dir"])
    torch.manual_seed(config["seed"])

    run_id = records.new_run_id(config_hash)  # known before the job, so the logger's run carries it
    with sigterm_as_interrupt(), logger.opened(config, run_id) as log:
        try:
            with cpu_threads(config.get("cpu_threads"), device):
                result = module.job(config, device)
        except USER_ERRORS:
            raise
        except Exception as exc:  # recorded, so the sweep goes on; the traceback goes to stderr
            traceback.print_exc(file=sys.stderr)
            status = "oom" if is_out_of_memory(exc) else "error"
            result = JobResult(kind=mode, task={"name": config["task"]["name"]},
                               outcome=Outcome(status=status, error=f"{type(exc).__name__}: {exc}"))
        result.outcome.metrics["wall_time_s"] = time.perf_counter() - started

        method = config["method"]
        record = records.new_record(
            result.kind,
            config=config,
            config_hash=config_hash,
            method={"name": method["name"], "impl": method["impl"], "params": dict(method["options"]),
                    "resolved": result.resolved, "version": method_class.version,
                    "distribution": env.distribution_of(method_class),
                    "time_in_length": method_class.time_in_length},
            task=result.task,
            metrics=result.outcome.metrics,
            env=env.capture(device, config["seed"]),
            status=result.outcome.status,
            error=result.outcome.error,
            run_id=run_id,
        )
        path = records.write_record(record, config["results_dir"])
        if result.outcome.status != "interrupted":  # the run ended: nothing is left to resume
            checkpoint.discard(checkpoint.folder(config["results_dir"], config_hash))
        log.finish(record, path)
    print(module.summary(record), flush=True)
    print(f"record: {path}", flush=True)
    return path, result.outcome
