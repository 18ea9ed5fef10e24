"""Checkpoints of a training run, so that the same command after a crash, a kill or a cluster's
pre-emption goes on from where the run was and ends with the same result (DESIGN.md, Conventions).

A checkpoint is one torch file, ``<results_dir>/.checkpoints/<config_hash>/step-<step>.pt``: not
``.json``, so no reader of records sees it. It is written atomically; the last two are kept; a run
that ends with any status but ``interrupted`` deletes them (suite.run). What goes into one is the
train loop's business (suite.training); this module writes, finds, checks and reads them, and holds a
stopping signal until the loop is between two steps, where a checkpoint is of a whole step.
"""

from __future__ import annotations

import io
import pickle  # for its exception class only: checkpoints are read with torch.load(weights_only=True)
import random
import re
import shutil
import signal
import sys
from pathlib import Path

import numpy as np
import torch

from suite.records import write_atomically

FORMAT = 1  # raised whenever what a checkpoint holds changes: an older one is then refused
TORCH = str(torch.__version__)  # a plain str: weights_only loading refuses torch's TorchVersion
KEEP = 2
FOLDER = ".checkpoints"
NAME = re.compile(r"step-(\d+)\.pt")
# Ctrl-C, a kill or a pre-emption, and SLURM's warning before the time limit (submitit requeues on it).
STOPPING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR2") if hasattr(signal, name))


class CheckpointError(ValueError):
    """A checkpoint file this run cannot continue from."""


def folder(results_dir: str | Path, config_hash: str) -> Path:
    """Where the checkpoints of the run with ``config_hash`` go."""
    return Path(results_dir) / FOLDER / config_hash


def saved(directory: Path) -> list[Path]:
    """The checkpoint files in ``directory``, oldest step first (temporary files are not listed)."""
    found = [p for p in directory.glob("step-*.pt") if NAME.fullmatch(p.name)] if directory.is_dir() else []
    return sorted(found, key=step_of)


def step_of(path: Path) -> int:
    return int(NAME.fullmatch(path.name).group(1))


def save(directory: Path, config_hash: str, step: int, state: dict) -> Path:
    """Write ``state`` as the checkpoint of ``step`` and keep only the last ``KEEP``. A checkpoint of
    a later step belongs to a history this run started over from, so it goes too."""
    path = directory / f"step-{step:09d}.pt"
    header = {"format": FORMAT, "torch": TORCH, "config_hash": config_hash, "step": step}
    buffer = io.BytesIO()  # serialised in memory, written by Python: a full disk says "No space left"
    torch.save({**header, **state}, buffer)  # (torch's own writer says "enforce fail at inline_container.cc")
    write_atomically(path, lambda tmp: tmp.write_bytes(buffer.getbuffer()))
    kept = [p for p in saved(directory) if step_of(p) <= step][-KEEP:]
    for old in saved(directory):
        if old not in kept:
            old.unlink(missing_ok=True)
    return path


def read(path: Path, config_hash: str) -> dict:
    """The checkpoint at ``path``; CheckpointError says why it cannot be continued from."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError("holds objects other than tensors and plain values") from exc
    except Exception as exc:  # truncated, empty, not a torch file: torch raises several kinds
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise CheckpointError(f"not readable ({type(exc).__name__}: {first_line})") from exc
    if not isinstance(state, dict) or "format" not in state:
        raise CheckpointError("not a checkpoint of this suite")
    if state["format"] != FORMAT:
        raise CheckpointError(f"checkpoint format {state['format']!r}; this suite reads format {FORMAT}")
    if state.get("torch") != TORCH:  # another torch may draw other random numbers
        raise CheckpointError(f"saved by torch {state.get('torch')}; this is torch {TORCH}")
    if state.get("config_hash") != config_hash:
        raise CheckpointError(f"of another config (hash {state.get('config_hash')}; this run's is {config_hash})")
    return state


def latest(directory: Path, config_hash: str) -> tuple[Path, dict] | None:
    """The newest checkpoint in ``directory`` this run can continue from, with its path; each one
    refused gets one warning line on stderr and is left as it is."""
    candidates = saved(directory)[::-1]
    for i, path in enumerate(candidates):
        try:
            return path, read(path, config_hash)
        except CheckpointError as exc:
            then = "starting over" if i == len(candidates) - 1 else "trying the one before"
            print(f"warning: ignoring checkpoint {path}: {exc}; {then}", file=sys.stderr, flush=True)
    return None


def discard(directory: Path) -> None:
    """Delete a run's checkpoints (it ended: nothing is left to resume)."""
    shutil.rmtree(directory, ignore_errors=True)


def rng_states(device: torch.device) -> dict:
    """Every global random generator a run may draw from, as tensors and plain types, so that
    ``torch.load(weights_only=True)`` reads them back."""
    version, python_state, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    states = {
        "torch": torch.get_rng_state(),
        "python": [version, torch.tensor(python_state, dtype=torch.int64), gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
    }
    if device.type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state(device)
    return states


def set_rng_states(states: dict, device: torch.device) -> None:
    """Put back the generators ``rng_states`` saved."""
    torch.set_rng_state(states["torch"])
    version, python_state, gauss = states["python"]
    random.setstate((version, tuple(python_state.tolist()), gauss))
    kind, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if device.type == "cuda":
        torch.cuda.set_rng_state(states["cuda"], device)


class HeldSignals:
    """Within ``with``, a stopping signal waits until ``release()``, which the train loop calls
    between two steps after saving a checkpoint: a signal arriving mid-step would leave the weights,
    the optimizer and the data position out of step with one another. The signal then does what
    its handler before the run does (Ctrl-C and SIGTERM: KeyboardInterrupt; SIGUSR2 under submitit:
    requeue the job). A second signal acts at once. A signal nobody handled before (SIG_DFL) is
    not held."""

    def __enter__(self) -> HeldSignals:
        self.pending: tuple | None = None
        self.previous = {s: signal.getsignal(s) for s in STOPPING_SIGNALS if callable(signal.getsignal(s))}
        for signum in self.previous:
            signal.signal(signum, self.hold)
        return self

    def hold(self, signum, frame) -> None:
        if self.pending is not None:  # asked twice: stop now, mid-step (no checkpoint of this step)
            self.previous[signum](signum, frame)
        self.pending = (signum, frame)

    def release(self) -> None:
        if self.pending is not None:
            signum, frame = self.pending
            self.pending = None
            try:
                self.previous[signum](signum, frame)
            except Exception as exc:  # submitit refusing to requeue (timed out too often): the run
                raise KeyboardInterrupt from exc  # stops as interrupted, its checkpoint kept

    def __exit__(self, exc_type, exc, traceback) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        if exc_type is None:
            self.release()  # a signal during the last step still stops the run (a sweep too)
