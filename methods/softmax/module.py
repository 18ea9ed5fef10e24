"""Softmax attention behind the method contract: ``naive`` (the definition) and ``sdpa``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from methods.base import AttentionMethod, MethodError
from methods.registry import register
from methods.softmax.cache import append, check_cache, held, new_cache
from methods.softmax.naive import softmax_attention


@register
class SoftmaxAttention(AttentionMethod):
    name = "softmax"
    paper = {
        "authors": "A. Vaswani, N. Shazeer, N. Parmar, J. Uszkoreit, L. Jones, A. N. Gomez, Ł. Kaiser, I. Polosukhin",
        "year": 2017,
        "title": "Attention Is All You Need",
        "url": "https://arxiv.org/abs/1706.03762",
    }
    impls = ("naive", "sdpa")
    cpu_default = "sdpa"
    time_in_length = "N^2"
    fidelity_note = ("softmax is the exact reference, evaluated in float32 as the method computes it: its errors "
                     "are float32 rounding, the floor under every other method.")

    def log_weights(self, q, k, positions=None):
        """The float32 scores q.k / sqrt(D), as the method computes them: log w = s."""
        return ((q.float() @ k.float().transpose(-1, -2)) / self.head_dim**0.5).double()

    def head_flops(self, n, value_dim, causal, impl):
        """naive: scores 2 N^2 D and weights @ v 2 N^2 E, the whole matrix causal or not; backward
        twice that. sdpa: the pairs a flash kernel visits, N (N + 1) / 2 when causal (blocks above
        the diagonal are skipped), forward 2 P (D + E), backward 2 P (3 D + 2 E) (the scores again,
        then d v, d p, d q, d k)."""
        d = self.head_dim
        if impl == "naive":
            forward = 2.0 * n * n * (d + value_dim)
            return forward, 2 * forward
        pairs = n * (n + 1) / 2 if causal else float(n * n)
        return 2.0 * pairs * (d + value_dim), 2.0 * pairs * (3 * d + 2 * value_dim)

    def state_bytes(self, batch, heads, n, value_dim, dtype=torch.float32):
        """The KV cache: keys (B,H,N,D) and values (B,H,N,E) in ``dtype``, and its int64 length."""
        return batch * heads * n * (self.head_dim + value_dim) * torch.empty((), dtype=dtype).element_size() + 8

    def _forward_naive(self, q, k, v, causal):
        return softmax_attention(q, k, v, causal)

    def _forward_sdpa(self, q, k, v, causal):
        # PyTorch picks its own backend (flash, cuDNN, memory-efficient or math) for the device.
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    # -- the recurrent form: a KV cache (cache.py), every past key and value read at each step --
    def init_state(self, batch, heads, head_dim, value_dim, device=None, dtype=None):
        """An empty KV cache in ``dtype`` (float32 by default); it grows by doubling as steps fill it."""
        if head_dim != self.head_dim:
            raise MethodError(f"softmax: built for head_dim={self.head_dim}, init_state got {head_dim}")
        empty = dict(device=device, dtype=dtype or torch.float32)
        return new_cache(torch.zeros(batch, heads, 0, head_dim, **empty),
                         torch.zeros(batch, heads, 0, value_dim, **empty))

    def prefill_state(self, k, v):
        return new_cache(k, v)  # capacity N exactly: its bytes are those of the context

    def step(self, q_t, k_t, v_t, state):
        """Write (k_t, v_t) into the cache, then attend with q_t over all it holds: (o_t (B,H,E), cache)."""
        check_cache(state, q_t, v_t)
        state = append(state, k_t, v_t)
        keys, values = held(state)
        if self.resolve_impl(q_t.device) == "naive":
            o_t = softmax_attention(q_t.unsqueeze(2), keys, values)
        else:
            q = q_t.unsqueeze(2).to(keys.dtype)
            o_t = F.scaled_dot_product_attention(q, keys, values)
        return o_t.squeeze(2).to(q_t.dtype), state
