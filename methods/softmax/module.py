"""Softmax attention behind the method contract: ``naive`` (the definition) and ``sdpa``."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from methods.base import AttentionMethod, MethodError
from methods.registry import register
from methods.softmax.naive import softmax_attention


@register
class SoftmaxAttention(AttentionMethod):
    name = "softmax"
    impls = ("naive", "sdpa")
    cpu_default = "sdpa"

    def __init__(self, head_dim: int, impl: str = "auto", **options) -> None:
        if options:
            raise MethodError(f"softmax takes no options, got: {', '.join(sorted(options))}")
        super().__init__(head_dim, impl)

    def _forward_naive(self, q, k, v, causal):
        return softmax_attention(q, k, v, causal)

    def _forward_sdpa(self, q, k, v, causal):
        # PyTorch picks its own backend (flash, cuDNN, memory-efficient or math) for the device.
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    # The KV cache: every past key and value, read in full at each step.
    def init_state(self, batch, heads, head_dim, value_dim, device=None, dtype=None):
        empty = dict(device=device, dtype=dtype or torch.float32)
        return {
            "k": torch.zeros(batch, heads, 0, head_dim, **empty),
            "v": torch.zeros(batch, heads, 0, value_dim, **empty),
        }

    def step(self, q_t, k_t, v_t, state):
        keys = torch.cat([state["k"], k_t.unsqueeze(2).to(state["k"].dtype)], dim=2)
        values = torch.cat([state["v"], v_t.unsqueeze(2).to(state["v"].dtype)], dim=2)
        scores = torch.einsum("bhd,bhmd->bhm", q_t.float(), keys.float()) / math.sqrt(q_t.shape[-1])
        o_t = torch.einsum("bhm,bhme->bhe", scores.softmax(-1), values.float()).to(q_t.dtype)
        return o_t, {"k": keys, "v": values}
