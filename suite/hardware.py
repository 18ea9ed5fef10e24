"""What the jobs share about the machine they time: waiting for the GPU, the CPU thread count, and
the process's peak resident memory. No Hydra, wandb or datasets here (the GPU scripts import it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from suite.errors import ConfigError

CLEAR_REFS = Path("/proc/self/clear_refs")
RESET_PEAK_RSS = "5"  # clear_refs: reset the peak resident set size (Linux >= 4.0)


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (a no-op on the CPU), so a clock reads finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextmanager
def cpu_threads(count: int | None, device: torch.device, key: str = "mode.cpu_threads") -> Iterator[int | None]:
    """Run with ``count`` torch threads on the CPU (None: torch's default), restored after; yields
    the count in use (None on CUDA)."""
    if device.type != "cpu":
        yield None
        return
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise ConfigError(f"{key} must be a positive integer or null, got {count!r}")
    previous = torch.get_num_threads()
    torch.set_num_threads(count or previous)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


def reset_peak_rss() -> bool:
    """Start the process's peak resident set afresh where Linux allows it; False where it cannot."""
    try:
        CLEAR_REFS.write_text(RESET_PEAK_RSS)
    except OSError:
        return False
    return True
