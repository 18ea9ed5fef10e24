"""Hedgehog's softmax pair [softmax(y), softmax(-y)] of logits y (..., F), in the two forms the
feature-map paths need: ``full`` on whole tensors (autograd differentiates it) and the block form
of the causal chunked core (``forward`` / ``backward`` / ``identity`` / ``num_features``, see
methods/_featuremap/module.py's ``chunk_maps``).

Each half is a probability vector, so every feature lies in [0, 1] and phi(q).phi(k) in [0, 2]:
no factor needs pulling out for range, and both forms return None for it. The softmaxes subtract
each row's max (of y, and of -y: minus its min) before exp, so no logit overflows.
"""

from __future__ import annotations

import torch


class SoftmaxPair:
    """phi(y) = [softmax(y), softmax(-y)] over the last dim of logits y (..., F): 2F features."""

    identity = False

    def __init__(self, feature_dim: int) -> None:
        self.feature_dim = feature_dim
        self.num_features = 2 * feature_dim

    @staticmethod
    def full(y: torch.Tensor) -> torch.Tensor:
        """phi(y) of a whole tensor, float32, differentiable."""
        y = y.float()
        return torch.cat([torch.softmax(y, -1), torch.softmax(-y, -1)], dim=-1)

    def forward(self, y: torch.Tensor, out: torch.Tensor) -> None:
        """phi(y) of a block written into ``out`` (..., 2F) float32, out possibly a strided view."""
        f, y = self.feature_dim, y.float()
        plus, minus = out[..., :f], out[..., f:]
        torch.sub(y, y.amax(-1, keepdim=True), out=plus).exp_()
        torch.sub(y.amin(-1, keepdim=True), y, out=minus).exp_()  # -y - max(-y)
        for half in (plus, minus):
            half.div_(half.sum(-1, keepdim=True))
        return None

    def backward(self, y: torch.Tensor, phi: torch.Tensor, grad_phi: torch.Tensor, out: torch.Tensor) -> None:
        """d y from d phi: for p = softmax(+-y), d(+-y) = p * (g - p.g) per half; the minus half's
        enters with its sign flipped. ``grad_phi`` (the core's scratch) is overwritten."""
        f = self.feature_dim
        weighted = grad_phi.mul_(phi)  # p * g, both halves
        grad = weighted[..., :f].sub_(phi[..., :f] * weighted[..., :f].sum(-1, keepdim=True))
        grad.sub_(weighted[..., f:]).add_(phi[..., f:] * weighted[..., f:].sum(-1, keepdim=True))
        out.copy_(grad)
