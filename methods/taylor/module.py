"""Based's second-order Taylor approximation of exp (Arora et al. 2024) as a feature map.

Its paths are the kernelized core's (methods/_featuremap/: naive.py the reference, chunk.py the
chunked path, triton.py the kernels) run on this map (``SecondOrderTaylor`` in _featuremap/maps.py),
after the optional learned projections.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from methods._featuremap.maps import SecondOrderTaylor
from methods._featuremap.module import FeatureMapAttention
from methods.base import PeerKernel
from methods.registry import register


@register
class TaylorAttention(FeatureMapAttention):
    """phi(q).phi(k) = 1 + s + s^2/2, s = q.k/sqrt(d); q and k optionally projected to d first."""

    name = "taylor"
    fidelity_note = ("taylor: 1 + s + s^2/2 equals exp(s) up to s^3/6, so its error grows with the score "
                     "temperature, not with d_phi; both d_phi rows (all D^2 products, or the symmetric half) "
                     "define the same kernel. feature_dim projections are not swept: untrained, they send "
                     "queries and keys through independent random matrices and approximate no q.k at all.")

    @classmethod
    def fidelity_variants(cls, feature_counts):
        """The full and the symmetric-half map: the same kernel at two feature counts."""
        return [{"symmetric_half": False}, {"symmetric_half": True}]
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
        self.taylor_map = SecondOrderTaylor(self.map_dim, self.symmetric_half)

    def peer_kernels(self):
        """fla's Based kernels: they compute 1 + s + s^2/2 with s = q.k * scale on the (projected)
        q, k themselves, the Taylor map inside them."""
        return tuple(PeerKernel("fla.ops.based", function, self._fla_based, self.map_dim, max_dim)
                     for function, max_dim in (("parallel_based", 128), ("fused_chunk_based", 16)))

    def _fla_based(self, kernel, q, k, v):
        if self.query_projection is not None:
            q, k = self.query_projection(q), self.key_projection(k)
        q_t, k_t, v_t = (t.transpose(1, 2) for t in (q, k, v))
        return kernel(q_t, k_t, v_t, scale=1.0 / math.sqrt(self.map_dim), use_norm=True).transpose(1, 2)

    @property
    def num_features(self) -> int:
        return self.taylor_map.num_features

    def resolved_options(self):
        return {**self.options, "num_features": self.num_features, "map_dim": self.map_dim}

    def feature_map_flops(self, n, impl, causal):
        """The learned projections (2 N D d each; twice that backward, input and weight) and, in
        the causal chunked core, the backward's (G + G^T) x per token (2 d^2 per map); the d^2
        quadratic features themselves are elementwise products."""
        d = self.map_dim
        projection = 0.0 if self.query_projection is None else 2 * 2.0 * n * self.head_dim * d
        quadratic = 2 * 2.0 * n * d * d if impl == "chunk" and causal else 0.0
        return projection, 2 * projection + quadratic

    def _projected(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        """x (projected to ``feature_dim`` when the module has projections), float32."""
        projection = self.query_projection if kind == "query" else self.key_projection
        if projection is None:
            return x.float()
        return nn.functional.linear(x.float(), projection.weight.float())

    def feature_map(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        """[1, x/d^(1/4), vec(x x^T)/(sqrt(2) sqrt(d))] of the (projected) x: (B,H,N,F)."""
        self.check_kind(kind)
        return self.taylor_map.full(self._projected(x, kind))

    def chunk_maps(self, q, k):
        # The projections are small (N x D x d) and learned: autograd takes them; the d^2
        # features are made block by block. Unprojected inputs are read as they are.
        phi = self.taylor_map
        if self.query_projection is None:
            return q, k, phi, phi
        return self._projected(q, "query"), self._projected(k, "key"), phi, phi
