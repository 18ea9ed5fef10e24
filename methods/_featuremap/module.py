"""The base class of the kernelized methods: options, dispatch among impls, and the recurrent form.

A subclass supplies ``feature_map(x, kind)`` and ``num_features`` (the full-tensor maps of the naive,
Triton, non-causal and recurrent forms) and ``chunk_maps`` (the same maps in their block form, for
the causal chunked core; maps.py holds both forms of each map); it may override ``features`` to
compute a numerically stabilised pair of feature maps (with the matching epsilon) for ``forward``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from methods._featuremap import flops
from methods._featuremap.chunk import causal_feature_attention, full_feature_attention
from methods._featuremap.common import DENOMINATOR_EPS, divide_by_denominator, key_sums
from methods._featuremap.naive import feature_attention
from methods.base import AttentionMethod, MethodError, PeerKernel


class FeatureMapAttention(AttentionMethod):
    """o_i = sum_j (phi(q_i).phi(k_j)) v_j / (sum_j phi(q_i).phi(k_j) + eps), j <= i when causal."""

    impls = ("naive", "chunk", "triton")
    cpu_default = "chunk"
    #: Options of every kernelized method (chunk_size: tokens per chunk of the chunked path); a
    #: subclass extends this dict with its own.
    method_options: ClassVar[dict[str, Any]] = {"chunk_size": 64}

    def __init__(self, head_dim: int, impl: str = "auto", **options: Any) -> None:
        super().__init__(head_dim, impl, **options)
        self.chunk_size = self.int_option("chunk_size")

    # -- what a subclass supplies ------------------------------------------------------------
    @property
    def num_features(self) -> int:
        """F, the size of one feature vector."""
        raise NotImplementedError

    def feature_map(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        """phi(x) for x (B,H,N,D) of ``kind`` "query" or "key": (B,H,N,F)."""
        raise NotImplementedError

    def features(
        self, q: torch.Tensor, k: torch.Tensor, causal: bool
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        """(phi_q, phi_k, eps) that ``forward`` and ``step`` use; the attention equals the one of
        ``feature_map`` with DENOMINATOR_EPS. Keys of the causal form may not see later keys."""
        return self.feature_map(q, "query"), self.feature_map(k, "key"), DENOMINATOR_EPS

    def chunk_maps(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Any, Any]:
        """(x_q, x_k, query map, key map) for the causal chunked core: the maps (``methods.FeatureMap``,
        whose subclass may define ``full`` alone) applied block by block to x_q, x_k give the causal
        ``features`` of q, k."""
        raise NotImplementedError

    # -- what it costs -------------------------------------------------------------------------
    def resolved_options(self) -> dict[str, Any]:
        return {**self.options, "num_features": self.num_features}

    def feature_map_flops(self, n: int, impl: str, causal: bool) -> tuple[float, float]:
        """(forward, backward) FLOPs of both feature maps over n tokens of one (batch, head):
        the matrix products they run (none for an elementwise map)."""
        return 0.0, 0.0

    def head_flops(self, n, value_dim, causal, impl):
        """The core (methods/_featuremap/flops.py) plus the feature maps (``feature_map_flops``)."""
        f = self.num_features
        if impl == "naive":
            core = flops.naive_flops(n, f, value_dim)
        elif impl == "chunk":
            core = flops.chunk_flops(n, f, value_dim, self.chunk_size, causal)
        else:
            core = flops.triton_flops(n, f, value_dim, causal)
        maps = self.feature_map_flops(n, impl, causal)
        return core[0] + maps[0], core[1] + maps[1]

    denominator_eps = DENOMINATOR_EPS

    def log_weights(self, q, k, positions=None):
        """log(phi(q) . phi(k)) of the float32 feature maps, multiplied out in float64."""
        weights = self.feature_map(q, "query").double() @ self.feature_map(k, "key").double().transpose(-1, -2)
        return weights.log()

    def peer_kernels(self):
        """fla's chunk_linear_attn on this method's own (stabilised) features, normalised."""
        return (PeerKernel("fla.ops.linear_attn", "chunk_linear_attn", self._fla_linear_attention, self.num_features),)

    def _fla_linear_attention(self, kernel, q, k, v):
        phi_q, phi_k, _ = self.features(q, k, True)
        heads_last = [t.transpose(1, 2) for t in (phi_q.to(v.dtype), phi_k.to(v.dtype), v)]
        out, _ = kernel(*heads_last, scale=1.0, normalize=True)
        return out.transpose(1, 2)

    def state_bytes(self, batch, heads, n, value_dim, dtype=torch.float32):
        """The float32 running sums kv (B,H,F,E) and z (B,H,F), whatever n and dtype."""
        return batch * heads * self.num_features * (value_dim + 1) * 4

    # -- the parallel form -------------------------------------------------------------------
    def _forward_naive(self, q, k, v, causal):
        phi_q, phi_k, eps = self.features(q, k, causal)
        return feature_attention(phi_q, phi_k, v, causal, eps).to(q.dtype)

    def _forward_chunk(self, q, k, v, causal):
        if causal:
            x_q, x_k, query_map, key_map = self.chunk_maps(q, k)
            out = causal_feature_attention(x_q, x_k, v, query_map, key_map, DENOMINATOR_EPS, self.chunk_size)
        else:
            phi_q, phi_k, eps = self.features(q, k, causal)
            out = full_feature_attention(phi_q.float(), phi_k.float(), v, eps)
        return out.to(q.dtype)

    def _forward_triton(self, q, k, v, causal):
        # Imported here so that the CPU paths never need Triton.
        from methods._featuremap.triton import feature_attention_triton

        phi_q, phi_k, eps = self.features(q, k, causal)
        if q.dtype in (torch.bfloat16, torch.float16):
            # Features are made in float32 (exp and squares need its range); handing them to the
            # kernels in the input's precision puts their products on the tensor cores. Sums,
            # states and denominators still accumulate in float32 inside the kernels.
            phi_q, phi_k = phi_q.to(q.dtype), phi_k.to(q.dtype)
        return feature_attention_triton(phi_q, phi_k, v, causal, eps).to(q.dtype)

    # -- the recurrent form: running sums of phi(k) v^T and phi(k), kept in float32 ----------
    def init_state(self, batch, heads, head_dim, value_dim, device=None, dtype=None):
        """Zero running sums {"kv": (B,H,F,E), "z": (B,H,F)}; float32 whatever ``dtype`` is."""
        if head_dim != self.query_key_dim:
            raise MethodError(f"{self.name}: built for queries and keys of width {self.query_key_dim}, "
                              f"init_state got {head_dim}")
        f = self.num_features
        return {
            "kv": torch.zeros(batch, heads, f, value_dim, device=device, dtype=torch.float32),
            "z": torch.zeros(batch, heads, f, device=device, dtype=torch.float32),
        }

    def prefill_state(self, k, v):
        # features(), as step uses it: favor's causal key shift depends on its projection only.
        kv, z = key_sums(lambda x: self.features(x, x, causal=True)[1], k, v)
        return {"kv": kv, "z": z}

    def step(self, q_t, k_t, v_t, state):
        """Add (k_t, v_t) to the running sums, then read them with q_t: (o_t (B,H,E), new state)."""
        self._check_state(q_t, v_t, state)
        phi_q, phi_k, eps = self.features(q_t.unsqueeze(2), k_t.unsqueeze(2), causal=True)
        phi_q, phi_k = phi_q[:, :, 0].float(), phi_k[:, :, 0].float()
        kv = state["kv"] + phi_k.unsqueeze(-1) * v_t.float().unsqueeze(-2)
        z = state["z"] + phi_k
        numerator = torch.einsum("bhf,bhfe->bhe", phi_q, kv).unsqueeze(2)
        denominator = torch.einsum("bhf,bhf->bh", phi_q, z).unsqueeze(2)
        o_t = divide_by_denominator(numerator, denominator, eps)[:, :, 0]
        return o_t.to(q_t.dtype), {"kv": kv, "z": z}

    def _check_state(self, q_t: torch.Tensor, v_t: torch.Tensor, state: Any) -> None:
        batch, heads = q_t.shape[:2]
        expected = {
            "kv": (batch, heads, self.num_features, v_t.shape[-1]),
            "z": (batch, heads, self.num_features),
        }
        shapes = {key: tuple(getattr(t, "shape", ())) for key, t in state.items()} if isinstance(state, dict) else None
        if shapes != expected:
            raise MethodError(
                f"{self.name}: step needs the state from {self.name}.init_state, shapes {expected}; got "
                f"{shapes if shapes is not None else type(state).__name__}"
            )

    def extra_repr(self) -> str:
        options = ", ".join(f"{key}={value}" for key, value in self.options.items())
        return f"{super().extra_repr()}, {options}"
