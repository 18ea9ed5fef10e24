"""The definition of log-linear attention, quadratic in N and in float32: the reference.

Causal weights: w_ts = lambda_t[l(t, s)] * phi(q_t).phi(k_s) * exp(G_t - G_s) for s <= t, where
l is the Fenwick level (levels.py) and G the cumulative sum of the per-token log decay gates
(G = 0 without decay). o_t = sum_s w_ts v_s / (sum_s w_ts + eps).

Non-causal: the weights of a causal pass over the reversed sequence (flip every input along N, take
the causal weights, flip both axes back) are added to the causal weights, and the diagonal, present
in both, is counted once. So keys after t get the levels and decay that a reader going backwards
would give them.
"""

from __future__ import annotations

import torch

from methods._featuremap.common import DENOMINATOR_EPS, divide_by_denominator
from methods.loglinear.inputs import LogLinearInputs
from methods.loglinear.levels import level_matrix


def causal_weights(
    phi_q: torch.Tensor, phi_k: torch.Tensor, level_weights: torch.Tensor, log_gates: torch.Tensor | None
) -> torch.Tensor:
    """The (B, H, N, N) causal weights w_ts in float32, zero above the diagonal."""
    n = phi_q.shape[2]
    levels = level_matrix(n, device=phi_q.device)
    per_level = level_weights.float().gather(-1, levels.clamp_min(0).expand(*phi_q.shape[:2], n, n))
    weights = torch.einsum("bhtf,bhsf->bhts", phi_q.float(), phi_k.float()) * per_level
    exponent = torch.zeros(n, n, device=phi_q.device)
    if log_gates is not None:
        cumulative = log_gates.float().cumsum(-1)
        exponent = cumulative[..., :, None] - cumulative[..., None, :]
    # Mask the exponent before exp so that s > t (positive exponents) cannot overflow.
    return weights * torch.exp(exponent.masked_fill(levels < 0, float("-inf")))


def loglinear_attention(inputs: LogLinearInputs, causal: bool = True, eps: float = DENOMINATOR_EPS) -> torch.Tensor:
    """Log-linear attention (B,H,N,E) in float32 from features, values, level weights and log gates."""
    weights = causal_weights(inputs.phi_q, inputs.phi_k, inputs.level_weights, inputs.log_gates)
    if not causal:
        back = inputs.reversed()
        reversed_weights = causal_weights(back.phi_q, back.phi_k, back.level_weights, back.log_gates)
        diagonal = torch.diagonal(weights, dim1=-2, dim2=-1)
        weights = weights + reversed_weights.flip(-1, -2) - torch.diag_embed(diagonal)
    return divide_by_denominator(weights @ inputs.v.float(), weights.sum(-1), eps)
