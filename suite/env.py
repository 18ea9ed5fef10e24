"""Environment capture for result records: what ran, where, with which versions.

Only facts on an allow-list are taken. Nothing from the process environment enters a record, so
no API key, token or user name can leak through it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import platform
import subprocess
import sys
import sysconfig
from pathlib import Path
from urllib.parse import unquote, urlparse

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
SUITE_DISTRIBUTION = "attention-suite"


def _git(*args: str, cwd: Path = REPO_ROOT) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_state(folder: Path = REPO_ROOT, tracking: Path | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout holding ``folder``; (None, None) outside a git checkout, or
    when that checkout does not track ``tracking`` (a file of the code in question): a repository
    that merely contains the folder, a virtual environment inside a user's project, says nothing
    about where the code came from."""
    commit = _git("rev-parse", "HEAD", cwd=folder)
    if commit is None:
        return None, None
    if tracking is not None and _git("ls-files", "--error-unmatch", str(tracking), cwd=folder) is None:
        return None, None
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=folder)
    return commit, bool(status)


def suite_distribution() -> importlib.metadata.Distribution | None:
    """The installed attention-suite distribution whose code this is: a copy of this very module
    (a wheel), or an editable install of this checkout; None when run from a tree that is not
    installed, or beside an attention-suite installed from elsewhere."""
    try:
        dist = importlib.metadata.distribution(SUITE_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    url = urlparse(direct.get("url", ""))
    editable = (direct.get("dir_info") or {}).get("editable") and url.scheme == "file"
    if editable and Path(unquote(url.path)).resolve() == REPO_ROOT:
        return dist
    return dist if Path(dist.locate_file("suite/env.py")).resolve() == Path(__file__).resolve() else None


def suite_git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the suite's own code, right or absent: the checkout whose top level holds
    this package and tracks it (a clone, an editable install), else the commit pip installed it
    from (a git URL: direct_url.json's vcs_info; clean by construction), else (None, None): a wheel
    or an index release, known by its version alone. Never a repository that merely contains the
    environment the suite is installed in."""
    top = _git("rev-parse", "--show-toplevel")
    if top is not None and Path(top).resolve() == REPO_ROOT:
        found = git_state(REPO_ROOT, tracking=Path(__file__).resolve())
        if found[0] is not None:
            return found
    dist = suite_distribution()
    vcs = json.loads((dist.read_text("direct_url.json") if dist else None) or "{}").get("vcs_info") or {}
    if vcs.get("vcs") == "git" and vcs.get("commit_id"):
        return vcs["commit_id"], False
    return None, None


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
    """This suite's version, from its distribution's metadata (None when run from a tree that is
    not installed)."""
    dist = suite_distribution()
    return dist.version if dist else None


def distribution_of(cls: type) -> dict:
    """Where the code of ``cls`` (a method's class) came from: ``module_distribution`` of its module."""
    return module_distribution(cls.__module__)


def module_distribution(module: str) -> dict:
    """Where the code of ``module`` (a method's or a task family's) came from, so that a record
    names code from a package other than this suite: the installed distribution that ships it
    (name and version; None outside any); how it was installed (``source``: "index" with no
    direct URL, "git" from a VCS URL, "local" from a folder or a file on this machine, "url" from an
    archive's address; None outside any distribution); and the commit of its code: the one pip
    installed from a VCS URL (``url``; direct_url.json's vcs_info), else that of the git checkout
    the module was imported from (an editable install, a folder on the path; ``dirty``: with
    uncommitted changes), else that of the local folder an installed copy was built from; a
    commit only where that checkout tracks the code."""
    found: dict = {"name": None, "version": None, "url": None, "commit": None, "dirty": None, "source": None}
    names = importlib.metadata.packages_distributions().get(module.split(".")[0], [])
    dist = importlib.metadata.distribution(names[0]) if names else None
    direct = json.loads((dist.read_text("direct_url.json") if dist else None) or "{}")
    url = urlparse(direct.get("url", ""))
    if dist is not None:
        # no direct URL: an index's, unless its metadata lies outside site-packages (a source tree's egg-info)
        indexed = installed_copy(Path(dist.locate_file("")).resolve())
        found.update(name=dist.metadata["Name"], version=dist.version,
                     source=("index" if indexed else "local") if not direct else
                     "local" if url.scheme == "file" else "url")
    vcs = direct.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and vcs.get("commit_id"):
        return {**found, "url": direct.get("url"), "commit": vcs["commit_id"], "source": "git"}
    if found["source"] == "url":
        found["url"] = direct.get("url")
    source = module_folder(module)
    if source is None or installed_copy(source):  # an installed copy: its source folder, if local
        source = Path(unquote(url.path)) if "dir_info" in direct and url.scheme == "file" else None
    if source is not None and source.is_dir():
        # only a checkout that tracks the code names its commit, not one that merely holds the folder
        found["commit"], found["dirty"] = git_state(source, tracking=source)
    return found


def module_folder(module: str) -> Path | None:
    """The folder of the file that defines ``module`` (None for a module without one)."""
    file = getattr(sys.modules.get(module), "__file__", None)
    if file is None:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        file = spec.origin if spec is not None and spec.has_location else None
    return Path(file).resolve().parent if file else None


def installed_copy(folder: Path) -> bool:
    """Whether ``folder`` is inside this interpreter's site-packages (an installed copy, not a checkout)."""
    paths = sysconfig.get_paths()
    roots = {Path(paths[key]).resolve() for key in ("purelib", "platlib")}
    return any(root == folder or root in folder.parents for root in roots)


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
    commit, dirty = suite_git_state()
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
