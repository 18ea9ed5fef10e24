"""The contract every attention method honours (DESIGN.md, "A method").

``module(q, k, v, causal=False)`` takes q, k of shape (batch, heads, N, D) and v of shape
(batch, heads, N, E) and returns (batch, heads, N, E) in the dtype of q. Each method lists the
implementations it has in ``impls``; ``impl="auto"`` picks one for the device of the inputs
(``resolve_impl``, which a method may override: by default Triton on CUDA when the method has it,
else SDPA when it has that, else its ``cpu_default``).

The core every method implements: the forward (``impls``, each a ``_forward_<impl>``, among them
"naive", the definition the others are checked against), its ``method_options``, its ``version``
and its ``time_in_length``. Beyond it, a method opts into capabilities (``CAPABILITIES``) by
implementing their methods: "recurrent" (``init_state`` / ``prefill_state`` / ``step``, the causal
parallel form one token at a time, and ``state_bytes``), "flops" (``head_flops``) and "weights"
(``log_weights``). A mode that needs a capability the method lacks records "not applicable".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

FEATURE_KINDS = ("query", "key")
# What a method may implement beyond the core, each by the methods that make it (all of them: a
# method with a step and no prefill_state has no recurrent form, and is refused as half-done).
CAPABILITIES: dict[str, tuple[str, ...]] = {
    "recurrent": ("init_state", "prefill_state", "step", "state_bytes"),
    "flops": ("head_flops",),
    "weights": ("log_weights",),
}
TIME_IN_LENGTH = ("N^2", "N log N", "N")


@dataclass(frozen=True)
class PeerKernel:
    """Another library's kernel for this method (flash-linear-attention's: the kernel benchmark's
    peers): where it lives, the q/k width it would see and the widest it takes, and ``call(kernel,
    q, k, v)`` on (batch, heads, N, D) inputs returning (batch, heads, N, E), doing the method's math."""

    module: str
    function: str
    call: Callable[..., torch.Tensor]
    qk_dim: int
    max_qk_dim: int | None = None
    causal_only: bool = True


class MethodError(ValueError):
    """A user mistake about a method: wrong name, option, implementation or input shape."""


def triton_unusable_reason(device: torch.device) -> str | None:
    """Why Triton kernels cannot run on ``device`` here, or None when they can."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return "triton is not installed (pip install -e '.[gpu]')"
    if device.type == "cuda":
        return None
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        return None
    return (
        f"Triton kernels need a CUDA device, or TRITON_INTERPRET=1 on the CPU; inputs are on "
        f"{device.type}; use impl=chunk or impl=naive instead"
    )


class AttentionMethod(nn.Module):
    """Base class: checks inputs, resolves ``impl`` and dispatches to ``_forward_<impl>``."""

    name: ClassVar[str]
    #: Implementations this method has, in the order the kernel mode lists them; each ``x`` is ``_forward_x``.
    impls: ClassVar[tuple[str, ...]]
    #: What ``impl="auto"`` picks on the CPU; on CUDA it picks "triton" when the method has one.
    cpu_default: ClassVar[str]
    #: Every option the method takes, with its default; any other option is refused. In this order,
    #: with ``run_defaults`` applied, they are the options of the method's config (``method=<name>``).
    method_options: ClassVar[dict[str, Any]] = {}
    #: The options a run of the suite uses where they differ from the method's own defaults (a comment
    #: says why); the config's defaults are ``method_options`` with these (suite/groups.py).
    run_defaults: ClassVar[dict[str, Any]] = {}
    #: Raised when a change of the method alters what an unchanged config computes: runs of an
    #: earlier version then count as another configuration (their config hash differs).
    version: ClassVar[int] = 1
    #: Added to every denominator sum_j w_ij by the forward; the fidelity mode compares that ratio.
    denominator_eps: ClassVar[float] = 0.0
    #: What the fidelity mode adds about this method's errors (e.g. that it estimates another kernel).
    fidelity_note: ClassVar[str | None] = None
    #: Whether the normaliser sum_j w_ij estimates softmax's sum_j exp(q.k/sqrt(D)); False where it has a
    #: scale of its own (the board then shows no denominator error of it among the estimates).
    denominator_estimates_softmax: ClassVar[bool] = True
    #: The paper the method comes from, for the board: {"authors", "year", "title", "url"} as literals
    #: (the site reads them from the source, never importing the method: suite/site/known.py).
    paper: ClassVar[dict[str, Any] | None] = None
    #: How the time of the parallel form grows with the sequence length N: "N^2" (exact attention
    #: over the whole context), "N log N" or "N" (the substitutes). The board names the best
    #: sub-quadratic method of each point from it.
    time_in_length: ClassVar[str] = "N"

    def __init__(self, head_dim: int, impl: str = "auto", **options: Any) -> None:
        super().__init__()
        unknown = sorted(set(options) - set(self.method_options))
        if unknown:
            valid = ", ".join(sorted(self.method_options)) or "none"
            raise MethodError(f"{self.name}: unknown option(s) {', '.join(unknown)}; valid options: {valid}")
        self.options = {**self.method_options, **options}
        if not isinstance(head_dim, int) or isinstance(head_dim, bool) or head_dim <= 0:
            raise MethodError(f"head_dim must be a positive integer, got {head_dim!r}")
        valid = ("auto", *self.impls)
        if impl not in valid:
            raise MethodError(
                f"unknown impl {impl!r} for method {self.name!r}; valid: {', '.join(valid)}"
            )
        self.head_dim = head_dim
        self.impl = impl

    def int_option(self, name: str, minimum: int = 1) -> int:
        """Option ``name`` when it is an integer >= ``minimum``; a clear MethodError otherwise."""
        value = self.options[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise MethodError(f"{self.name}: option {name} must be an integer >= {minimum}, got {value!r}")
        return value

    def bool_option(self, name: str) -> bool:
        """Option ``name`` when it is true or false; a clear MethodError otherwise."""
        value = self.options[name]
        if not isinstance(value, bool):
            raise MethodError(f"{self.name}: option {name} must be true or false, got {value!r}")
        return value

    def check_kind(self, kind: str) -> None:
        """One clear error for a feature ``kind`` other than "query" or "key"."""
        if kind not in FEATURE_KINDS:
            raise MethodError(f"{self.name}: feature kind must be one of {', '.join(FEATURE_KINDS)}, got {kind!r}")

    # -- implementation choice ---------------------------------------------------------------
    def resolve_impl(self, device: torch.device) -> str:
        """The implementation that ``forward`` runs for inputs on ``device``."""
        if self.impl == "auto":
            if "triton" in self.impls and device.type == "cuda" and not triton_unusable_reason(device):
                return "triton"
            if "sdpa" in self.impls:
                return "sdpa"
            return self.cpu_default
        if self.impl == "triton":
            reason = triton_unusable_reason(device)
            if reason:
                raise MethodError(f"impl=triton for method {self.name!r}: {reason}")
        return self.impl

    # -- the parallel form -------------------------------------------------------------------
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
        self.check_inputs(q, k, v)
        impl = self.resolve_impl(q.device)
        return getattr(self, f"_forward_{impl}")(q, k, v, causal)

    def check_inputs(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """One clear error for any shape or dtype the contract does not allow."""
        for label, t in (("q", q), ("k", k), ("v", v)):
            if t.dim() != 4:
                raise MethodError(
                    f"{self.name}: {label} must have shape (batch, heads, N, dim), got {tuple(t.shape)}"
                )
        if q.shape != k.shape:
            raise MethodError(f"{self.name}: q and k shapes differ: {tuple(q.shape)} vs {tuple(k.shape)}")
        if v.shape[:3] != q.shape[:3]:
            raise MethodError(
                f"{self.name}: v must share (batch, heads, N) with q: {tuple(v.shape)} vs {tuple(q.shape)}"
            )
        if q.shape[-1] != self.query_key_dim:
            raise MethodError(
                f"{self.name}: built for queries and keys of width {self.query_key_dim}, got D={q.shape[-1]}"
            )
        if q.shape[2] == 0:
            raise MethodError(f"{self.name}: sequence length must be at least 1")
        if not (q.dtype == k.dtype == v.dtype):
            raise MethodError(f"{self.name}: q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")

    # -- what the harness measures about a method, declared here (suite/ never names a method) --
    @classmethod
    def query_key_width(cls, head_dim: int, options: dict[str, Any]) -> int:
        """The width of the queries and keys the method reads (values keep ``head_dim``), known
        before it is built. A model projects its hidden state once, straight to this width, as
        Based does for its Taylor map: a method that wants narrower q and k than its head says so
        here instead of projecting again on top of the model's projection (a second learned
        projection in series trains far worse on recall: docs/peer_check.md). By default the
        head's width."""
        return head_dim

    @property
    def query_key_dim(self) -> int:
        """``query_key_width`` of this module: what ``forward`` checks q and k against."""
        return self.query_key_width(self.head_dim, self.options)

    def resolved_options(self) -> dict[str, Any]:
        """The options as this module uses them: nulls resolved (e.g. favor's feature count), plus
        the sizes they imply (e.g. ``num_features``); what a record's ``method.resolved`` holds."""
        return dict(self.options)

    def flop_impl(self, impl: str | None = None) -> str:
        """The implementation a FLOP count is for: ``impl``, or with None this module's own
        (``impl="auto"``: the one it runs on the CPU)."""
        chosen = self.impl if impl is None else impl
        if chosen == "auto":
            chosen = "sdpa" if "sdpa" in self.impls else self.cpu_default
        if chosen not in self.impls:
            raise MethodError(f"{self.name}: no implementation {chosen!r} to count; valid: {', '.join(self.impls)}")
        return chosen

    def head_flops(self, n: int, value_dim: int, causal: bool, impl: str) -> tuple[float, float]:
        """(forward, backward) floating-point operations of ``impl`` for one (batch, head) pair;
        each method documents its model (the matrix products as computed, see
        methods/_featuremap/flops.py)."""
        raise NotImplementedError

    def forward_flops(self, batch: int, heads: int, n: int, value_dim: int, causal: bool,
                      impl: str | None = None) -> float:
        """Floating-point operations of one forward of ``impl`` (default: this module's) on
        (batch, heads, n) inputs with ``value_dim`` values, counted as computed (``head_flops``)."""
        return batch * heads * self.head_flops(n, value_dim, causal, self.flop_impl(impl))[0]

    def backward_flops(self, batch: int, heads: int, n: int, value_dim: int, causal: bool,
                       impl: str | None = None) -> float:
        """Floating-point operations of the backward of that forward (input and parameter gradients)."""
        return batch * heads * self.head_flops(n, value_dim, causal, self.flop_impl(impl))[1]

    def log_weights(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """log w_ij, the weight the method gives key j for query i when every query sees every key
        (non-causal): q (B,H,Q,D) the queries at ``positions`` (Q,) of the sequence (None: 0..Q-1),
        k (B,H,N,D) -> float64 (B,H,Q,N), -inf where a weight is 0, as the
        method computes the weights (its float32 feature maps, its level weights). The output is
        sum_j w_ij v_j / (sum_j w_ij + denominator_eps). What the fidelity mode compares with exact
        softmax attention; a method without per-pair weights cannot be compared."""
        raise MethodError(f"{self.name} declares no attention weights (log_weights), so it has no fidelity to measure")

    @staticmethod
    def causal_log_weights(log_w: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """The causal weights from ``log_weights``' non-causal ones (..., Q, N): key j of query i
        (at ``positions``, None: 0..Q-1) dropped (-inf) where j is after i. A method's causal
        forward attends with exactly these (the contract kit checks it)."""
        rows = torch.arange(log_w.shape[-2], device=log_w.device) if positions is None else positions.to(log_w.device)
        later = torch.arange(log_w.shape[-1], device=log_w.device)[None, :] > rows[:, None]
        return log_w.masked_fill(later, float("-inf"))

    @classmethod
    def capabilities(cls) -> frozenset[str]:
        """The capabilities (``CAPABILITIES``) the class implements: those whose methods it
        overrides. Overriding some of a capability's methods but not all is a MethodError naming
        what is missing."""
        found = set()
        for capability, names in CAPABILITIES.items():
            done = [n for n in names if getattr(cls, n) is not getattr(AttentionMethod, n)]
            if done and len(done) < len(names):
                missing = [n for n in names if n not in done]
                raise MethodError(f"{cls.name}: implements {', '.join(done)} of the {capability} capability but not "
                                  f"{', '.join(missing)}; implement all of {', '.join(names)}, or none")
            if done:
                found.add(capability)
        return frozenset(found)

    @classmethod
    def fidelity_variants(cls, feature_counts: list[int]) -> list[dict[str, Any]]:
        """Option overrides, one per feature map the fidelity mode measures, given its grid of
        feature counts: by default the method's own map, once."""
        return [{}]

    def attention_fit_parameters(self) -> list[nn.Parameter]:
        """The parameters the fidelity mode may fit to exact softmax attention on captured q, k
        (attention distillation: minimise the cross-entropy between softmax's attention rows and
        the method's normalised weights, ``log_weights``, on some queries, then measure on the
        others). None by default: the method is measured as it is built."""
        return []

    @classmethod
    def fits_attention(cls) -> bool:
        """Whether the method declares parameters to fit to softmax attention (``attention_fit_parameters``)."""
        return cls.attention_fit_parameters is not AttentionMethod.attention_fit_parameters

    def live_states(self, state: Any) -> int | None:
        """How many of the decoding state's parts hold a sum (loglinear: occupied Fenwick levels);
        None when the state has no such parts."""
        return None

    def peer_kernels(self) -> tuple[PeerKernel, ...]:
        """Kernels of other libraries that compute this method, for the kernel benchmark to time
        beside its own implementations (none by default)."""
        return ()

    def state_bytes(self, batch: int, heads: int, n: int, value_dim: int, dtype: torch.dtype = torch.float32) -> int:
        """Bytes of the decoding state after n tokens of (batch, heads) sequences with ``value_dim``
        values in ``dtype``: the bytes of every tensor ``prefill_state`` returns."""
        raise NotImplementedError

    # -- the recurrent form ------------------------------------------------------------------
    def init_state(
        self,
        batch: int,
        heads: int,
        head_dim: int,
        value_dim: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> Any:
        """The empty decoding state for a batch of sequences."""
        raise NotImplementedError

    def prefill_state(self, k: torch.Tensor, v: torch.Tensor) -> Any:
        """The decoding state after a prompt k (batch, heads, N, D), v (batch, heads, N, E), built in
        parallel: the state that N calls of ``step`` reach, up to float rounding."""
        raise NotImplementedError

    def step(self, q_t: torch.Tensor, k_t: torch.Tensor, v_t: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        """One decoding step: q_t, k_t (batch, heads, D), v_t (batch, heads, E) -> (o_t, new state)."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, impl={self.impl}"
