"""Helpers shared by the tests."""

from __future__ import annotations

import pytest
import torch

from suite.config import validate
from suite.errors import ConfigError


def assert_config_refused(config: dict, group: str, override: dict, says: str) -> None:
    """The schema refuses ``config`` once ``override`` is written over its ``group``, with a message
    matching ``says``."""
    config[group].update(override)
    with pytest.raises(ConfigError, match=says):
        validate(config)


def rel_error(ref: torch.Tensor, out: torch.Tensor) -> float:
    """Relative error ||out - ref|| / ||ref|| in float64 (max-norm based, so one bad entry shows)."""
    ref64, out64 = ref.detach().double(), out.detach().double()
    scale = ref64.abs().max().clamp_min(1e-30)
    return float((out64 - ref64).abs().max() / scale)


def assert_close(name: str, ref: torch.Tensor, out: torch.Tensor, tol: float) -> None:
    """Fail with the tensor's name and its relative error when it exceeds ``tol``."""
    assert ref.shape == out.shape, f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    assert torch.isfinite(out).all(), f"{name}: non-finite values"
    err = rel_error(ref, out)
    assert err <= tol, f"{name}: relative error {err:.3e} > {tol:.1e}"
