"""What a kernel sweep times for one method: the method's own implementations and the peers a user
would pick instead (PyTorch's SDPA softmax; the kernels of other libraries the method declares,
flash-linear-attention's). What each call costs in FLOPs is the method's declaration too.

Each is an ``Implementation``: a name, a ``run(q, k, v, causal)`` on (batch, heads, N, D) inputs, or
the reason it cannot run here. Peers that cannot run are skipped with that reason, never an error.
"""

from __future__ import annotations

import importlib
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


Flops = Callable[[int, int, int, int, bool], tuple[float, float]]  # (batch, heads, n, value_dim, causal)


@dataclass
class Implementation:
    name: str  # "chunk", "sdpa", "fla.chunk_linear_attn", ...
    source: str  # "method" (its own impl) or "peer"
    flops: Flops  # (forward, backward) FLOPs of a call, as the method declares them
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


def declared_flops(module: methods.AttentionMethod, impl: str) -> Flops:
    """The FLOPs ``module`` declares for its implementation ``impl``; (None, None) for a method that
    declares none (its points are timed, and their FLOP rates left empty)."""
    if "flops" not in module.capabilities():
        return lambda b, h, n, e, causal: (None, None)
    return lambda b, h, n, e, causal: (module.forward_flops(b, h, n, e, causal, impl=impl),
                                       module.backward_flops(b, h, n, e, causal, impl=impl))


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
            name=impl, source="method", flops=declared_flops(module, impl),
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
    """The peers named in ``peers`` for this method: PyTorch's SDPA (the reference method's fused
    kernel) unless the method is built on it, and the kernels of other libraries it declares."""
    found = []
    if "sdpa" in peers and "sdpa" not in module.impls:
        reference = methods.build(methods.REFERENCE, head_dim=module.query_key_dim)  # on the same q, k
        found.append(Implementation(name=SDPA, source="peer", flops=declared_flops(reference, "sdpa"), run=sdpa))
    if "fla" in peers:
        found.extend(fla_implementations(module, device))
    return found


def fla_implementations(module: methods.AttentionMethod, device: torch.device) -> list[Implementation]:
    """flash-linear-attention's kernels the method declares (``peer_kernels``), or one skipped entry
    per kernel with the reason. They are counted as the method's own GPU kernels (Triton) are."""
    own = "triton" if "triton" in module.impls else module.cpu_default
    found = []
    for peer in module.peer_kernels():
        name = f"fla.{peer.function}"
        reason, kernel = None, None
        if device.type != "cuda":
            reason = "fla's Triton kernels need a CUDA device"
        elif peer.max_qk_dim is not None and peer.qk_dim > peer.max_qk_dim:
            reason = f"{name} takes q/k dims up to {peer.max_qk_dim}, this module's are {peer.qk_dim}"
        else:
            try:
                kernel = getattr(importlib.import_module(peer.module), peer.function)
            except ImportError as exc:
                reason = f"fla is not importable ({exc}); {FLA_INSTALL}"
            except AttributeError:
                reason = f"{peer.module} has no {peer.function} in the installed fla"
        found.append(Implementation(
            name=name, source="peer", flops=declared_flops(module, own), causal_only=peer.causal_only,
            run=None if reason else partial(_call_peer, peer.call, kernel), skip_reason=reason,
        ))
    return found


def _call_peer(call: Callable, kernel: Callable, q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    return call(kernel, q, k, v)
