"""What the jobs share about the machine they time: the dtypes they name, waiting for the GPU, the
CPU thread count, and the run's peak memory. No Hydra, wandb or datasets here (the GPU scripts import it)."""

from __future__ import annotations

import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

# The dtypes a config may name (mode grids), by name.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CLEAR_REFS = Path("/proc/self/clear_refs")
RESET_PEAK_RSS = "5"  # clear_refs: reset the peak resident set size (Linux >= 4.0)


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (a no-op on the CPU), so a clock reads finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextmanager
def cpu_threads(count: int | None, device: torch.device) -> Iterator[int | None]:
    """Run with ``count`` torch threads on the CPU (None: torch's default; a count the config's
    schema has checked), restored after; yields the count in use (None on CUDA)."""
    if device.type != "cpu":
        yield None
        return
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


def run_peak_memory(device: torch.device) -> tuple[int, str]:
    """The run's peak memory so far in bytes, and where it was read: the CUDA allocator, or the
    process's peak RSS (a call's own peak, above what was live before it: kernel mode's measure)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), "cuda_allocator"
    # ru_maxrss is in KiB on Linux: the whole process's high-water mark, data loading included.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "process_peak_rss"
