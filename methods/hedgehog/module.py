"""Hedgehog (Zhang et al., ICLR 2024): a learned feature map made to mimic softmax attention.

phi(x) = [softmax(W x + b), softmax(-(W x + b))] over the feature dimension, W (feature_dim, D)
and b (feature_dim,) learned with the model: 2 feature_dim features, each in [0, 1].

Choices (README, "Methods"):

- Queries and keys have a map each (W_q, b_q and W_k, b_k), as Hedgehog's and LoLCATs' code and
  fla's layer (``tie_feature_map_qk=False``) do; both start from the same W, so that at
  initialisation phi(q).phi(k) compares q and k in one frame (two independent draws would compare
  them through unrelated projections and approximate no q.k at all).
- One map for all heads of a layer (fla's too): the method contract builds a method from
  ``head_dim`` alone, and the recall models have one head. A map per head would need the head
  count passed in by the backbone.
- Initialisation: W a random semi-orthogonal matrix (``nn.init.orthogonal_``, the model's seed),
  b = 0. fla starts from the identity, which only exists for feature_dim = D; the orthogonal draw
  is defined for every feature_dim, keeps |W x| = |x| as the identity does (feature_dim >= D), and
  never makes two rows equal: the rows that a rectangular identity leaves zero would get equal
  gradients and stay equal for good.

Paths: the kernelized core's (methods/_featuremap/), on this map. The projections are small
products autograd takes (as Taylor's); the causal chunked core applies the softmax pair block by
block (``maps.SoftmaxPair``) to the projected logits, the other paths apply it whole. The GPU peer
is the base class's, fla's ``chunk_linear_attn`` on these features. fla's own
``HedgehogFeatureMap`` is another map, so it is no peer: one softmax over [2y, -2y] together, whose
halves share a normaliser (a key's weight then depends on how its mass splits between the halves),
with W square (feature_dim = D).
"""

from __future__ import annotations

import torch
from torch import nn

from methods._featuremap.module import FeatureMapAttention
from methods.hedgehog.maps import SoftmaxPair
from methods.registry import register


@register
class HedgehogAttention(FeatureMapAttention):
    """o_i = sum_j (phi_q(q_i).phi_k(k_j)) v_j / sum_j phi_q(q_i).phi_k(k_j), phi the learned softmax pair."""

    name = "hedgehog"
    paper = {
        "authors": "M. Zhang, K. Bhatia, H. Kumbong, C. Ré",
        "year": 2024,
        "title": "The Hedgehog & the Porcupine: Expressive Linear Attentions with Softmax Mimicry",
        "url": "https://arxiv.org/abs/2402.04347",
    }
    # feature_dim: the width of W x + b, 2 * feature_dim features; None = head_dim (fla's square map).
    method_options = {**FeatureMapAttention.method_options, "feature_dim": None}
    fidelity_note = ("hedgehog: a learned map. Its weights have a fixed scale (each half of phi sums to 1, so "
                     "phi(q).phi(k) is about 2/feature_dim where attention is near uniform) that the output and the "
                     "fit's cross-entropy ignore: the denominator columns measure that scale, not an estimation "
                     "error; output error and attention TV are the comparable columns. Rows 'hedgehog' are the map "
                     "as built, which mimics nothing; rows 'hedgehog fitted' fit W, b on half of each captured "
                     "source's queries (cross-entropy with softmax's attention rows), and both are measured on "
                     "the other half there.")
    denominator_estimates_softmax = False  # each half of phi sums to 1: a fixed scale, not exp's sum

    def __init__(self, head_dim: int, impl: str = "auto", **options) -> None:
        super().__init__(head_dim, impl, **options)
        self.feature_dim = head_dim if self.options["feature_dim"] is None else self.int_option("feature_dim")
        self.query_map = nn.Linear(head_dim, self.feature_dim)
        self.key_map = nn.Linear(head_dim, self.feature_dim)
        with torch.no_grad():
            nn.init.orthogonal_(self.query_map.weight)
            self.key_map.weight.copy_(self.query_map.weight)
            self.query_map.bias.zero_()
            self.key_map.bias.zero_()

    @classmethod
    def fidelity_variants(cls, feature_counts):
        """feature_dim = d_phi / 2 for each feature count of the grid (an odd count d_phi - 1), so
        its rows sit at the feature counts of FAVOR+'s."""
        return [{"feature_dim": d} for d in dict.fromkeys(max(1, count // 2) for count in feature_counts)]

    def attention_fit_parameters(self):
        """W and b of both maps: Hedgehog's attention distillation fits exactly these."""
        return list(self.parameters())

    @property
    def num_features(self) -> int:
        return 2 * self.feature_dim

    def resolved_options(self):
        return {**self.options, "feature_dim": self.feature_dim, "num_features": self.num_features}

    def feature_map_flops(self, n, impl, causal):
        """The two projections, 2 N D F each (bias added in the product); backward twice that
        (input and weight gradients). The softmaxes are elementwise work and reductions, not
        counted (methods/_featuremap/flops.py), whatever the path."""
        per_map = 2.0 * n * self.head_dim * self.feature_dim
        return 2 * per_map, 4 * per_map

    def logits(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        """W x + b of the ``kind``'s map, float32: (B,H,N,feature_dim)."""
        self.check_kind(kind)
        projection = self.query_map if kind == "query" else self.key_map
        return nn.functional.linear(x.float(), projection.weight.float(), projection.bias.float())

    def feature_map(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        """[softmax(W x + b), softmax(-(W x + b))]: (B,H,N,2 feature_dim), float32."""
        return SoftmaxPair.full(self.logits(x, kind))

    def chunk_maps(self, q, k):
        pair = SoftmaxPair(self.feature_dim)
        return self.logits(q, "query"), self.logits(k, "key"), pair, pair
