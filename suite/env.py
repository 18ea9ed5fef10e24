"""Environment capture for result records: what ran, where, with which versions.

Only facts on an allow-list are taken. Nothing from the process environment enters a record, so
no API key, token or user name can leak through it.
"""

from __future__ import annotations

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


def cpu_name() -> str:
    """The processor's model name, e.g. 'AMD EPYC 7B13', with the number of usable cores."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} ({torch.get_num_threads()} threads)"


def library_version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # absent, or broken beside this torch: either way not usable here
        return None


def capture(device: torch.device, seed: int) -> dict:
    """The ``env`` block of a record (DESIGN.md: device, versions, commit, CPU, seed)."""
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
