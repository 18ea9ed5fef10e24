"""What the jobs share about the machine they time: the dtypes they name, waiting for the GPU, the
CPU thread count, and the run's peak memory. No Hydra, wandb or datasets here (the GPU scripts import it)."""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import resource
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

# The dtypes a config may name (mode grids), by name.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS_FILE = Path("/proc/self/status")
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


# -- CPU memory: the resident set's growth above a starting point ----------------------------------
def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", STATUS_FILE.read_text(), re.MULTILINE)
    if match is None:
        raise OSError(f"{field} not in {STATUS_FILE}")
    return int(match.group(1))


def malloc_trim() -> None:
    """Hand free heap pages back to the system (glibc), so reusing them counts as new residency."""
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def high_water_mark_usable() -> bool:
    """Whether this process can reset and read its peak resident set (Linux /proc)."""
    try:
        return reset_peak_rss() and _status_kib("VmHWM") >= 0
    except OSError:
        return False


def rss_bytes() -> int:
    """The process's resident set now."""
    try:
        return _status_kib("VmRSS") * 1024
    except OSError:  # no /proc: the best portable figure is the process peak so far
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _RssSampler(threading.Thread):
    """Samples the resident set every ``interval`` seconds until stopped; ``peak`` is the largest sample."""

    def __init__(self, interval: float) -> None:
        super().__init__(daemon=True)
        self.interval, self.peak = interval, rss_bytes()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.peak = max(self.peak, rss_bytes())


class ResidentGrowth:
    """How far the resident set rises above where it stood at the start: what the work done since
    added, without the interpreter, the libraries and whatever was built before (the model, the
    data). Free heap pages are handed back first, so memory reused from the heap counts. On Linux
    the kernel's high-water mark is reset and read back (exact); elsewhere a thread samples the
    resident set every ``sample_interval`` seconds, which can miss shorter peaks."""

    def __init__(self, sample_interval: float) -> None:
        malloc_trim()
        self.exact = high_water_mark_usable()  # resets the mark where it can
        self.before = rss_bytes()
        self.sampler = None if self.exact else _RssSampler(sample_interval)
        if self.sampler is not None:
            self.sampler.start()
        self.source = "rss_high_water_mark" if self.exact else f"rss_sampled_{sample_interval * 1e3:g}ms"

    def peak(self) -> int:
        """Bytes of the largest rise so far."""
        high = _status_kib("VmHWM") * 1024 if self.exact else max(self.sampler.peak, rss_bytes())
        return max(0, high - self.before)

    def stop(self) -> int:
        """The largest rise, and the sampler (if any) stopped."""
        if self.sampler is not None:
            self.sampler.stopped.set()
            self.sampler.join()
        return self.peak()


class RunMemory:
    """A training run's peak memory: on CUDA the allocator's peak; on the CPU the resident set's
    growth above the resident set once the model, optimizer and data are built (``ResidentGrowth``),
    so that the figure is the run's (activations, gradients, optimizer moments, the method's
    buffers), not the Python process's. Started where the run's steps are about to begin."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            self.growth, self.source = None, "cuda_allocator"
        else:
            self.growth = ResidentGrowth(sample_interval=0.05)
            self.source = f"{self.growth.source}_above_built_run"

    def peak(self) -> int:
        if self.growth is None:
            return torch.cuda.max_memory_allocated(self.device)
        return self.growth.peak()

    def stop(self) -> int:
        return self.peak() if self.growth is None else self.growth.stop()
