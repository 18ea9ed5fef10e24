"""Based's second-order Taylor approximation of exp (Arora et al. 2024) as a feature map.

Its paths are the kernelized core's (methods/_featuremap/: naive.py the reference, chunk.py the
chunked path, triton.py the kernels) run on this map (``SecondOrderTaylor`` in _featuremap/maps.py).
"""

from __future__ import annotations

import math

from methods._featuremap.maps import SecondOrderTaylor
from methods._featuremap.module import FeatureMapAttention
from methods.base import PeerKernel
from methods.registry import register


@register
class TaylorAttention(FeatureMapAttention):
    """phi(q).phi(k) = 1 + s + s^2/2, s = q.k/sqrt(d), on queries and keys of width d = ``feature_dim``.

    Based projects the hidden state once, straight to ``feature_dim`` (16) dimensions, for queries
    and keys, so that the d^2 features stay cheap. Here that width is the method's
    ``query_key_dim``: the model makes q and k at that width with its own projection, and the map
    reads them as they are (version 2; version 1 projected the model's head-wide q and k a second
    time, through learned maps of its own, and that stack stayed at chance on the board's recall
    point where Based learns: docs/peer_check.md).
    """

    name = "taylor"
    paper = {
        "authors": "S. Arora, S. Eyuboglu, M. Zhang, A. Timalsina, S. Alberti, D. Zinsley, J. Zou, A. Rudra, C. Ré",
        "year": 2024,
        "title": "Simple linear attention language models balance the recall-throughput tradeoff",
        "url": "https://arxiv.org/abs/2402.18668",
    }
    version = 2
    fidelity_note = ("taylor: 1 + s + s^2/2 equals exp(s) up to s^3/6, so its error grows with the score "
                     "temperature, not with d_phi; both d_phi rows (all D^2 products, or the symmetric half) "
                     "define the same kernel. Measured on the head's own q and k (feature_dim null), the ones "
                     "softmax reads: a narrower feature_dim is a width the model projects to, not an "
                     "approximation of softmax on the same inputs.")

    @classmethod
    def fidelity_variants(cls, feature_counts):
        """The full and the symmetric-half map on the head's q and k: the same kernel at two feature counts."""
        return [{"feature_dim": None, "symmetric_half": False}, {"feature_dim": None, "symmetric_half": True}]
    # symmetric_half: keep only the i <= j quadratic terms (1 + d + d(d+1)/2 features).
    # feature_dim: the width d of the q and k the map reads; None: the head's width.
    method_options = {**FeatureMapAttention.method_options, "symmetric_half": False, "feature_dim": None}
    # Runs read q and k at Based's 16 dims (273 features), the width the model projects to; the
    # method's own default, the head's width, is what mode=fidelity compares (fidelity_variants).
    run_defaults = {"feature_dim": 16}

    def __init__(self, head_dim: int, impl: str = "auto", **options) -> None:
        super().__init__(head_dim, impl, **options)
        self.symmetric_half = self.bool_option("symmetric_half")
        if self.options["feature_dim"] is not None:
            self.int_option("feature_dim")
        self.map_dim = self.query_key_dim
        self.taylor_map = SecondOrderTaylor(self.map_dim, self.symmetric_half)

    @classmethod
    def query_key_width(cls, head_dim, options):
        feature_dim = options.get("feature_dim")
        valid = isinstance(feature_dim, int) and not isinstance(feature_dim, bool) and feature_dim >= 1
        return feature_dim if valid else head_dim  # an invalid feature_dim is refused by __init__

    def peer_kernels(self):
        """fla's Based kernels: they compute 1 + s + s^2/2 with s = q.k * scale on q, k themselves,
        the Taylor map inside them."""
        return tuple(PeerKernel("fla.ops.based", function, self._fla_based, self.map_dim, max_dim)
                     for function, max_dim in (("parallel_based", 128), ("fused_chunk_based", 16)))

    def _fla_based(self, kernel, q, k, v):
        q_t, k_t, v_t = (t.transpose(1, 2) for t in (q, k, v))
        return kernel(q_t, k_t, v_t, scale=1.0 / math.sqrt(self.map_dim), use_norm=True).transpose(1, 2)

    @property
    def num_features(self) -> int:
        return self.taylor_map.num_features

    def resolved_options(self):
        return {**self.options, "num_features": self.num_features, "map_dim": self.map_dim}

    def feature_map_flops(self, n, impl, causal):
        """In the causal chunked core, the backward's (G + G^T) x per token (2 d^2 per map); the d^2
        quadratic features themselves are elementwise products."""
        d = self.map_dim
        return 0.0, (2 * 2.0 * n * d * d if impl == "chunk" and causal else 0.0)

    def feature_map(self, x, kind):
        """[1, x/d^(1/4), vec(x x^T)/(sqrt(2) sqrt(d))] of x: (B,H,N,F)."""
        self.check_kind(kind)
        return self.taylor_map.full(x.float())

    def chunk_maps(self, q, k):
        # The d^2 features are made block by block from q and k as they are.
        return q, k, self.taylor_map, self.taylor_map
