"""Based's second-order Taylor approximation of exp (Arora et al. 2024) as a feature map."""

from __future__ import annotations

import math

import torch
from torch import nn

from methods._featuremap.maps import second_order_taylor
from methods._featuremap.module import FeatureMapAttention
from methods.registry import register


@register
class TaylorAttention(FeatureMapAttention):
    """phi(q).phi(k) = 1 + s + s^2/2, s = q.k/sqrt(d); q and k optionally projected to d first."""

    name = "taylor"
    method_options = {**FeatureMapAttention.method_options, "feature_dim": None, "symmetric_half": False}

    def __init__(self, head_dim: int, impl: str = "auto", **options) -> None:
        super().__init__(head_dim, impl, **options)
        feature_dim = self.options["feature_dim"]
        self.symmetric_half = self.bool_option("symmetric_half")
        if feature_dim is None:
            self.query_projection = self.key_projection = None
            self.map_dim = head_dim
        else:
            # Based projects to 16 dims so that the d^2 features stay cheap; one map for queries,
            # one for keys, shared by all heads. Their std 1/sqrt(D) keeps |x|^2 near |q|^2 at init.
            self.map_dim = self.int_option("feature_dim")
            self.query_projection = nn.Linear(head_dim, self.map_dim, bias=False)
            self.key_projection = nn.Linear(head_dim, self.map_dim, bias=False)
            for projection in (self.query_projection, self.key_projection):
                nn.init.normal_(projection.weight, std=1.0 / math.sqrt(head_dim))

    @property
    def num_features(self) -> int:
        d = self.map_dim
        return 1 + d + (d * (d + 1) // 2 if self.symmetric_half else d * d)

    def feature_map(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        """[1, x/d^(1/4), vec(x x^T)/(sqrt(2) sqrt(d))] of the (projected) x: (B,H,N,F)."""
        self.check_kind(kind)
        x = x.float()
        projection = self.query_projection if kind == "query" else self.key_projection
        if projection is not None:
            x = nn.functional.linear(x, projection.weight.float())
        return second_order_taylor(x, self.symmetric_half)
