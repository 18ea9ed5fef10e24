"""Log-linear attention behind the method contract: ``naive``, ``chunk`` and ``triton``.

phi = elu + 1 on queries and keys; the per-level weights lambda come from q through a small learned
projection with softplus, initialised to exactly 1 (then the method is causal linear attention); an
optional decay gate (log sigmoid of a learned projection of k, per token) multiplies the weight of
key s for query t by the product of the gates after s up to t, as in Mamba-2 / gated linear attention.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from methods._featuremap.common import DENOMINATOR_EPS
from methods._featuremap.maps import EluPlusOne
from methods.base import AttentionMethod, MethodError, PeerKernel
from methods.loglinear import flops, recurrent
from methods.loglinear.chunk import check_chunk_size, loglinear_attention_chunk
from methods.loglinear.inputs import LogLinearInputs
from methods.loglinear.levels import check_length, levels_used, max_length, noncausal_level_matrix
from methods.loglinear.naive import loglinear_attention
from methods.registry import register

OPTIONS: dict[str, Any] = {
    "chunk_size": 64,
    "feature_map": "elu",  # phi = elu(x) + 1
    # 21 levels: 0 (the token itself) and 1..20, enough for 2^20 tokens.
    "num_levels": 21,
    "decay": False,  # add a learned scalar forget gate
    # None: one projection shared by all heads; an int: one per head (inputs must have that many).
    "num_heads": None,
}
# Each map in both forms (_featuremap/maps.py): ``full`` for naive, Triton and stepping, the block
# form inside the chunked core.
FEATURE_MAPS = {"elu": EluPlusOne}
# softplus(log(e - 1)) = 1: every level weight starts at exactly one.
LEVEL_BIAS_INIT = math.log(math.e - 1)
# sigmoid(log 255) = 255/256: decay starts close to none (half-life ~177 tokens) and is learned.
GATE_BIAS_INIT = math.log(255.0)


@register
class LogLinearAttention(AttentionMethod):
    name = "loglinear"
    paper = {
        "authors": "H. Guo, S. Yang, T. Goel, E. P. Xing, T. Dao, Y. Kim",
        "year": 2025,
        "title": "Log-Linear Attention",
        "url": "https://arxiv.org/abs/2506.04761",
    }
    time_in_length = "N log N"  # one state per Fenwick level, log N of them
    impls = ("naive", "chunk", "triton")
    cpu_default = "chunk"
    denominator_eps = DENOMINATOR_EPS
    denominator_estimates_softmax = False  # elu(x)+1 sums another kernel: no estimate of exp's sum
    fidelity_note = ("log-linear attention with lambda = 1 as initialised equals linear attention with "
                     "elu(x)+1, causal or not: it estimates a different kernel than exp (see linear); TV and "
                     "output error are the comparable columns.")

    def log_weights(self, q, k, positions=None):
        """log(phi(q) . phi(k)) plus log lambda_i at the level of each key; non-causal levels: the
        causal ones up to the query, those of the reversed pass after it."""
        weights = self.feature_map(q, "query").double() @ self.feature_map(k, "key").double().transpose(-1, -2)
        lam = self.level_weights(q).double()  # (B, H, Q, L)
        n = k.shape[-2]
        rows = torch.arange(q.shape[-2], device=k.device) if positions is None else positions
        levels = noncausal_level_matrix(n, device=k.device)[rows]  # (Q, N)
        return weights.log() + lam.gather(-1, levels.expand(*lam.shape[:-1], n)).log()

    method_options = OPTIONS

    def __init__(self, head_dim: int, impl: str = "auto", **options: Any) -> None:
        super().__init__(head_dim, impl, **options)
        settings = self.options
        if settings["feature_map"] not in FEATURE_MAPS:
            raise MethodError(
                f"loglinear: unknown feature_map {settings['feature_map']!r}; valid: {', '.join(FEATURE_MAPS)}"
            )
        num_levels, num_heads = settings["num_levels"], settings["num_heads"]
        if not isinstance(num_levels, int) or isinstance(num_levels, bool) or not 1 <= num_levels <= 63:
            raise MethodError(f"loglinear: num_levels must be an integer in 1..63, got {num_levels!r}")
        if num_heads is not None and (not isinstance(num_heads, int) or isinstance(num_heads, bool) or num_heads < 1):
            raise MethodError(f"loglinear: num_heads must be None or a positive integer, got {num_heads!r}")
        self.bool_option("decay")
        check_chunk_size(settings["chunk_size"])
        self.feature_map_name = settings["feature_map"]
        self.phi_map = FEATURE_MAPS[self.feature_map_name](head_dim)
        self.num_levels, self.num_heads = num_levels, num_heads
        self.chunk_size, self.decay = settings["chunk_size"], settings["decay"]

        projections = num_heads or 1
        self.level_weight = nn.Parameter(torch.zeros(projections, head_dim, num_levels))
        self.level_bias = nn.Parameter(torch.full((projections, num_levels), LEVEL_BIAS_INIT))
        if self.decay:
            self.gate_weight = nn.Parameter(torch.zeros(projections, head_dim))
            self.gate_bias = nn.Parameter(torch.full((projections,), GATE_BIAS_INIT))

    # -- the learned pieces, computed in float32 for every implementation -----------------------
    def feature_map(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        """phi(x) in float32 for ``kind`` "query" or "key" (the same map), as the kernelized methods."""
        self.check_kind(kind)
        return self.phi_map.full(x)

    def _per_head(self, parameter: torch.Tensor, heads: int) -> torch.Tensor:
        if self.num_heads is None:
            return parameter.expand(heads, *parameter.shape[1:])
        if heads != self.num_heads:
            raise MethodError(f"loglinear: built with num_heads={self.num_heads}, inputs have {heads} heads")
        return parameter

    def level_weights(self, q: torch.Tensor, levels: int | None = None) -> torch.Tensor:
        """lambda (B, H, N, num_levels) = softplus(q W + b), float32, positive; only the first
        ``levels`` of them when given (a sequence of N tokens reads levels_used(N))."""
        heads = q.shape[1]
        weight, bias = self._per_head(self.level_weight, heads), self._per_head(self.level_bias, heads)
        if levels is not None:
            weight, bias = weight[..., :levels], bias[..., :levels]
        return F.softplus(torch.einsum("bhnd,hdl->bhnl", q.float(), weight) + bias[:, None, :])

    def log_gates(self, k: torch.Tensor) -> torch.Tensor | None:
        """log alpha (B, H, N) <= 0 from k when decay is on, else None."""
        if not self.decay:
            return None
        heads = k.shape[1]
        weight, bias = self._per_head(self.gate_weight, heads), self._per_head(self.gate_bias, heads)
        return F.logsigmoid(torch.einsum("bhnd,hd->bhn", k.float(), weight) + bias[:, None])

    def _inputs(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> LogLinearInputs:
        """What the naive and Triton paths read: the features, v, every level's weights, the gates."""
        check_length(q.shape[2], self.num_levels)
        return LogLinearInputs(self.feature_map(q, "query"), self.feature_map(k, "key"), v, self.level_weights(q),
                               self.log_gates(k))

    # -- what it costs ------------------------------------------------------------------------------
    def resolved_options(self):
        return {**self.options, "num_features": self.head_dim, "max_length": self.max_length}

    def head_flops(self, n, value_dim, causal, impl):
        """See methods/loglinear/flops.py: the core as each implementation computes it, plus the
        level weights (chunk: the levels a sequence of n tokens reads; the others: all) and gates."""
        if impl == "naive":
            return flops.naive_flops(n, self.head_dim, value_dim, self.num_levels, self.decay, causal)
        if impl == "chunk":  # only the levels the sequence reads (the others would be unused)
            levels = min(self.num_levels, levels_used(n))
            return flops.chunk_flops(n, self.head_dim, value_dim, self.chunk_size, levels, self.decay, causal)
        return flops.triton_flops(n, self.head_dim, value_dim, self.chunk_size, self.num_levels, self.decay, causal)

    def peer_kernels(self):
        """fla's chunk_log_linear_attn with no decay and this module's level weights."""
        return (PeerKernel("fla.ops.log_linear_attn", "chunk_log_linear_attn", self._fla_loglinear, self.head_dim),)

    def _fla_loglinear(self, kernel, q, k, v):
        # fla shares q and k across heads, so heads are folded into the batch; it does not
        # normalise by a denominator.
        batch, heads, n, _ = q.shape
        fold = lambda t: t.reshape(batch * heads, n, 1, t.shape[-1])  # noqa: E731
        phi_q = self.feature_map(q, "query").to(v.dtype)
        phi_k = self.feature_map(k, "key").to(v.dtype)
        levels = self.level_weights(q).to(v.dtype)
        gates = torch.zeros(batch * heads, n, 1, device=q.device, dtype=torch.float32)
        out, _ = kernel(fold(phi_q), fold(phi_k), fold(v), gates, fold(levels))
        return out.reshape(batch, heads, n, -1)

    def state_bytes(self, batch, heads, n, value_dim, dtype=torch.float32):
        """The levels layout after n tokens: one float32 (kv (B,H,F,E), z (B,H,F)) pair per set bit of
        n, plus the int64 position and the four int64 sizes."""
        per_level = batch * heads * self.head_dim * (value_dim + 1) * 4
        return bin(n).count("1") * per_level + 8 + 4 * 8

    # -- the parallel form ------------------------------------------------------------------------
    def _forward_naive(self, q, k, v, causal):
        return loglinear_attention(self._inputs(q, k, v), causal).to(q.dtype)

    def _forward_chunk(self, q, k, v, causal):
        # The feature map is applied block by block inside (chunk.py); only the levels N reads.
        n = q.shape[2]
        check_length(n, self.num_levels)
        inputs = LogLinearInputs(q, k, v, self.level_weights(q, levels_used(n)), self.log_gates(k))
        out = loglinear_attention_chunk(inputs, causal, chunk_size=self.chunk_size, feature_map=self.phi_map)
        return out.to(q.dtype)

    def _forward_triton(self, q, k, v, causal):
        # Imported here: triton decides at import whether to interpret, from TRITON_INTERPRET.
        from methods.loglinear.triton import loglinear_attention_triton

        out = loglinear_attention_triton(self._inputs(q, k, v), causal, chunk_size=self.chunk_size)
        return out.to(q.dtype)

    # -- the recurrent form -----------------------------------------------------------------------
    def init_state(self, batch, heads, head_dim, value_dim, device=None, dtype=None, max_length=None):
        """The empty decoding state. Without ``max_length``: the levels layout (only live levels,
        bytes growing as log T). With it: the fixed layout for up to ``max_length`` tokens, whose
        ``step`` is a fixed sequence of device operations (CUDA-graph capturable); see recurrent.py."""
        if head_dim != self.head_dim:
            raise MethodError(f"loglinear: built with head_dim={self.head_dim}, init_state got {head_dim}")
        # Running sums are float32 whatever the input dtype, so dtype changes nothing.
        if max_length is None:
            return recurrent.init_state(batch, heads, head_dim, value_dim, device=device)
        self._check_max_length(max_length)
        return recurrent.init_fixed_state(batch, heads, head_dim, value_dim, max_length, device=device)

    def prefill_state(self, k, v, max_length=None):
        """The state after the prompt k, v; in the fixed layout for up to ``max_length`` tokens when given."""
        state = recurrent.prompt_state(self, k, v)
        if max_length is None:
            return state
        self._check_max_length(max_length)
        return recurrent.to_fixed(state, max_length, device=k.device)

    def _check_max_length(self, max_length) -> None:
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
            raise MethodError(f"loglinear: max_length must be a positive integer, got {max_length!r}")
        check_length(max_length, self.num_levels)

    def step(self, q_t, k_t, v_t, state):
        if q_t.dim() != 3 or k_t.shape != q_t.shape or v_t.dim() != 3 or v_t.shape[:2] != q_t.shape[:2]:
            raise MethodError(
                f"loglinear: step needs q_t, k_t (batch, heads, D) and v_t (batch, heads, E), got "
                f"{tuple(q_t.shape)}, {tuple(k_t.shape)}, {tuple(v_t.shape)}"
            )
        q, k = q_t.unsqueeze(2), k_t.unsqueeze(2)
        gates = self.log_gates(k)
        phi_q, phi_k = self.feature_map(q_t, "query"), self.feature_map(k_t, "key")
        level_weights = self.level_weights(q).squeeze(2)
        token = LogLinearInputs(phi_q, phi_k, v_t, level_weights, None if gates is None else gates.squeeze(2))
        if recurrent.is_fixed(state):
            recurrent.check_fixed_state(state, phi_q, v_t, self.num_levels)
            out, state = recurrent.fixed_step(token, state)
        else:
            out, state = recurrent.step_features(token, state, self.num_levels)
        return out.to(q_t.dtype), state

    live_states = staticmethod(recurrent.live_states)

    @property
    def max_length(self) -> int:
        """The longest sequence this module accepts (2^(num_levels - 1) tokens)."""
        return max_length(self.num_levels)

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, feature_map={self.feature_map_name}, num_levels={self.num_levels}, "
            f"chunk_size={self.chunk_size}, decay={self.decay}, num_heads={self.num_heads}"
        )
