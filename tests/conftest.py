"""Shared fixtures: composed configs with tiny budgets and isolated data/result folders."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

# Without CUDA, Triton kernels are tested under the interpreter. Triton decides at import time
# whether its helpers are interpreted, so the flag is set before any test module imports it.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# The default run spreads the tests over one pytest-xdist worker per core (pyproject.toml's addopts):
# each worker then takes its share of the cores for torch's threads, and so do the processes a test
# starts, rather than every process running as many threads as there are cores.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    threads = max(1, torch.get_num_threads() // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    torch.set_num_threads(threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from methods.registry import REGISTRY
from suite.groups import store

# The config groups made from code (every method's config, from its class), stored once for every
# test that composes the config (some do while collected), as ``python -m suite`` stores them.
store()

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """One data cache for the whole test session, so generated data is made once."""
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def make_config(tmp_path, data_dir):
    """Compose the real config with overrides; results go to a fresh folder per test."""

    def make(*overrides: str) -> dict:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[
                "budget=smoke", f"results_dir={tmp_path / 'results'}", f"data_dir={data_dir}",
                *overrides,
            ])
        return OmegaConf.to_container(cfg, resolve=True)

    return make


@pytest.fixture
def sigint_handled():
    """SIGINT with Python's usual handler for the test, and so the default in the processes it
    starts. A shell starts background jobs with SIGINT ignored, an ignored signal stays ignored
    across exec, and a run keeps an ignored signal ignored (as nohup asks): under such a job the ^C
    case would not be the one under test."""
    previous = signal.getsignal(signal.SIGINT)
    if previous == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def registry_kept():
    """The method registry as it was before the test: a class the test resolves or registers is
    registered for it alone."""
    before = dict(REGISTRY)
    yield
    REGISTRY.clear()
    REGISTRY.update(before)

