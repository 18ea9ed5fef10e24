"""Linear attention (Katharopoulos et al. 2020): the feature map elu(x) + 1, no scaling.

Its paths are the kernelized core's (methods/_featuremap/: naive.py the reference, chunk.py the
chunked path, triton.py the kernels) run on this map (``EluPlusOne`` in _featuremap/maps.py).
"""

from __future__ import annotations

import torch

from methods._featuremap.maps import EluPlusOne
from methods._featuremap.module import FeatureMapAttention
from methods.registry import register


@register
class LinearAttention(FeatureMapAttention):
    name = "linear"
    paper = {
        "authors": "A. Katharopoulos, A. Vyas, N. Pappas, F. Fleuret",
        "year": 2020,
        "title": "Transformers are RNNs: Fast Autoregressive Transformers with Linear Attention",
        "url": "https://arxiv.org/abs/2006.16236",
    }
    denominator_estimates_softmax = False  # elu(x)+1 sums another kernel: no estimate of exp's sum
    fidelity_note = ("elu(x)+1 is not an approximation of exp at all: its denominator sums a different kernel, so "
                     "the denominator and numerator columns measure that change of kernel, not an estimation "
                     "error; attention TV and output error are the comparable columns.")

    @property
    def num_features(self) -> int:
        return self.head_dim

    def feature_map(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        """elu(x) + 1 for queries and keys alike: (B,H,N,D)."""
        self.check_kind(kind)
        return EluPlusOne.full(x)

    def chunk_maps(self, q, k):
        phi = EluPlusOne(self.head_dim)
        return q, k, phi, phi
