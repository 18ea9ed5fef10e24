"""Softmax over each query's k highest scores: exact attention's cost, no recurrent form (so decode
and the state axis record "not applicable"), one path (naive), and its FLOPs declared."""

import math

import torch

from methods import AttentionMethod


class TopKSoftmax(AttentionMethod):
    name = "topk_softmax"
    impls = ("naive",)
    cpu_default = "naive"
    time_in_length = "N^2"
    method_options = {"top_k": 32}

    def __init__(self, head_dim: int, impl: str = "auto", **options) -> None:
        super().__init__(head_dim, impl, **options)
        self.top_k = self.int_option("top_k")  # a MethodError naming the option when not an integer >= 1

    def _forward_naive(self, q, k, v, causal):
        scores = torch.einsum("bhnd,bhmd->bhnm", q.float(), k.float()) / math.sqrt(q.shape[-1])
        n = scores.shape[-1]
        if causal:
            future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        kept = scores.topk(min(self.top_k, n), dim=-1).indices
        dropped = torch.ones_like(scores, dtype=torch.bool).scatter(-1, kept, False)
        weights = scores.masked_fill(dropped, float("-inf")).softmax(-1)
        return torch.einsum("bhnm,bhme->bhne", weights, v.float()).to(q.dtype)

    def head_flops(self, n, value_dim, causal, impl):
        """scores 2 N^2 D and weights @ v 2 N^2 E, masked or not; the backward twice that."""
        forward = 2.0 * n * n * (self.head_dim + value_dim)
        return forward, 2 * forward
