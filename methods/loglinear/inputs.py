"""What every path of log-linear attention reads, in one tuple: the parallel forms (naive.py,
chunk.py, triton.py) over N tokens and the decoding step (recurrent.py) over one."""

from __future__ import annotations

from typing import NamedTuple

import torch


class LogLinearInputs(NamedTuple):
    """Query and key features phi (B,H,N,F), values v (B,H,N,E), level weights lambda (B,H,N,L)
    and log decay gates (B,H,N), None without decay; a decoding step's have no N axis. The
    chunked path may be given q and k in place of their features (see its ``feature_map``)."""

    phi_q: torch.Tensor
    phi_k: torch.Tensor
    v: torch.Tensor
    level_weights: torch.Tensor
    log_gates: torch.Tensor | None = None

    def reversed(self, dim: int = 2) -> LogLinearInputs:
        """The sequence read backwards (every input flipped along N, axis ``dim``): the second
        causal pass of the non-causal form, which gives the keys after a query the levels and
        decay that a reader going backwards would give them."""
        return LogLinearInputs(*(None if t is None else t.flip(dim) for t in self))

    def float(self) -> LogLinearInputs:
        """Every input in float32."""
        return LogLinearInputs(*(None if t is None else t.float() for t in self))
