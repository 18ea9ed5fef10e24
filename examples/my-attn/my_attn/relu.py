"""phi(x) = relu(x): a feature map with the naive path and the chunked one (O(N) memory).

``feature_map`` is the whole-tensor form every path but the causal chunked one reads; ``chunk_maps``
hands that path the same map in the block form. The public base ``methods.FeatureMap`` makes the
block form from ``full`` alone (its backward by autograd on each block).
"""

import torch

from methods import FeatureMap, FeatureMapAttention


class ReluMap(FeatureMap):
    def full(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x.float())


class ReluAttention(FeatureMapAttention):
    name = "relu_fm"
    impls = ("naive", "chunk")
    cpu_default = "chunk"

    @property
    def num_features(self) -> int:
        return self.head_dim

    def feature_map(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        self.check_kind(kind)
        return ReluMap(self.head_dim).full(x)

    def chunk_maps(self, q, k):
        relu = ReluMap(self.head_dim)
        return q, k, relu, relu
