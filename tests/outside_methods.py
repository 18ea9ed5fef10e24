"""Methods as an outside package would write them (importing only the public bases of ``methods``),
registered by no module of the suite: the tests name them by import path
(``tests.outside_methods:StatelessSoftmax``), as ``methods.resolve`` and ``attention-suite
check-method`` take them.

- ``StatelessSoftmax``: exact attention with the core and declared FLOPs but no recurrent form and
  no attention weights, as Nyströmformer or Linformer (LRA's roster) would be: it trains, and decode,
  fidelity and the state axis are not applicable to it.
- ``BrokenAttention``: a method that fails the contract in each way it can: a path that is not its
  naive definition, a step that is not the causal form, a state and FLOPs declared wrong.
- ``LeakyAttention``: a naive-only method whose definition itself is wrong (the naive checks).
- ``ReluAttention``: a ReLU feature map, naive and chunked, whose one-token gradients are rounding.
- ``UncountedSoftmax``: exact attention that declares no FLOPs (the kernel mode times it all the same).
"""

from __future__ import annotations

import math

import torch

from methods import AttentionMethod, FeatureMap, FeatureMapAttention

STATELESS = "tests.outside_methods:StatelessSoftmax"
BROKEN = "tests.outside_methods:BrokenAttention"
LEAKY = "tests.outside_methods:LeakyAttention"
RELU = "tests.outside_methods:ReluAttention"
UNCOUNTED = "tests.outside_methods:UncountedSoftmax"


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    """softmax(q k^T * scale) v in float32, in the dtype of q."""
    scores = torch.einsum("bhnd,bhmd->bhnm", q.float(), k.float()) * scale
    if causal:
        n = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.einsum("bhnm,bhme->bhne", scores.softmax(-1), v.float()).to(q.dtype)


class StatelessSoftmax(AttentionMethod):
    name = "stateless_softmax"
    impls = ("naive", "sdpa")
    cpu_default = "sdpa"
    time_in_length = "N^2"

    def _forward_naive(self, q, k, v, causal):
        return softmax_attention(q, k, v, causal, 1 / math.sqrt(q.shape[-1]))

    def _forward_sdpa(self, q, k, v, causal):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def head_flops(self, n, value_dim, causal, impl):
        """Both paths as the naive one counts: scores 2 N^2 D, weights @ v 2 N^2 E; backward twice."""
        forward = 2.0 * n * n * (self.head_dim + value_dim)
        return forward, 2 * forward


class BrokenAttention(AttentionMethod):
    name = "broken"
    impls = ("naive", "chunk")
    cpu_default = "chunk"
    time_in_length = "N^2"

    def _forward_naive(self, q, k, v, causal):
        return softmax_attention(q, k, v, causal, 1 / math.sqrt(q.shape[-1]))

    def _forward_chunk(self, q, k, v, causal):
        return softmax_attention(q, k, v, causal, 1 / q.shape[-1])  # the wrong scale

    def head_flops(self, n, value_dim, causal, impl):
        return float(n), float(n)  # nothing like the products it runs

    def init_state(self, batch, heads, head_dim, value_dim, device=None, dtype=None):
        return {"v": torch.zeros(batch, heads, value_dim, device=device, dtype=dtype or torch.float32)}

    def prefill_state(self, k, v):
        return {"v": v[:, :, -1].clone()}

    def step(self, q_t, k_t, v_t, state):
        return v_t, {"v": v_t}  # attends to the last token alone

    def state_bytes(self, batch, heads, n, value_dim, dtype=torch.float32):
        return 0  # holds a value vector per head


class LeakyAttention(AttentionMethod):
    """A naive-only method whose definition is wrong in each way the naive checks see: it ignores
    the causal mask, mixes the sequences of a batch, hides part of its output from autograd, and
    declares weights that are not the ones it attends with."""

    name = "leaky"
    impls = ("naive",)
    cpu_default = "naive"
    time_in_length = "N^2"

    def _forward_naive(self, q, k, v, causal):
        out = softmax_attention(q, k, v, False, 1 / math.sqrt(q.shape[-1]))  # causal or not: no mask
        out = out + 0.1 * v.mean(0, keepdim=True)  # every sequence reads the batch's mean value
        return out + 0.1 * q.detach().square().sum(-1, keepdim=True)  # a term autograd does not see

    def log_weights(self, q, k, positions=None):
        return 2 * torch.einsum("bhnd,bhmd->bhnm", q.double(), k.double()) / math.sqrt(q.shape[-1])


class ReluMap(FeatureMap):
    """phi(x) = relu(x); the public base gives its block forms (forward, backward) from ``full``."""

    def full(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x.float())


class ReluAttention(FeatureMapAttention):
    """A ReLU feature map, naive and chunked (issue 46's relu_fm): its features can be zero, so at
    one token the denominator is small and the gradient of q is mostly float32 rounding."""

    name = "relu_fm"

    @property
    def num_features(self):
        return self.head_dim

    def feature_map(self, x, kind):
        self.check_kind(kind)
        return ReluMap(self.head_dim).full(x)

    def chunk_maps(self, q, k):
        relu = ReluMap(self.head_dim)
        return q, k, relu, relu


class UncountedSoftmax(AttentionMethod):
    """Exact attention that declares no FLOPs (nor a recurrent form): the kernel mode times it and
    leaves its FLOP rates empty."""

    name = "uncounted_softmax"
    impls = ("naive",)
    cpu_default = "naive"
    time_in_length = "N^2"

    def _forward_naive(self, q, k, v, causal):
        return softmax_attention(q, k, v, causal, 1 / math.sqrt(q.shape[-1]))
