"""Feature maps applied one block of tokens at a time, with their backward, for the chunked core.

The chunked causal core (chunk.py) computes phi(x) of a block of rows while the block is in cache,
writes it into the buffer it saves for the backward, and later turns d phi into d x the same way,
so no (B, H, N, F) tensor other than the saved features is ever made for a map. Each map gives:

- ``forward(x, out)``: phi(x) of a block x (..., D) written into ``out`` (..., F) in float32, and
  the log of a factor pulled out of each row for range (None, a scalar or one value per row: the
  features written are phi / exp(log_factor)); the core scales the denominator's eps alike, so the
  attention equals the one of the unscaled map exactly. Key maps pull out one factor for all keys
  (a per-key factor would change the weights).
- ``backward(x, phi, grad_phi, out)``: d x (..., D) written into ``out`` (a block of the input's
  gradient, in the input's dtype) from the forward's input, its output and d phi, which it may
  overwrite (it is the core's scratch). The pulled-out factors are constants here, as ``detach``
  makes them in the full-tensor maps of each method (the attention does not depend on them).
"""

from __future__ import annotations

import math

import torch


class Identity:
    """Features given as they are (the core on ready-made phi)."""

    identity = True

    def forward(self, x: torch.Tensor, out: torch.Tensor) -> None:
        raise AssertionError("the core uses given features directly")

    def backward(self, x: torch.Tensor, phi: torch.Tensor, grad_phi: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(grad_phi)


class EluPlusOne:
    """phi(x) = elu(x) + 1 (Katharopoulos et al. 2020); d phi / d x = min(phi, 1), read off phi."""

    identity = False

    def __init__(self, dim: int) -> None:
        self.num_features = dim

    def forward(self, x: torch.Tensor, out: torch.Tensor) -> None:
        torch._C._nn.elu(x.float(), out=out).add_(1.0)
        return None

    def backward(self, x: torch.Tensor, phi: torch.Tensor, grad_phi: torch.Tensor, out: torch.Tensor) -> None:
        # x > 0: phi = x + 1 > 1 and the slope is 1; x <= 0: phi = e^x <= 1 is its own slope.
        if out.dtype == torch.float32:
            torch.clamp(phi, max=1.0, out=out).mul_(grad_phi)
        else:  # one rounding to the input's dtype, at the end
            out.copy_(grad_phi.mul_(phi.clamp_max(1.0)))


class SecondOrderTaylor:
    """[1, x/d^(1/4), vec(x x^T)/sqrt(2d)] (Based), or its symmetric half (i <= j, off-diagonal
    entries times sqrt(2)); the same features as ``maps.second_order_taylor``."""

    identity = False

    def __init__(self, dim: int, symmetric_half: bool) -> None:
        self.dim, self.symmetric_half = dim, symmetric_half
        self.num_features = 1 + dim + (dim * (dim + 1) // 2 if symmetric_half else dim * dim)
        self.linear_scale = dim**-0.25
        self.quadratic_scale = 1.0 / math.sqrt(2 * dim)
        if symmetric_half:
            rows, cols = torch.triu_indices(dim, dim)
            self.rows, self.cols = rows, cols
            self.pair_weight = torch.where(rows == cols, 1.0, math.sqrt(2.0)) * self.quadratic_scale

    def forward(self, x: torch.Tensor, out: torch.Tensor) -> None:
        d, x = self.dim, x.float()
        out[..., 0] = 1.0
        torch.mul(x, self.linear_scale, out=out[..., 1 : 1 + d])
        quadratic = out[..., 1 + d :]
        if self.symmetric_half:
            rows, cols, weight = (t.to(x.device) for t in (self.rows, self.cols, self.pair_weight))
            torch.mul(x[..., rows], x[..., cols] * weight, out=quadratic)
        else:
            torch.mul(x.unsqueeze(-1), (x * self.quadratic_scale).unsqueeze(-2), out=quadratic.unflatten(-1, (d, d)))
        return None

    def backward(self, x: torch.Tensor, phi: torch.Tensor, grad_phi: torch.Tensor, out: torch.Tensor) -> None:
        d, x = self.dim, x.float()
        grad_quadratic = grad_phi[..., 1 + d :]
        if self.symmetric_half:
            full = grad_phi.new_zeros(*grad_phi.shape[:-1], d, d)
            rows, cols, weight = (t.to(x.device) for t in (self.rows, self.cols, self.pair_weight))
            full[..., rows, cols] = grad_quadratic * weight
            grad_quadratic, scale = full, 1.0
        else:
            grad_quadratic, scale = grad_quadratic.unflatten(-1, (d, d)), self.quadratic_scale
        # d/dx of x_i x_j summed against G_ij is (G + G^T) x.
        symmetric = grad_quadratic + grad_quadratic.transpose(-1, -2)
        grad_x = torch.matmul(symmetric, x.unsqueeze(-1)).squeeze(-1).mul_(scale)
        out.copy_(grad_x.add_(grad_phi[..., 1 : 1 + d], alpha=self.linear_scale))


class PositiveRandomFeatures:
    """FAVOR+'s exp(w_r.x' - |x'|^2/2)/sqrt(m), x' = x/D^(1/4), stabilised as ``FavorAttention.features``
    does in the causal form: each query row divided by exp of its own largest logit, every key by
    exp of one shift that depends on the projection only."""

    identity = False

    def __init__(self, projection: torch.Tensor, head_dim: int, key_shift: torch.Tensor | None) -> None:
        self.projection = projection.float()  # (m, D), a buffer: no gradient
        self.num_features = projection.shape[0]
        self.input_scale = head_dim**-0.25
        self.log_root_m = 0.5 * math.log(projection.shape[0])
        self.key_shift = key_shift  # None: the query map (a shift per row)

    def forward(self, x: torch.Tensor, out: torch.Tensor):
        scaled = x.float() * self.input_scale
        # bmm on the broadcast projection: out may be a strided view that matmul could not fold.
        torch.bmm(scaled, self.projection.t().expand(len(scaled), -1, -1), out=out)
        half_square = 0.5 * scaled.square().sum(-1)
        if self.key_shift is None:
            # exp(w.x' - |x'|^2/2 - shift) with shift = max_r(w_r.x') - |x'|^2/2: the squares cancel.
            row_max = out.amax(-1)
            out.sub_((row_max + self.log_root_m).unsqueeze(-1)).exp_()
            return row_max - half_square
        out.sub_((half_square + (self.key_shift + self.log_root_m)).unsqueeze(-1)).exp_()
        return self.key_shift

    def backward(self, x: torch.Tensor, phi: torch.Tensor, grad_phi: torch.Tensor, out: torch.Tensor) -> None:
        scaled = x.float() * self.input_scale
        grad_logits = grad_phi.mul_(phi)  # the core's scratch: reused in place
        projection = self.projection.expand(len(grad_logits), -1, -1)
        grad_scaled = (torch.bmm(grad_logits, projection, out=out) if out.dtype == torch.float32
                       else grad_logits @ projection)
        grad_scaled.sub_(scaled * grad_logits.sum(-1, keepdim=True)).mul_(self.input_scale)
        if grad_scaled is not out:
            out.copy_(grad_scaled)
