"""Sliding-window softmax attention behind the method contract: ``naive`` (the definition),
``chunk`` (SDPA over bands, bands.py) and ``flex`` (compiled FlexAttention, flex.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from methods.base import AttentionMethod, MethodError, triton_unusable_reason
from methods.registry import register
from methods.sliding_window.bands import band_attention, band_pairs, naive_attention, window_mask
from methods.sliding_window.flex import MIN_HEAD_DIM, flex_attention, tile_pairs
from methods.sliding_window.ring import check_ring, new_ring, push
from methods.softmax.naive import softmax_attention


@register
class SlidingWindowAttention(AttentionMethod):
    """Exact softmax attention over the last ``window`` tokens, the query's own included (causal:
    keys i - window < j <= i; non-causal: |i - j| < window), scaled by 1/sqrt(D) as softmax is."""

    name = "sliding_window"
    paper = {
        "authors": "I. Beltagy, M. E. Peters, A. Cohan",
        "year": 2020,
        "title": "Longformer: The Long-Document Transformer",
        "url": "https://arxiv.org/abs/2004.05150",
    }
    impls = ("naive", "chunk", "flex")
    cpu_default = "chunk"
    # 64 keys: the small-window regime of Based's local attention (Arora et al. 2024), one tile
    # of keys for a tensor core and for this module's bands, far below the contexts where a KV
    # cache costs memory; the board's state-bound points set their own windows. At or above N it is
    # softmax. chunk_size: queries per band of the chunk path.
    method_options = {"window": 64, "chunk_size": 64}
    time_in_length = "N"  # N * window at a fixed window
    fidelity_note = ("sliding_window is exact softmax within its window (keys with |i - j| under window; float32 "
                     "rounding there) and gives every key outside it weight 0: its denominator error and its attention "
                     "TV are both the attention mass softmax puts outside the window, the one source of its errors.")

    def __init__(self, head_dim, impl="auto", **options):
        super().__init__(head_dim, impl, **options)
        self.window = self.int_option("window")
        self.chunk_size = self.int_option("chunk_size")

    def resolve_impl(self, device):
        """auto: compiled FlexAttention on CUDA (where Triton runs), the band path elsewhere: on
        the CPU, FlexAttention has no backward and its eager form materialises N^2 scores."""
        if self.impl == "auto":
            return "flex" if device.type == "cuda" and not triton_unusable_reason(device) else "chunk"
        return self.impl

    # -- the parallel form -------------------------------------------------------------------
    def _forward_naive(self, q, k, v, causal):
        return naive_attention(q, k, v, self.window, causal)

    def _forward_chunk(self, q, k, v, causal):
        return band_attention(q, k, v, self.window, causal, self.chunk_size)

    def _forward_flex(self, q, k, v, causal):
        if q.device.type == "cpu":
            if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
                raise MethodError("sliding_window: impl=flex has no backward on the CPU (PyTorch's FlexAttention "
                                  "runs forward only there); use impl=chunk or impl=naive to train")
            q, k, v = q.detach(), k.detach(), v.detach()  # torch refuses inputs that require grad there
        if q.device.type not in ("cpu", "cuda"):
            raise MethodError(f"sliding_window: impl=flex runs on cpu or cuda, inputs are on {q.device.type}; "
                              f"use impl=chunk")
        return flex_attention(q, k, v, self.window, causal)

    def log_weights(self, q, k, positions=None):
        """The float32 scores q.k / sqrt(D) inside the window (non-causal: |i - j| < window), -inf outside."""
        if positions is None:
            positions = torch.arange(q.shape[2], device=q.device)
        seen = window_mask(positions.to(q.device)[:, None], torch.arange(k.shape[2], device=q.device)[None, :],
                           self.window, causal=False)
        scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(self.head_dim)
        return scores.masked_fill(~seen, float("-inf")).double()

    # -- costs -------------------------------------------------------------------------------
    def resolved_options(self):
        """The options, and ``num_features`` = D: its weights are exp(q.k / sqrt(D)) of q, k
        themselves, as softmax's (the fidelity mode's d_phi)."""
        return {"window": self.window, "chunk_size": self.chunk_size, "num_features": self.head_dim}

    def head_flops(self, n, value_dim, causal, impl):
        """Over P scored (query, key) pairs: forward 2 P (D + E) (the scores, then weights @ v).
        naive: P = N^2, the whole matrix causal or not; backward twice the forward. chunk: P = the
        pairs of its bands (bands.band_pairs, about N (chunk + window), 2 window non-causal);
        backward 4 P (D + E), the products of the math backward as torch's counter counts them
        (the fused CPU kernel also recomputes the band's scores, 2 P D more). flex: P = the pairs
        of the tiles its block mask lists (flex.tile_pairs), head dims widened to 16; backward
        2 P (3 D + 2 E), as softmax's sdpa: the scores again, then d v, d p, d q, d k."""
        d, e = self.head_dim, value_dim
        if impl == "naive":
            forward = 2.0 * n * n * (d + e)
            return forward, 2 * forward
        if impl == "chunk":
            pairs = band_pairs(n, self.window, causal, self.chunk_size)
            return 2.0 * pairs * (d + e), 4.0 * pairs * (d + e)
        pairs = tile_pairs(n, self.window, causal)
        d, e = max(d, MIN_HEAD_DIM), max(e, MIN_HEAD_DIM)
        return 2.0 * pairs * (d + e), 2.0 * pairs * (3 * d + 2 * e)

    def state_bytes(self, batch, heads, n, value_dim, dtype=torch.float32):
        """The ring: keys (B,H,S,D) and values (B,H,S,E) in ``dtype`` for S = min(n, window) tokens,
        and its int64 length."""
        slots = min(n, self.window)
        return batch * heads * slots * (self.head_dim + value_dim) * torch.empty((), dtype=dtype).element_size() + 8

    # -- the recurrent form: a ring buffer of the last window keys and values (ring.py) --------
    def init_state(self, batch, heads, head_dim, value_dim, device=None, dtype=None):
        """An empty ring in ``dtype`` (float32 by default); it grows to ``window`` slots, then turns."""
        if head_dim != self.head_dim:
            raise MethodError(f"sliding_window: built for head_dim={self.head_dim}, init_state got {head_dim}")
        empty = dict(device=device, dtype=dtype or torch.float32)
        return new_ring(torch.zeros(batch, heads, 0, head_dim, **empty),
                        torch.zeros(batch, heads, 0, value_dim, **empty), self.window)

    def prefill_state(self, k, v):
        return new_ring(k, v, self.window)

    def step(self, q_t, k_t, v_t, state):
        """Write (k_t, v_t) into the ring, then attend with q_t over the window it holds: (o_t (B,H,E), ring)."""
        check_ring(state, q_t, v_t, self.window)
        state = push(state, k_t, v_t, self.window)
        keys, values = state["keys"], state["values"]
        if self.impl == "naive":
            o_t = softmax_attention(q_t.unsqueeze(2), keys, values)
        else:
            o_t = F.scaled_dot_product_attention(q_t.unsqueeze(2).to(keys.dtype), keys, values)
        return o_t.squeeze(2).to(q_t.dtype), state

    def extra_repr(self):
        return f"head_dim={self.head_dim}, impl={self.impl}, window={self.window}"
