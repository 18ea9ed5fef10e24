"""How far a method's attention is from exact softmax attention, per query, in float64.

Attention is a kernel smoother: o_i = N_i / D_i with numerator N_i = sum_j k(q_i,k_j) v_j and
denominator D_i = sum_j k(q_i,k_j), k = exp(q.k/sqrt(D)). A method replaces k by its own weights
w_ij (phi(q_i).phi(k_j) for the kernelized methods). Non-causal, every query sees all N keys; causal
(the captured model is a decoder), query i sees keys 0..i, on both sides.

The exact side is computed in float64 through log-sum-exp, so the reference is never the error.
The method's weights are kept as a row-scaled matrix times exp(log scale) per query, so sums that
would overflow even float64 are compared in log space: D^/D - 1 = exp(log D^ - lse) - 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from methods.base import AttentionMethod

# The per-query errors, in the order tables print them: the denominator first.
ERROR_NAMES = (
    "denominator_rel_error",
    "numerator_rel_error",
    "output_rel_error",
    "attention_tv",
    "output_rel_error_approx_numerator",
    "output_rel_error_approx_denominator",
)
STATISTICS = ("mean", "median", "p95", "max")


@dataclass
class ScaledWeights:
    """A method's weights w (..., Q, N) as ``scaled * exp(log_scale[..., None])`` in float64, and
    the epsilon its forward adds to every denominator sum_j w_ij.

    Each row of ``scaled`` has max |entry| 1 (or is all zero, or holds inf/nan when the method's
    float32 features overflowed); ``log_scale`` carries the row's magnitude."""

    scaled: torch.Tensor
    log_scale: torch.Tensor
    eps: float = 0.0


def scale_rows(weights: torch.Tensor, eps: float = 0.0) -> ScaledWeights:
    """Split weights (..., Q, N) into float64 rows of max |entry| 1 and their log magnitudes."""
    weights = weights.double()
    peak = weights.abs().amax(-1)
    usable = torch.isfinite(peak) & (peak > 0)
    divisor = torch.where(usable, peak, torch.ones_like(peak))
    log_scale = torch.where(usable, divisor.log(), torch.zeros_like(peak))
    return ScaledWeights(weights / divisor.unsqueeze(-1), log_scale, eps)


def scores(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """s_ij = q_i.k_j / sqrt(D) in float64: (..., Q, N); with the queries' ``positions``, causal:
    -inf where key j is after query i."""
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    return s if positions is None else AttentionMethod.causal_log_weights(s, positions)


def own_log_weights(module: torch.nn.Module, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                    causal: bool = False) -> torch.Tensor:
    """The method's ``log_weights`` for queries q (B, H, Q, D) at ``positions`` (Q,) of the sequence
    against every key of k, or (causal) its ``causal_log_weights``: (B, H, Q, N) float64."""
    log_w = module.log_weights(q, k, positions=positions)
    return module.causal_log_weights(log_w, positions) if causal else log_w


def method_weights(module: torch.nn.Module, q: torch.Tensor, k: torch.Tensor,
                   query_index: torch.Tensor, causal: bool = False) -> ScaledWeights:
    """The weights the method gives the selected queries: q, k (B, H, N, D), query_index (Q,) ->
    (B, H, Q, N) rows of max 1 and their log scales, from the method's own ``log_weights`` (its
    float32 computation; the exact reference's errors are then float32 rounding; causal: its
    ``causal_log_weights``) and its denominator epsilon. A row whose weights overflowed float32
    keeps its inf (excluded later)."""
    log_w = own_log_weights(module, q[..., query_index, :], k, query_index, causal)
    peak = log_w.amax(-1)
    usable = torch.isfinite(peak)
    shift = torch.where(usable, peak, torch.zeros_like(peak))
    return ScaledWeights(torch.exp(log_w - shift.unsqueeze(-1)), shift, module.denominator_eps)


def query_errors(s: torch.Tensor, v: torch.Tensor, approx: ScaledWeights) -> dict[str, torch.Tensor]:
    """Per-query errors of the method against exact softmax attention, all (..., Q) float64.

    s: exact scores (..., Q, N); v: values (..., N, E). The method's output is what its forward
    computes, N^/(D^ + eps); the denominator error compares D^ itself with D. The decomposition
    replaces one part of o = N/D by the method's: the approximate numerator over the exact
    denominator (that is the numerator's own relative error), and the exact numerator over the
    method's denominator. Besides ERROR_NAMES: ``denominator_ratio`` (D^ + eps)/D, ``overflow``
    (the method's sums are not finite against the exact ones: excluded from statistics) and
    ``underflow`` (every weight underflowed to 0 in float32; the method outputs 0)."""
    v = v.double()
    lse = torch.logsumexp(s, -1)  # log of the exact denominator D
    exact_weights = torch.exp(s - lse.unsqueeze(-1))  # the attention row, sums to 1
    exact_out = exact_weights @ v  # N / D
    out_norm = exact_out.norm(dim=-1).clamp_min(1e-300)

    # Everything relative to D: exp(log(scale) - lse) stays finite unless the method's weights
    # exceed the exact ones by e^709, so sums that would overflow exp are compared in log space.
    to_exact = torch.exp(approx.log_scale - lse)
    den_ratio = approx.scaled.sum(-1) * to_exact  # D^ / D
    ratio = den_ratio + approx.eps * torch.exp(-lse)  # (D^ + eps) / D
    num_scaled = (approx.scaled @ v) * to_exact.unsqueeze(-1)  # N^ / D
    overflow = ~(torch.isfinite(ratio) & torch.isfinite(num_scaled).all(-1)) | (ratio == 0)
    underflow = (den_ratio == 0) & ~overflow
    safe = lambda t: torch.where(overflow, torch.ones_like(t), t)  # noqa: E731
    ratio, den_ratio, to_exact = safe(ratio), safe(den_ratio), safe(to_exact)
    num_scaled = torch.where(overflow.unsqueeze(-1), torch.zeros_like(num_scaled), num_scaled)
    approx_weights = torch.nan_to_num(approx.scaled) * (to_exact / ratio).unsqueeze(-1)  # w / (D^ + eps)

    relative = lambda t: (t - exact_out).norm(dim=-1) / out_norm  # noqa: E731
    numerator_error = relative(num_scaled)
    return {
        "denominator_rel_error": (den_ratio - 1).abs(),
        "numerator_rel_error": numerator_error,
        "output_rel_error": relative(num_scaled / ratio.unsqueeze(-1)),
        "attention_tv": 0.5 * (approx_weights - exact_weights).abs().sum(-1),
        # N^/D against N/D is the numerator's own relative error: the same number, kept under
        # the decomposition's name so that its two parts sit side by side.
        "output_rel_error_approx_numerator": numerator_error,
        "output_rel_error_approx_denominator": relative(exact_out / ratio.unsqueeze(-1)),
        "denominator_ratio": ratio,
        "overflow": overflow,
        "underflow": underflow,
    }


def summarize(values: torch.Tensor) -> dict[str, float] | None:
    """Mean, median, 95th percentile and max of a 1-D float tensor; None when it is empty."""
    if values.numel() == 0:
        return None
    values = values.double().cpu()
    return {
        "mean": float(values.mean()),
        "median": float(values.median()),
        "p95": float(torch.quantile(values, 0.95)),
        "max": float(values.max()),
    }
