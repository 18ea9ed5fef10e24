"""What a kernel sweep times for one method: the method's own implementations and the peers a user
would pick instead (PyTorch's SDPA softmax; flash-linear-attention's kernels for the same method).

Each is an ``Implementation``: a name, a ``run(q, k, v, causal)`` on (batch, heads, N, D) inputs, or
the reason it cannot run here. Peers that cannot run are skipped with that reason, never an error.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

import methods
from methods.base import triton_unusable_reason

Run = Callable[[Tensor, Tensor, Tensor, bool], Tensor]
PEERS = ("sdpa", "fla")
SDPA = "sdpa"  # the reference every crossover is measured against
FLA_INSTALL = "pip install -e '.[gpu]'"


@dataclass
class Implementation:
    name: str  # "chunk", "sdpa", "fla.chunk_linear_attn", ...
    source: str  # "method" (its own impl) or "peer"
    flop_model: str  # which FLOP model counts its work (analysis.FLOP_MODELS)
    run: Run | None = None
    skip_reason: str | None = None  # why it cannot run here at all
    causal_only: bool = False

    def unusable(self, causal: bool) -> str | None:
        """Why this implementation cannot run a point of ``causal``, or None."""
        if self.skip_reason:
            return self.skip_reason
        if self.causal_only and not causal:
            return f"{self.name} has only a causal form"
        return None


def sdpa(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """PyTorch's fused softmax attention; it picks its own backend for the device."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def sdpa_backend(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> str:
    """The backend SDPA dispatches to for these inputs: flash_attention, efficient_attention,
    cudnn_attention or math (on the CPU, flash_attention is its CPU flash kernel)."""
    try:
        from torch.nn.attention import SDPBackend

        # The choice scaled_dot_product_attention itself makes (a private but stable hook).
        return SDPBackend(torch._fused_sdp_choice(q, k, v, None, 0.0, causal)).name.lower()
    except Exception as exc:  # an older or newer torch without it: say so, do not guess
        return f"unknown ({type(exc).__name__})"


def method_implementations(module: methods.AttentionMethod, impls: list[str],
                           device: torch.device) -> list[Implementation]:
    """The method's own implementations among ``impls``, in the method's order, sharing
    ``module``'s parameters."""
    found = []
    for impl in module.impls:
        if impl not in impls:
            continue
        reason = None
        if impl == "triton":
            # Interpreted Triton on the CPU is a correctness tool; its speed means nothing.
            reason = triton_unusable_reason(device) if device.type == "cuda" else (
                "Triton kernels are benchmarked on CUDA only (on the CPU they would run interpreted)")
        found.append(Implementation(
            name=impl, source="method", flop_model=module.name,
            run=None if reason else partial(_call_impl, module, f"_forward_{impl}"), skip_reason=reason,
        ))
    return found


def _call_impl(module: methods.AttentionMethod, forward_name: str,
               q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """``module(q, k, v, causal)`` pinned to one implementation (the checks of ``forward`` included)."""
    module.check_inputs(q, k, v)
    return getattr(module, forward_name)(q, k, v, causal)


def peer_implementations(module: methods.AttentionMethod, peers: list[str],
                         device: torch.device) -> list[Implementation]:
    """The peers named in ``peers`` for this method (SDPA softmax unless the method has it)."""
    found = []
    if "sdpa" in peers and module.name != "softmax":
        found.append(Implementation(name=SDPA, source="peer", flop_model="softmax", run=sdpa))
    if "fla" in peers:
        found.extend(fla_implementations(module, device))
    return found


# -- flash-linear-attention -------------------------------------------------------------------------
# The fla kernels for each method: (module, function, largest q/k dim it takes or None), imported
# when available. Layout there is (batch, N, heads, dim); the feature maps are applied here so the
# work matches the method's. Based's kernels take the raw q, k (the Taylor map is inside them).
FLA_KERNELS = {
    "linear": (("fla.ops.linear_attn", "chunk_linear_attn", None),),
    "favor": (("fla.ops.linear_attn", "chunk_linear_attn", None),),
    "taylor": (("fla.ops.based", "parallel_based", 128), ("fla.ops.based", "fused_chunk_based", 16)),
    "loglinear": (("fla.ops.log_linear_attn", "chunk_log_linear_attn", None),),
}


def fla_implementations(module: methods.AttentionMethod, device: torch.device) -> list[Implementation]:
    """fla's kernels for ``module``'s method, or one skipped entry per kernel with the reason."""
    found = []
    qk_dim = getattr(module, "map_dim", module.head_dim)
    for package, function, max_dim in FLA_KERNELS.get(module.name, ()):
        name = f"fla.{function}"
        reason, kernel = None, None
        if device.type != "cuda":
            reason = "fla's Triton kernels need a CUDA device"
        elif max_dim is not None and qk_dim > max_dim:
            reason = f"{name} takes q/k dims up to {max_dim}, this module's are {qk_dim}"
        else:
            try:
                kernel = getattr(importlib.import_module(package), function)
            except ImportError as exc:
                reason = f"fla is not importable ({exc}); {FLA_INSTALL}"
            except AttributeError:
                reason = f"{package} has no {function} in the installed fla"
        found.append(Implementation(
            name=name, source="peer", flop_model=module.name, causal_only=True,
            run=None if reason else partial(_FLA_CALLS[module.name], kernel, module), skip_reason=reason,
        ))
    return found


def _heads_last(*tensors: Tensor) -> list[Tensor]:
    return [t.transpose(1, 2) for t in tensors]


def _fla_feature_attention(kernel: Callable, module: methods.AttentionMethod,
                           q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """chunk_linear_attn on the method's own (stabilised) features, normalised, no extra scale."""
    phi_q, phi_k, _ = module.features(q, k, causal)
    phi_q, phi_k, v_t = _heads_last(phi_q.to(v.dtype), phi_k.to(v.dtype), v)
    out, _ = kernel(phi_q, phi_k, v_t, scale=1.0, normalize=True)
    return out.transpose(1, 2)


def _fla_based(kernel: Callable, module: methods.AttentionMethod,
               q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """Based's kernels compute 1 + s + s^2/2 with s = q.k * scale: the taylor method's kernel."""
    if module.query_projection is not None:
        q, k = module.query_projection(q), module.key_projection(k)
    q_t, k_t, v_t = _heads_last(q, k, v)
    out = kernel(q_t, k_t, v_t, scale=1.0 / math.sqrt(module.map_dim), use_norm=True)
    return out.transpose(1, 2)


def _fla_loglinear(kernel: Callable, module: methods.AttentionMethod,
                   q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """chunk_log_linear_attn with no decay and the method's level weights; fla shares q and k
    across heads, so heads are folded into the batch. fla does not normalise by a denominator."""
    batch, heads, n, _ = q.shape
    fold = lambda t: t.reshape(batch * heads, n, 1, t.shape[-1])  # noqa: E731
    phi_q = module.feature_map(q, "query").to(v.dtype)
    phi_k = module.feature_map(k, "key").to(v.dtype)
    levels = module.level_weights(q).to(v.dtype)
    gates = torch.zeros(batch * heads, n, 1, device=q.device, dtype=torch.float32)
    out, _ = kernel(fold(phi_q), fold(phi_k), fold(v), gates, fold(levels))
    return out.reshape(batch, heads, n, -1)


_FLA_CALLS = {
    "linear": _fla_feature_attention,
    "favor": _fla_feature_attention,
    "taylor": _fla_based,
    "loglinear": _fla_loglinear,
}
