"""Environment capture for result records: what ran, where, with which versions.

Only facts on an allow-list are taken. Nothing from the process environment enters a record, so
no API key, token or user name can leak through it.
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the suite's own checkout; (None, None) outside a git checkout."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return commit, bool(status)


def cpu_model() -> str:
    """The processor's model name, e.g. 'AMD EPYC 7B13'."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return name


def cpu_name() -> str:
    """The processor's model name with the number of usable cores: 'AMD EPYC 7B13 (4 threads)'."""
    return f"{cpu_model()} ({torch.get_num_threads()} threads)"


def memory_total_bytes() -> int | None:
    """The machine's memory (Linux MemTotal); None where /proc/meminfo is not readable."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def library_version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # absent, or broken beside this torch: either way not usable here
        return None


def suite_version() -> str | None:
    """The installed attention-suite's version (None when run from a tree that is not installed)."""
    try:
        return importlib.metadata.version("attention-suite")
    except importlib.metadata.PackageNotFoundError:
        return None


def distribution_of(cls: type) -> dict:
    """The installed distribution that ships ``cls`` (a method's class): its name and version, so
    that a record names the code of a method that comes from a package other than this suite."""
    top = cls.__module__.split(".")[0]
    names = importlib.metadata.packages_distributions().get(top, [])
    if not names:
        return {"name": None, "version": None}
    return {"name": names[0], "version": importlib.metadata.version(names[0])}


def hardware(device: torch.device) -> dict:
    """The machine a record's speed and memory were measured on: the device's model and memory,
    the driver and CUDA versions (null on a CPU), and the versions of the libraries that run the
    kernels (null when not installed). Speed and memory compare only between records of one
    device model (DESIGN.md, "Submitted records")."""
    on_cuda = device.type == "cuda"
    return {
        "device_model": torch.cuda.get_device_name(device) if on_cuda else cpu_model(),
        "device_memory_bytes": torch.cuda.get_device_properties(device).total_memory if on_cuda
        else memory_total_bytes(),
        "driver": _cuda_driver() if on_cuda else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": library_version("triton"),
        "fla": library_version("fla"),
    }


def capture(device: torch.device, seed: int) -> dict:
    """The ``env`` block of a record (DESIGN.md: device, versions, commit, CPU, seed, hardware)."""
    commit, dirty = git_state()
    on_cuda = device.type == "cuda"
    return {
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if on_cuda else cpu_name(),
        "torch": torch.__version__,
        "triton": library_version("triton"),
        "python": sys.version.split()[0],
        "cuda": torch.version.cuda,
        "cuda_driver": _cuda_driver() if on_cuda else None,
        "git_commit": commit,
        "git_dirty": dirty,
        "cpu": cpu_name(),
        "platform": f"{platform.system()} {platform.machine()}",
        "seed": seed,
        "suite_version": suite_version(),
        "hardware": hardware(device),
    }


def _cuda_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None
