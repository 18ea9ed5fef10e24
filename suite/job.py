"""What a mode's job gives back to the run that dispatched it (suite/run.py): its outcome and what
its record says of the task. The jobs import this module, never the dispatcher that loads them."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


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


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` means the job ran out of memory: CUDA's or the CPU allocator's, or Python's."""
    if isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)):
        return True
    # torch's allocators also raise plain RuntimeErrors ("DefaultCPUAllocator: can't allocate memory",
    # "CUDA out of memory" from some kernels)
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
