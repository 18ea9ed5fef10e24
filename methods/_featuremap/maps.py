"""The feature maps, each defined once, in the two forms the paths need.

- ``full(x)``: phi(x) of a whole (..., D) tensor in float32, differentiable by autograd: the form of
  the naive, non-causal, Triton and recurrent paths. A map that pulls a factor out for range
  returns (phi / exp(log_factor), log_factor).
- the block form, for the causal chunked cores (chunk.py, loglinear/chunk.py), which compute
  phi of a block of rows while the block is in cache, write it into the buffer they save for the
  backward, and later turn d phi into d x the same way, so no (B, H, N, F) tensor other than the
  saved features is ever made for a map:

  - ``forward(x, out)``: phi(x) of a block x (..., D) written into ``out`` (..., F) in float32,
    returning the log of a factor pulled out of each row for range (None, a scalar or one value
    per row: the features written are phi / exp(log_factor)); the core scales the denominator's
    eps alike (``common.scaled_eps``), so the attention equals the one of the unscaled map
    exactly. Key maps pull out one factor for all keys (a per-key factor would change the weights).
  - ``backward(x, phi, grad_phi, out)``: d x (..., D) written into ``out`` (a block of the input's
    gradient, in the input's dtype) from the forward's input, its output and d phi, which it may
    overwrite (it is the core's scratch). The pulled-out factors are constants here, as ``detach``
    makes them in ``full`` (the attention does not depend on them).
  - ``identity`` (the core reads given features as they are) and ``num_features`` (F).

The two forms order their float32 operations differently (the block form multiplies by scales
computed once, and folds FAVOR+'s |x'|^2/2 into its shift), so they agree to rounding, not to the
bit; tests/test_featuremap.py holds them together.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


class FeatureMap:
    """The public base of a feature map in the form the causal chunked core reads (``chunk_maps`` of
    :class:`methods.FeatureMapAttention` returns one for the queries and one for the keys). The
    protocol, in full in this module's docstring:

    - ``num_features``: F, the width of phi(x); ``identity``: False (True only for given features);
    - ``full(x)``: phi of a whole (..., D) tensor, float32 and differentiable by autograd;
    - ``forward(x, out)``: phi of a block of rows written into ``out`` (..., F), float32; returns the
      log of a factor pulled out of each row for range, or None;
    - ``backward(x, phi, grad_phi, out)``: d x written into ``out`` from the block, its features and
      d phi (which it may overwrite).

    A subclass that pulls out no factor need write ``full`` alone: the block forms below apply it to
    the block, and take its gradient by autograd on the block (one small graph per block); write
    them by hand where a closed form is faster (EluPlusOne's slope is read off phi)."""

    identity = False

    def __init__(self, dim: int) -> None:
        self.num_features = dim

    def full(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(self.full(x))

    def backward(self, x: torch.Tensor, phi: torch.Tensor, grad_phi: torch.Tensor, out: torch.Tensor) -> None:
        with torch.enable_grad():
            block = x.detach().float().requires_grad_()
            (grad,) = torch.autograd.grad(self.full(block), block, grad_phi)
        out.copy_(grad)


class Identity:
    """Features given as they are (the cores on ready-made phi)."""

    identity = True

    @staticmethod
    def full(x: torch.Tensor) -> torch.Tensor:
        return x

    def forward(self, x: torch.Tensor, out: torch.Tensor) -> None:
        raise AssertionError("the core uses given features directly")

    def backward(self, x: torch.Tensor, phi: torch.Tensor, grad_phi: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(grad_phi)


class EluPlusOne(FeatureMap):
    """phi(x) = elu(x) + 1 (Katharopoulos et al. 2020): positive, so the denominator is too;
    d phi / d x = min(phi, 1), read off phi."""

    identity = False

    def __init__(self, dim: int) -> None:
        self.num_features = dim

    @staticmethod
    def full(x: torch.Tensor) -> torch.Tensor:
        return F.elu(x.float()) + 1.0

    def forward(self, x: torch.Tensor, out: torch.Tensor) -> None:
        torch._C._nn.elu(x.float(), out=out).add_(1.0)
        return None

    def backward(self, x: torch.Tensor, phi: torch.Tensor, grad_phi: torch.Tensor, out: torch.Tensor) -> None:
        # x > 0: phi = x + 1 > 1 and the slope is 1; x <= 0: phi = e^x <= 1 is its own slope.
        if out.dtype == torch.float32:
            torch.clamp(phi, max=1.0, out=out).mul_(grad_phi)
        else:  # one rounding to the input's dtype, at the end
            out.copy_(grad_phi.mul_(phi.clamp_max(1.0)))


class SecondOrderTaylor(FeatureMap):
    """Based (Arora et al. 2024): [1, x/d^(1/4), vec(x x^T)/sqrt(2d)] of x (..., d), so that
    phi(q).phi(k) = 1 + s + s^2/2 with s = q.k/sqrt(d). ``symmetric_half`` keeps the i <= j entries
    of x x^T only, the off-diagonal ones times sqrt(2): the same inner product with
    1 + d + d(d+1)/2 features instead of 1 + d + d^2."""

    identity = False

    def __init__(self, dim: int, symmetric_half: bool) -> None:
        self.dim, self.symmetric_half = dim, symmetric_half
        self.num_features = 1 + dim + (dim * (dim + 1) // 2 if symmetric_half else dim * dim)
        self.linear_scale = dim**-0.25
        self.quadratic_scale = 1.0 / math.sqrt(2 * dim)
        if symmetric_half:
            rows, cols = torch.triu_indices(dim, dim)
            self.rows, self.cols = rows, cols
            self.pair_scale = torch.where(rows == cols, 1.0, math.sqrt(2.0))
            self.pair_weight = self.pair_scale * self.quadratic_scale

    def full(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim
        quadratic = (x.unsqueeze(-1) * x.unsqueeze(-2)) / math.sqrt(2 * d)
        if self.symmetric_half:
            rows, cols = self.rows.to(x.device), self.cols.to(x.device)
            quadratic = quadratic[..., rows, cols] * self.pair_scale.to(x.device, x.dtype)
        else:
            quadratic = quadratic.flatten(-2)
        return torch.cat([torch.ones_like(x[..., :1]), x / d**0.25, quadratic], dim=-1)

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


# ``key_shift`` of PositiveRandomFeatures for the keys of the non-causal form (whole tensors only).
ALL_KEYS = "all"


class PositiveRandomFeatures(FeatureMap):
    """FAVOR+ (Choromanski et al. 2021): phi(x) = exp(w_r.x' - |x'|^2/2)/sqrt(m), x' = x/D^(1/4),
    for each row w_r of the projection (m, D), so E[phi(q).phi(k)] = exp(q.k/sqrt(D)).

    ``unshifted`` is that map; ``full`` and the block form pull out exp of a shift so that exp
    stays in range. ``key_shift`` None: the query map, each row divided by exp of its own largest
    logit. A tensor: the keys of the causal form, every key divided by exp of one shift that
    depends on the projection only (later keys may not reach earlier outputs). ``ALL_KEYS``: the
    keys of the non-causal form, the largest logit over all keys and features of a sequence."""

    identity = False

    def __init__(self, projection: torch.Tensor, head_dim: int, key_shift: torch.Tensor | str | None) -> None:
        self.projection = projection.float()  # (m, D), a buffer: no gradient
        self.num_features = projection.shape[0]
        self.input_scale = head_dim**-0.25
        self.log_root_m = 0.5 * math.log(projection.shape[0])
        self.key_shift = key_shift

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """w_r.x' - |x'|^2/2 of a whole (..., D) tensor: (..., m)."""
        scaled = x.float() * self.input_scale
        return scaled @ self.projection.transpose(-1, -2) - 0.5 * scaled.square().sum(-1, keepdim=True)

    def unshifted(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(self.logits(x)) / math.sqrt(self.num_features)

    def full(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(phi / exp(shift), shift) of x (B, H, N, D); the shift is (B, H, N) for queries, (B, H, 1) for keys."""
        logits = self.logits(x)
        # No gradient through the shifts: the attention does not depend on them.
        if self.key_shift is None:
            shift = logits.detach().amax(-1)
        elif isinstance(self.key_shift, str):
            if self.key_shift != ALL_KEYS:
                raise ValueError(f"key_shift must be None, a tensor or {ALL_KEYS!r}, got {self.key_shift!r}")
            shift = logits.detach().amax((-2, -1)).unsqueeze(-1)
        else:
            shift = self.key_shift.expand(logits.shape[:2]).unsqueeze(-1)
        # 1/sqrt(m) rides in the exponent and exp works in place: one new (B,H,N,m) tensor.
        return (logits - (shift + self.log_root_m).unsqueeze(-1)).exp_(), shift

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
        if isinstance(self.key_shift, str):
            raise AssertionError("the block form sees one block, not all keys: a causal key map has a fixed shift")
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
