"""pytest-benchmark set-up: the machine's GPU, driver and library versions in every saved run, and
the kernel goals (ratios measured in this one run) printed at the end.

    pytest benchmarks --benchmark-enable --benchmark-only     # pyproject disables benchmarks by default
"""

from __future__ import annotations

import os

import pytest
import torch

from suite import env

MEDIANS = pytest.StashKey[dict]()


def pytest_benchmark_update_machine_info(config, machine_info):
    """Add what decides kernel speed: the device, its driver, torch/triton/fla and the thread count."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    captured = env.capture(device, seed=0)
    machine_info["attention_suite"] = {
        **{key: captured[key] for key in ("device", "device_name", "torch", "triton", "cuda", "cuda_driver", "cpu")},
        "fla": env.library_version("fla"),
        "torch_threads": torch.get_num_threads(),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }


def pytest_configure(config):
    config.stash[MEDIANS] = {}


@pytest.fixture
def keep_median(request):
    """Keep a finished benchmark's median time under ``key`` for the goal ratios of this run."""

    def keep(key: tuple, benchmark) -> None:
        if benchmark.stats is not None:  # None when benchmarks are disabled (one plain call)
            request.config.stash[MEDIANS][key] = benchmark.stats.stats.median

    return keep


def pytest_terminal_summary(terminalreporter, config):
    from benchmarks.goals import goal_lines

    lines = goal_lines(config.stash.get(MEDIANS, {}))
    if lines:
        terminalreporter.write_sep("-", "kernel goals (ratios within this run)")
        for line in lines:
            terminalreporter.write_line(line)
