"""Performer's FAVOR+ (Choromanski et al. 2021): positive orthogonal random features of exp.

Its paths are the kernelized core's (methods/_featuremap/: naive.py the reference, chunk.py the
chunked path, triton.py the kernels) run on this map (``PositiveRandomFeatures`` in
_featuremap/maps.py) with this module's projection (projection.py): one draw, as Zoology's Performer
map and most trained Performers use; ``redraw_interval`` redraws it during training on request.
"""

from __future__ import annotations

import math

import torch

from methods._featuremap.common import scaled_eps
from methods._featuremap.maps import ALL_KEYS, PositiveRandomFeatures
from methods._featuremap.module import FeatureMapAttention
from methods.favor.projection import draw_generator, orthogonal_gaussian_projection
from methods.registry import register

# Largest key logit (w.x - |x|^2/2) kept unshifted in the causal form: key features stay below
# e^64, so a sum over 2^20 keys of them times values stays inside float32 (about e^88).
KEY_LOGIT_CEILING = 64.0


@register
class FavorAttention(FeatureMapAttention):
    """phi(x) = exp(w_r.x - |x|^2/2)/sqrt(m) on x = q/D^(1/4), so E[phi(q).phi(k)] = exp(q.k/sqrt(D))."""

    name = "favor"
    paper = {
        "authors": "K. Choromanski, V. Likhosherstov, D. Dohan, X. Song, A. Gane, T. Sarlos, P. Hawkins, et al.",
        "year": 2021,
        "title": "Rethinking Attention with Performers",
        "url": "https://arxiv.org/abs/2009.14794",
    }
    # num_features: None = round(D ln D). redraw_interval: 0 = one draw for the whole run (as Zoology's
    # Performer map); N = a fresh projection every N training steps (never in eval): each redraw swaps the
    # features the model reads. seed: seeds the random projection.
    method_options = {**FeatureMapAttention.method_options, "num_features": None, "redraw_interval": 0, "seed": 0}
    fidelity_note = ("favor: unbiased positive random features; the error should fall as 1/sqrt(d_phi) "
                     "(slopes below), and grows with the score temperature.")

    @classmethod
    def fidelity_variants(cls, feature_counts):
        """One random map per feature count of the grid."""
        return [{"num_features": m} for m in feature_counts]

    def __init__(self, head_dim: int, impl: str = "auto", **options) -> None:
        super().__init__(head_dim, impl, **options)
        no_choice = self.options["num_features"] is None
        m = max(1, round(head_dim * math.log(head_dim))) if no_choice else self.int_option("num_features")
        # 0 = never. A redraw swaps the features the model has learned to read for fresh ones: on the
        # board every validation drop of over 3 points fell within 100 steps of one (redraw every 1,000).
        self.redraw_interval = self.int_option("redraw_interval", minimum=0)
        self.seed = self.int_option("seed", minimum=0)
        self._num_features = m
        # Buffers, so that state_dict saves the projection in use and where the redraw schedule is.
        self.register_buffer("projection", orthogonal_gaussian_projection(m, head_dim, draw_generator(self.seed, 0)))
        self.register_buffer("training_calls", torch.zeros((), dtype=torch.long))

    @property
    def num_features(self) -> int:
        return self._num_features

    def forward(self, q, k, v, causal=False):
        if self.training and self.redraw_interval:
            calls = int(self.training_calls)
            if calls and calls % self.redraw_interval == 0:
                self.redraw(calls // self.redraw_interval)
            self.training_calls += 1
        return super().forward(q, k, v, causal)

    @torch.no_grad()
    def redraw(self, draw_index: int) -> None:
        """Replace the projection by draw number ``draw_index`` of this seed."""
        fresh = orthogonal_gaussian_projection(self.num_features, self.head_dim, draw_generator(self.seed, draw_index))
        self.projection.copy_(fresh)

    def _map(self, key_shift: torch.Tensor | str | None = None) -> PositiveRandomFeatures:
        """The map on the projection as it is now (redraws replace it in place); ``key_shift`` as
        PositiveRandomFeatures takes it (None: the query map)."""
        return PositiveRandomFeatures(self.projection, self.head_dim, key_shift)

    def feature_map(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        """exp(w_r.x - |x|^2/2)/sqrt(m) on x = input/D^(1/4), unstabilised: (B,H,N,m)."""
        self.check_kind(kind)
        return self._map().unshifted(x)

    def feature_map_flops(self, n, impl, causal):
        """Both maps project onto the m random directions: 2 N D m each, forward and backward (the
        projection is a buffer: only the input gets a gradient)."""
        per_map = 2.0 * n * self.head_dim * self.num_features
        return 2 * per_map, 2 * per_map

    def _causal_key_shift(self) -> torch.Tensor:
        """The key shift of the causal form: w.x - |x|^2/2 <= |w|^2/2, so keys stay below e^64."""
        bound = 0.5 * self.projection.float().square().sum(-1).max()
        return (bound - KEY_LOGIT_CEILING).clamp_min(0.0)

    def chunk_maps(self, q, k):
        return q, k, self._map(), self._map(self._causal_key_shift())

    def features(self, q, k, causal):
        """The feature maps with a factor pulled out of each, and eps scaled by the same factors,
        so the attention equals the unstabilised one exactly while exp stays in range. Queries:
        each its own max over features. Keys: in the causal form a shift that depends on the
        projection only (w.x - |x|^2/2 <= |w|^2/2), so later keys cannot reach earlier outputs;
        otherwise the max over all keys and features."""
        phi_q, query_shift = self._map().full(q)
        phi_k, key_shift = self._map(self._causal_key_shift() if causal else ALL_KEYS).full(k)
        return phi_q, phi_k, scaled_eps(query_shift + key_shift)
