"""The method contract as a kit: ``check_method(spec_or_class, options=None) -> list[Failure]`` runs
on any method what tests/test_methods.py runs on the registered ones (``attention-suite
check-method SPEC`` prints it, one line per failure):

- the core (methods/base.py): the class attributes every method declares, and its capabilities
  implemented whole;
- the naive definition itself: its output against the float64 attention of its own weights
  (``log_weights``, where declared), its gradients against finite differences, the causal mask and
  the independence of a batch's sequences (all a method with no other path can be checked on);
- every implementation against the naive definition on awkward shapes (one token, N not a multiple
  of the chunk, odd head and value dims, batch > 1, D = 64), causal and not, in float32 and
  bfloat16, the output and the gradients of q, k, v and of every learned parameter;
- where the method is recurrent: stepping, one token at a time, against the causal parallel form,
  and the bytes it declares (``state_bytes``) against those ``prefill_state`` holds;
- where it declares FLOPs: the count of each CPU implementation (naive, chunk) against the matrix
  products torch's counter sees, their scaling with batch and heads, and their growth with N
  against its ``time_in_length``.

Each check is a ``Check`` (what it checks, a ``run`` that raises ContractError or any error when the
method fails it); the tests parametrize over them, so the contract is written here once. This
module imports only torch and ``methods``: an outside package can run it on its method.
"""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

import methods
from methods.base import CAPABILITIES, TIME_IN_LENGTH, AttentionMethod, MethodError, triton_unusable_reason

HEADS = 2  # every case's head count (loglinear's per-head variant is built for it)
# (batch, N, head dim, value dim, chunk): one token; below, at and across a chunk; N not a multiple
# of the chunk; odd head and value dims; batch > 1; the chunk the methods run at (64) at D = 64.
# bfloat16 takes the same paths and only rounds otherwise: one token, an odd shape, D = 64.
SHAPES = [(2, 1, 5, 3, 16), (1, 7, 16, 9, 16), (2, 16, 8, 8, 16), (2, 37, 9, 5, 16), (1, 64, 24, 13, 16),
          (1, 65, 24, 13, 64), (1, 200, 64, 37, 64)]
SHAPES_BY_DTYPE = {torch.float32: SHAPES, torch.bfloat16: [SHAPES[0], SHAPES[3], SHAPES[6]]}
# Triton on the CPU runs under the interpreter, which is slow: small shapes, and the method's defaults
# only (its options change what the kernels are handed, the feature maps run in PyTorch first).
TRITON_SHAPES_BY_DTYPE = {torch.float32: [(2, 1, 5, 3, 16), (1, 19, 9, 8, 16)], torch.bfloat16: [(1, 19, 9, 8, 16)]}
# Float32 paths agree to rounding. bfloat16 inputs: the paths compute in float32 inside, so the
# error is mostly the rounding of the output and of the input gradients (2^-8 relative) and a few
# roundings more. The feature-map core's Triton path in bfloat16 also rounds the features and values
# it multiplies, and the gradients of phi carry v_j - o_i, a difference that amplifies those
# roundings where few keys are seen (tests/test_featuremap_triton.py; 2.5e-2 seen).
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 1.5e-2}
ROUNDED_FEATURES_TOLERANCE = 5e-2
# A learned parameter's gradient sums every position's share, and some shares nearly cancel: there
# float32 rounding is a larger part of the result than in o, dq, dk, dv. Measured on log-linear
# attention with its decay gate (N=64, D=24, E=13, chunk 16, not causal): the float32 naive
# definition's own dgate_bias is 5.0e-4 from the same definition in float64 (the chunked path's
# 3.8e-4), so a bound of 1e-4 against the float32 reference tested rounding, not the path.
PARAMETER_GRADIENT_TOLERANCE = 1e-3
INPUT_NAMES = ("o", "dq", "dk", "dv")
STEP_TOLERANCE = 1e-4
# A gradient that is a difference of nearly equal terms carries float32 rounding far above the
# tolerance relative to its own size: at one token the feature-map core's dq is eps / den^2 times
# terms of order one (o_i = v_1 den / (den + eps)), and with a map that gives a small den (ReLU) the
# float32 naive definition's own dq is 4e-3 from the float64 truth, the chunked path's 1e-3 (measured
# on the relu map of issue 46). There the reference is no sharper than the path, so the bound is set
# from the quantity's own scale: its spread when the reference's inputs move by one float32 ulp,
# measured twice, times ROUNDING_SPREAD. A wrong path is off by far more than its rounding.
ROUNDING_SPREAD = 4
# Where a query sees one key (one token, a window of one) its output is that key's value whatever
# the weights are (up to eps): the gradients of q, k and the weights' parameters vanish there, and
# what is left is rounding. A tensor whose reference vanishes must vanish too.
VANISHING = 1e-5
# Implementations the contract runs on CUDA only, each with why.
CUDA_ONLY = {"flex": "FlexAttention has no backward on the CPU"}
STEP_LENGTHS = (1, 7, 16, 37, 100)  # powers of two and not; loglinear's levels merge at 64
STEP_DIMS = (16, 5)  # head and value dims of the stepping cases
COST_DIM, COST_VALUE_DIM = 16, 7  # an odd value dim on purpose
STATE_LENGTHS, STATE_DTYPES = (1, 5, 64, 100), (torch.float32, torch.bfloat16)
# N = 1 is left out of the FLOP counts: there a product over one key is an elementwise multiply to
# PyTorch, which the counter does not count. Chunks of 16: several, blocks of them, a short last one.
FLOP_LENGTHS = (7, 16, 65, 200)
COUNTED_IMPLS = ("naive", "chunk")  # sdpa is one fused op to the counter, which ignores the causal mask
# How the FLOPs of the default path grow from N = 2048 to 4N for each time_in_length: 16x
# quadratic, 4x linear, and N log N in between, near 4 log 4N / log N = 4.7.
GROWTH: dict[str, Callable[[float], bool]] = {
    "N^2": lambda ratio: math.isclose(ratio, 16.0, rel_tol=0.01),
    "N": lambda ratio: math.isclose(ratio, 4.0, rel_tol=0.01),
    "N log N": lambda ratio: 4.0 * 1.1 < ratio < 4.0 * 1.3,
}
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class ContractError(AssertionError):
    """A method does not do what the contract says (an AssertionError: a failed test in pytest)."""


@dataclass(frozen=True)
class Check:
    """One check of the contract on one method: what it checks (``kind``: core, path, step, state,
    flops), on which implementation and case, and ``run()``, which raises when the method fails it."""

    method: str  # the method's name, with its options when it has any
    kind: str
    impl: str | None
    case: str  # the shape, dtype and causality, or what else sets the case apart
    run: Callable[[], None]

    @property
    def id(self) -> str:
        return "-".join(part for part in (self.method, self.impl, self.case.replace(" ", "-")) if part)


@dataclass(frozen=True)
class Failure:
    """A check the method failed, as one line: the method, impl, case (shape, dtype) and the error."""

    check: Check
    error: str

    def __str__(self) -> str:
        check = self.check
        where = " ".join(part for part in (check.method, check.kind, check.impl, check.case) if part)
        return f"{where}: {self.error}"


def label(cls: type[AttentionMethod], options: Mapping[str, Any]) -> str:
    """The method's name, with its options when it has any: ``taylor(feature_dim=4)``."""
    given = ", ".join(f"{key}={value}" for key, value in options.items())
    name = getattr(cls, "name", cls.__name__)  # a class without one fails the core check, named still
    return f"{name}({given})" if given else name


# -- what the checks share --------------------------------------------------------------------------
def build(cls: type[AttentionMethod], options: Mapping[str, Any], head_dim: int, impl: str = "naive",
          chunk_size: int = 16) -> AttentionMethod:
    """The method with its learned parameters moved off their initial values (so that e.g.
    loglinear's level weights differ per level and hedgehog's biases are not zero). ``chunk_size``,
    where the method has that option, is the case's (its shapes are chosen around it)."""
    chunk = {"chunk_size": chunk_size} if "chunk_size" in cls.method_options else {}
    torch.manual_seed(0)
    module = cls(head_dim=head_dim, impl=impl, **{**options, **chunk})
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(0.5 * torch.randn(parameter.shape, generator=generator))
    return module.eval()


def random_qkv(batch: int, n: int, d: int, e: int, dtype=torch.float32, device=DEVICE) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(n * 1000 + d)
    shapes = [(batch, HEADS, n, d), (batch, HEADS, n, d), (batch, HEADS, n, e)]
    return [torch.randn(shape, generator=generator).to(device, dtype).requires_grad_() for shape in shapes]


def outputs_and_grads(module, q, k, v, causal: bool) -> dict[str, torch.Tensor]:
    """The output and the gradients of a fixed random projection of it w.r.t. q, k, v and every
    learned parameter, by name."""
    out = module(q, k, v, causal=causal)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(out.device, out.dtype)
    named = {"dq": q, "dk": k, "dv": v, **{f"d{name}": p for name, p in module.named_parameters()}}
    return {"o": out, **dict(zip(named, torch.autograd.grad(out, list(named.values()), upstream)))}


def rel_error(ref: torch.Tensor, out: torch.Tensor) -> float:
    """Relative error ||out - ref|| / ||ref|| in float64 (max-norm based, so one bad entry shows)."""
    ref64, out64 = ref.detach().double(), out.detach().double()
    scale = ref64.abs().max().clamp_min(1e-30)
    return float((out64 - ref64).abs().max() / scale)


def assert_close(name: str, ref: torch.Tensor, out: torch.Tensor, tol: float, spread: float = 0.0) -> None:
    """ContractError naming the tensor and its relative error when it exceeds ``tol`` and
    ROUNDING_SPREAD times ``spread`` (the reference's own rounding, relative to its size)."""
    if ref.shape != out.shape:
        raise ContractError(f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    if not torch.isfinite(out).all():
        raise ContractError(f"{name}: non-finite values")
    err = rel_error(ref, out)
    if err > max(tol, ROUNDING_SPREAD * spread):
        beyond = f" (and above {ROUNDING_SPREAD}x the reference's own rounding, {spread:.1e})" if spread > tol else ""
        raise ContractError(f"{name}: relative error {err:.3e} > {tol:.1e}{beyond}")


def compare(reference: Mapping[str, torch.Tensor], fast: Mapping[str, torch.Tensor], tol: float,
            spread: Mapping[str, float] | None = None) -> None:
    """Every named tensor of ``fast`` against ``reference``; ``spread``: each one's rounding in the
    reference (``rounding_spread``), relative to its size."""
    if fast.keys() != reference.keys():
        raise ContractError(f"gradients of {sorted(fast)} where the reference has {sorted(reference)}")
    for name, ref in reference.items():
        ref, out = ref.float(), fast[name].float()
        if ref.abs().max() < VANISHING:
            if not out.abs().max() < VANISHING:
                raise ContractError(f"{name}: {out.abs().max():.1e} where the reference vanishes")
        else:
            assert_close(name, ref, out, tol if name in INPUT_NAMES else max(tol, PARAMETER_GRADIENT_TOLERANCE),
                         (spread or {}).get(name, 0.0))


def rounding_spread(module, inputs: list[torch.Tensor], causal: bool,
                    reference: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """How far each tensor of ``reference`` (the module's outputs and gradients at ``inputs``) moves,
    relative to its size, when every input moves by about one float32 ulp (times -1, 0 or 1 at
    random; two draws): the rounding the reference itself carries."""
    spread = dict.fromkeys(reference, 0.0)
    for seed in (3, 4):
        generator = torch.Generator().manual_seed(seed)
        moved = [(t.detach() * (1 + 2.0**-23 * torch.randint(-1, 2, t.shape, generator=generator).to(t))
                  ).requires_grad_() for t in inputs]
        again = outputs_and_grads(module, *moved, causal)
        for name, ref in reference.items():
            spread[name] = max(spread[name], rel_error(ref.float(), again[name].float()))
    return spread


def held_bytes(state: Any) -> int:
    """The bytes of every tensor of a decoding state (a mapping or a sequence of tensors)."""
    return sum(t.nbytes for t in (state.values() if isinstance(state, Mapping) else state))


def unusable(impl: str) -> str | None:
    """Why the contract cannot run ``impl`` here (CUDA only, or Triton without CUDA or the
    interpreter), or None."""
    if impl in CUDA_ONLY and DEVICE.type != "cuda":
        return f"{impl} runs on CUDA only here: {CUDA_ONLY[impl]}"
    if impl == "triton":
        return triton_unusable_reason(DEVICE)
    return None


def device_for(impl: str) -> torch.device:
    """Triton's and the CUDA-only paths' device: CUDA where there is one (else the interpreter's CPU)."""
    return DEVICE if impl == "triton" or impl in CUDA_ONLY else torch.device("cpu")


def case_name(shape: tuple[int, ...], dtype: torch.dtype, causal: bool | None = None) -> str:
    batch, n, d, e, chunk = shape
    causality = "" if causal is None else " causal" if causal else " full"
    return f"B={batch} N={n} D={d} E={e} chunk={chunk} {str(dtype).removeprefix('torch.')}{causality}"


# -- the core -----------------------------------------------------------------------------------------
def core_errors(cls: type[AttentionMethod]) -> list[str]:
    """What the class lacks of the core every method declares (methods/base.py), one line each;
    and a capability implemented in part (``capabilities``)."""
    found = []
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        found.append("name: not a non-empty string")
    impls = getattr(cls, "impls", None)
    if not isinstance(impls, tuple) or "naive" not in impls:
        found.append(f"impls: {impls!r}; expected a tuple that holds 'naive', the definition the others are "
                     "checked against")
    else:
        found += [f"impls: {impl!r} has no _forward_{impl}" for impl in impls if not hasattr(cls, f"_forward_{impl}")]
        if getattr(cls, "cpu_default", None) not in impls:
            found.append(f"cpu_default: {getattr(cls, 'cpu_default', None)!r} is none of impls {', '.join(impls)}")
    if not isinstance(cls.method_options, dict):
        found.append(f"method_options: {cls.method_options!r}; expected a dict of each option's default")
    if not isinstance(cls.version, int) or isinstance(cls.version, bool) or cls.version < 1:
        found.append(f"version: {cls.version!r}; expected an integer >= 1")
    if cls.time_in_length not in TIME_IN_LENGTH:
        found.append(f"time_in_length: {cls.time_in_length!r}; expected one of {', '.join(TIME_IN_LENGTH)}")
    try:
        cls.capabilities()
    except MethodError as exc:
        found.append(f"capabilities: {exc}")
    return found


def check_core(cls: type[AttentionMethod]) -> None:
    errors = core_errors(cls)
    if errors:
        raise ContractError("; ".join(errors))


# -- the parallel form: every path against the naive definition ------------------------------------
def check_path(cls: type[AttentionMethod], options: Mapping[str, Any], impl: str, shape: tuple[int, ...],
               dtype: torch.dtype, causal: bool) -> None:
    batch, n, d, e, chunk = shape
    device = device_for(impl)
    naive, fast = build(cls, options, d, "naive", chunk).to(device), build(cls, options, d, impl, chunk).to(device)
    q, k, v = random_qkv(batch, n, naive.query_key_dim, e, dtype, device)
    inputs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    reference = outputs_and_grads(naive, *inputs, causal)
    out = outputs_and_grads(fast, q, k, v, causal)
    wrong = {name: t.dtype for name, t in out.items() if name in INPUT_NAMES and t.dtype != dtype}
    if wrong:
        raise ContractError(f"{', '.join(f'{n} in {t}' for n, t in wrong.items())} for {dtype} inputs")
    rounded_features = impl == "triton" and dtype == torch.bfloat16 and isinstance(fast, methods.FeatureMapAttention)
    compare(reference, out, ROUNDED_FEATURES_TOLERANCE if rounded_features else TOLERANCE[dtype],
            rounding_spread(naive, inputs, causal, reference))


def path_checks(cls: type[AttentionMethod], options: Mapping[str, Any] | None = None) -> list[Check]:
    """Every implementation but the naive one against it, on every shape and dtype, causal and not
    (Triton with the method's defaults only); implementations that cannot run here are left out
    (``skipped``)."""
    options = dict(options or {})
    found = []
    for impl in cls.impls:
        if impl == "naive" or unusable(impl) or (impl == "triton" and options):
            continue
        by_dtype = TRITON_SHAPES_BY_DTYPE if impl == "triton" else SHAPES_BY_DTYPE
        found += [Check(label(cls, options), "path", impl, case_name(shape, dtype, causal),
                        lambda impl=impl, shape=shape, dtype=dtype, causal=causal:
                        check_path(cls, options, impl, shape, dtype, causal))
                  for dtype, shapes in by_dtype.items() for shape in shapes for causal in (False, True)]
    return found


# -- the naive definition itself: what can be checked of it without another path -----------------
NAIVE_SHAPE = (2, 6, 4, 3)  # (batch, N, head dim, value dim): small, for finite differences
# Central differences of a float32 output at step h: rounding about ulp |o| sqrt(entries) / h (the
# sum itself in float64), truncation about h^2 times the third derivative; at h = 1e-3 both are near
# 1e-3 of a directional derivative of order one or less. A larger step would cross the kinks of a
# map like ReLU (an all-negative query at 1e-2 of zero turns features on) and measure the jump.
DIFFERENCE_STEP, DIFFERENCE_TOLERANCE, DIFFERENCE_DIRECTIONS = 1e-3, 1e-2, 3
# Rows that a change elsewhere must leave as they are (another sequence of the batch, later tokens
# under the causal mask); not to the bit: a batched product may sum in another order.
INDEPENDENCE_TOLERANCE = 1e-5


def weights_reference(module: AttentionMethod, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      causal: bool = False) -> torch.Tensor:
    """The output in float64 from the method's own weights (``log_weights``, what the fidelity mode
    reads; causal: ``causal_log_weights`` of them): sum_j w_ij v_j / (sum_j w_ij + denominator_eps),
    each row scaled by its largest weight (the eps alike) so that exp stays in range."""
    with torch.no_grad():
        log_w = module.log_weights(q, k)
        log_w = module.causal_log_weights(log_w) if causal else log_w
        shift = log_w.amax(-1, keepdim=True).clamp_min(-1e300)  # a row of zero weights gives 0, never nan
        weights = torch.exp(log_w - shift)
        return weights @ v.double() / (weights.sum(-1, keepdim=True) + module.denominator_eps * torch.exp(-shift))


def check_float64_reference(cls: type[AttentionMethod], options: Mapping[str, Any]) -> None:
    """The naive path's output against the float64 attention of the method's own weights, non-causal
    and causal (its weights with later keys dropped: what the fidelity mode measures of a causal model)."""
    batch, n, d, e = NAIVE_SHAPE
    module = build(cls, options, d)
    q, k, v = (t.detach() for t in random_qkv(batch, n, module.query_key_dim, e, device="cpu"))
    for causal in (False, True):
        with torch.no_grad():
            out = module(q, k, v, causal=causal)
        assert_close("o causal" if causal else "o", weights_reference(module, q, k, v, causal), out,
                     TOLERANCE[torch.float32])


def scalar_output(module: AttentionMethod, tensors: list[torch.Tensor], upstream: torch.Tensor, causal: bool):
    """<upstream, o(q, k, v)> in float64: the scalar whose gradient the checks compare."""
    return (module(*tensors, causal=causal).double() * upstream.double()).sum()


def check_finite_differences(cls: type[AttentionMethod], options: Mapping[str, Any], causal: bool) -> None:
    """The naive path's gradients (q, k, v and every learned parameter) along random directions
    against central differences of its output."""
    batch, n, d, e = NAIVE_SHAPE
    module = build(cls, options, d)
    q, k, v = random_qkv(batch, n, module.query_key_dim, e, device="cpu")
    upstream = torch.randn(batch, HEADS, n, e, generator=torch.Generator().manual_seed(5))
    parameters = list(module.parameters())
    grads = torch.autograd.grad(scalar_output(module, [q, k, v], upstream, causal), [q, k, v, *parameters])
    generator = torch.Generator().manual_seed(6)
    for direction in range(DIFFERENCE_DIRECTIONS):
        steps = [torch.randn(t.shape, generator=generator) for t in (q, k, v, *parameters)]
        along = sum(float((g.double() * u.double()).sum()) for g, u in zip(grads, steps))
        values = []
        with torch.no_grad():
            for sign in (1.0, -1.0):
                moved = [t + sign * DIFFERENCE_STEP * u for t, u in zip((q, k, v), steps)]
                for parameter, u in zip(parameters, steps[3:]):
                    parameter.add_(sign * DIFFERENCE_STEP * u)
                values.append(float(scalar_output(module, moved, upstream, causal)))
                for parameter, u in zip(parameters, steps[3:]):
                    parameter.sub_(sign * DIFFERENCE_STEP * u)
        difference = (values[0] - values[1]) / (2 * DIFFERENCE_STEP)
        if abs(difference - along) > DIFFERENCE_TOLERANCE * max(abs(along), abs(difference), 1.0):
            raise ContractError(f"direction {direction}: the gradients give a directional derivative of {along:.6g}, "
                                f"central differences {difference:.6g}")


def changed(tensors, where: tuple, seed: int) -> list[torch.Tensor]:
    """Copies of ``tensors`` with the entries at index ``where`` drawn anew (three times as large)."""
    generator, copies = torch.Generator().manual_seed(seed), [t.clone() for t in tensors]
    for t in copies:
        t[where] = 3 * torch.randn(t[where].shape, generator=generator)
    return copies


def check_masking(cls: type[AttentionMethod], options: Mapping[str, Any]) -> None:
    """Causal: the outputs before a token do not change when that token and the later ones do."""
    batch, n, d, e = NAIVE_SHAPE
    module = build(cls, options, d)
    q, k, v = (t.detach() for t in random_qkv(batch, n, module.query_key_dim, e, device="cpu"))
    cut = n // 2
    with torch.no_grad():
        before = module(q, k, v, causal=True)
        after = module(*changed((q, k, v), (slice(None), slice(None), slice(cut, None)), 7), causal=True)
    assert_close(f"o of tokens 0..{cut - 1} after changing tokens {cut}..{n - 1}", before[:, :, :cut],
                 after[:, :, :cut], INDEPENDENCE_TOLERANCE)


def check_batch_independence(cls: type[AttentionMethod], options: Mapping[str, Any], causal: bool) -> None:
    """The output of one sequence does not change when another sequence of the batch does."""
    batch, n, d, e = NAIVE_SHAPE
    module = build(cls, options, d)
    q, k, v = (t.detach() for t in random_qkv(batch, n, module.query_key_dim, e, device="cpu"))
    with torch.no_grad():
        before = module(q, k, v, causal=causal)
        after = module(*changed((q, k, v), (slice(1, None),), 8), causal=causal)
    assert_close("o of sequence 0 after changing sequence 1", before[:1], after[:1], INDEPENDENCE_TOLERANCE)


def naive_checks(cls: type[AttentionMethod], options: Mapping[str, Any] | None = None) -> list[Check]:
    """What holds of the naive definition alone, so that a method with no other path is checked
    too: its output against the float64 attention of its own weights (where it declares them),
    its gradients against finite differences, the causal mask, and the independence of the
    sequences of a batch."""
    options = dict(options or {})
    name, (batch, n, d, e) = label(cls, options), NAIVE_SHAPE
    shape = f"B={batch} N={n} D={d} E={e} float32"
    found = []
    if "weights" in cls.capabilities():
        found.append(Check(name, "naive", "naive", f"{shape} full against float64 weights",
                           lambda: check_float64_reference(cls, options)))
    for causal in (False, True):
        kind = "causal" if causal else "full"
        found.append(Check(name, "naive", "naive", f"{shape} {kind} gradients by finite differences",
                           lambda causal=causal: check_finite_differences(cls, options, causal)))
        found.append(Check(name, "naive", "naive", f"{shape} {kind} batch independence",
                           lambda causal=causal: check_batch_independence(cls, options, causal)))
    found.append(Check(name, "naive", "naive", f"{shape} causal masking", lambda: check_masking(cls, options)))
    return found


# -- the recurrent form: stepping is the causal parallel form, one token at a time ------------------
def check_step(cls: type[AttentionMethod], options: Mapping[str, Any], impl: str, n: int) -> None:
    """With each impl, whose step may attend otherwise (softmax's and sliding_window's SDPA)."""
    d, e = STEP_DIMS
    naive, module = build(cls, options, d), build(cls, options, d, impl)
    device = device_for(impl)
    q, k, v = (t.detach() for t in random_qkv(2, n, module.query_key_dim, e, device=device))
    state, outputs = module.to(device).init_state(2, HEADS, module.query_key_dim, e, device=device), []
    for t in range(n):
        o_t, state = module.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        outputs.append(o_t)
    assert_close("o", naive.to(device)(q, k, v, causal=True), torch.stack(outputs, dim=2), STEP_TOLERANCE)


def step_checks(cls: type[AttentionMethod], options: Mapping[str, Any] | None = None) -> list[Check]:
    """Stepping against the causal parallel form with each implementation, where the method is recurrent."""
    options = dict(options or {})
    if "recurrent" not in cls.capabilities():
        return []
    return [Check(label(cls, options), "step", impl, f"N={n} D={STEP_DIMS[0]} E={STEP_DIMS[1]} float32 causal",
                  lambda impl=impl, n=n: check_step(cls, options, impl, n))
            for impl in cls.impls if not unusable(impl) for n in STEP_LENGTHS]


# -- costs: what the harness reads from the method ---------------------------------------------------
def check_state_bytes(cls: type[AttentionMethod], options: Mapping[str, Any], n: int, dtype: torch.dtype) -> None:
    module = build(cls, options, COST_DIM)
    k = torch.randn(2, HEADS, n, module.query_key_dim, dtype=dtype)
    v = torch.randn(2, HEADS, n, COST_VALUE_DIM, dtype=dtype)
    held = held_bytes(module.prefill_state(k, v))
    declared = module.state_bytes(2, HEADS, n, COST_VALUE_DIM, dtype)
    if declared != held:
        raise ContractError(f"state_bytes declares {declared} bytes, prefill_state holds {held}")


def state_checks(cls: type[AttentionMethod], options: Mapping[str, Any] | None = None) -> list[Check]:
    """The declared bytes of the decoding state against those ``prefill_state`` holds, where recurrent."""
    options = dict(options or {})
    if "recurrent" not in cls.capabilities():
        return []
    return [Check(label(cls, options), "state", None,
                  f"B=2 N={n} D={COST_DIM} E={COST_VALUE_DIM} {str(dtype).removeprefix('torch.')}",
                  lambda n=n, dtype=dtype: check_state_bytes(cls, options, n, dtype))
            for n in STATE_LENGTHS for dtype in STATE_DTYPES]


def product_flops(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    """2 m n k of (..., m, k) @ (..., k, n), batched or not."""
    *batch, m, k = a_shape
    return 2 * m * k * b_shape[-1] * (batch[0] if batch else 1)


# torch's counter knows the out-of-place products only; the in-place ones are the same products.
IN_PLACE = {torch.ops.aten.baddbmm_: product_flops, torch.ops.aten.addmm_: product_flops}


def counted_flops(module: AttentionMethod, n: int, causal: bool) -> tuple[int, int]:
    """(forward, backward) FLOPs that torch's counter sees for one call of the module's impl."""
    q, k, v = random_qkv(2, n, module.query_key_dim, COST_VALUE_DIM, device="cpu")
    with FlopCounterMode(display=False, custom_mapping=IN_PLACE) as forward:
        out = module(q, k, v, causal=causal)
    with FlopCounterMode(display=False, custom_mapping=IN_PLACE) as backward:
        out.backward(torch.randn_like(out))
    return forward.get_total_flops(), backward.get_total_flops()


def check_counted_flops(cls: type[AttentionMethod], options: Mapping[str, Any], impl: str, n: int,
                        causal: bool) -> None:
    module = build(cls, options, COST_DIM, impl)
    declared = (module.forward_flops(2, HEADS, n, COST_VALUE_DIM, causal, impl),
                module.backward_flops(2, HEADS, n, COST_VALUE_DIM, causal, impl))
    counted = counted_flops(module, n, causal)
    if not all(math.isclose(c, d, rel_tol=1e-9) for c, d in zip(counted, declared)):
        raise ContractError(f"declares (forward, backward) FLOPs {declared}, torch counts {counted}")


def check_flop_scaling(cls: type[AttentionMethod], options: Mapping[str, Any]) -> None:
    """FLOPs grow with batch and heads, the backward costs more than the forward, every impl has a
    count, the default one is the CPU's choice and an unknown impl is refused."""
    module = build(cls, options, COST_DIM)
    one = module.forward_flops(1, 1, 300, COST_VALUE_DIM, causal=True)
    if not (one > 0 and math.isclose(module.forward_flops(2, 3, 300, COST_VALUE_DIM, causal=True), 6 * one)):
        raise ContractError(f"forward FLOPs {one} at batch 1, head 1 do not scale 6x at batch 2, 3 heads")
    if not module.backward_flops(1, 1, 300, COST_VALUE_DIM, causal=True) > one:
        raise ContractError("backward FLOPs are not above the forward's")
    if module.flop_impl() != module.resolve_impl(torch.device("cpu")):
        raise ContractError(f"FLOPs count {module.flop_impl()} by default, the CPU runs "
                            f"{module.resolve_impl(torch.device('cpu'))}")
    for impl in module.impls:
        if not module.forward_flops(1, 1, 300, COST_VALUE_DIM, True, impl) > 0:
            raise ContractError(f"no forward FLOPs for {impl}")
    try:
        module.forward_flops(1, 1, 300, COST_VALUE_DIM, True, impl="fast")
    except MethodError:
        return
    raise ContractError("forward_flops of an unknown impl 'fast' is not refused")


def check_time_in_length(cls: type[AttentionMethod], options: Mapping[str, Any]) -> None:
    """The default path's FLOPs grow from N = 2048 to 4N as the declared ``time_in_length``."""
    module = cls(head_dim=64, **options)
    ratio = module.forward_flops(1, 1, 8192, 64, True) / module.forward_flops(1, 1, 2048, 64, True)
    if not GROWTH[module.time_in_length](ratio):
        raise ContractError(f"FLOPs grow {ratio:.3g}x from N=2048 to 8192, not as time_in_length "
                            f"{module.time_in_length!r}")


def flop_checks(cls: type[AttentionMethod], options: Mapping[str, Any] | None = None) -> list[Check]:
    """The declared FLOPs against torch's count of each CPU impl, their scaling with batch and heads,
    and their growth with N against ``time_in_length``, where the method declares FLOPs."""
    options = dict(options or {})
    if "flops" not in cls.capabilities():
        return []
    name = label(cls, options)
    found = [Check(name, "flops", impl, f"B=2 N={n} D={COST_DIM} E={COST_VALUE_DIM} {'causal' if causal else 'full'}",
                   lambda impl=impl, n=n, causal=causal: check_counted_flops(cls, options, impl, n, causal))
             for impl in COUNTED_IMPLS if impl in cls.impls for n in FLOP_LENGTHS for causal in (True, False)]
    found.append(Check(name, "flops", None, "scaling with batch and heads",
                       lambda: check_flop_scaling(cls, options)))
    found.append(Check(name, "flops", None, f"growth with N as {cls.time_in_length}",
                       lambda: check_time_in_length(cls, options)))
    return found


# -- the whole contract -------------------------------------------------------------------------------
def checks(cls: type[AttentionMethod], options: Mapping[str, Any] | None = None) -> list[Check]:
    """Every check of the contract on ``cls`` with ``options``: the core first; the rest only when
    the core holds (a method without it cannot be run)."""
    core = Check(label(cls, dict(options or {})), "core", None, "", lambda: check_core(cls))
    if core_errors(cls):
        return [core]
    return [core, *naive_checks(cls, options), *path_checks(cls, options), *step_checks(cls, options),
            *state_checks(cls, options), *flop_checks(cls, options)]


def skipped(cls: type[AttentionMethod]) -> list[str]:
    """The implementations the contract cannot run here, each with why."""
    return [f"{impl}: {reason}" for impl in getattr(cls, "impls", ()) if (reason := unusable(impl))]


def method_class(spec_or_class: str | type[AttentionMethod]) -> type[AttentionMethod]:
    """The class named by a spec (``methods.resolve``: a registered name or ``module:Class``), or the
    class itself; MethodError for anything else."""
    if isinstance(spec_or_class, str):
        return methods.resolve(spec_or_class)
    if isinstance(spec_or_class, type) and issubclass(spec_or_class, AttentionMethod):
        return spec_or_class
    raise MethodError(f"{spec_or_class!r} is neither a method spec nor a subclass of methods.AttentionMethod")


# The longest one check may take (the slowest of the built-in methods' takes a few seconds on a CPU):
# a method that never returns is a failed check, not a hung kit.
CHECK_SECONDS = 120.0


@contextmanager
def time_limit(seconds: float | None):
    """Raise ContractError in the block after ``seconds`` (on the main thread, where signals are
    delivered; elsewhere, and with None, no limit)."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise ContractError(f"did not finish in {seconds:g} s (the kit's limit per check)")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_method(spec_or_class: str | type[AttentionMethod], options: Mapping[str, Any] | None = None,
                 seconds: float | None = CHECK_SECONDS) -> list[Failure]:
    """Run the contract on a method (a registered name, ``module:Class`` or the class) with
    ``options`` (None: its defaults); the checks it failed, each one line (``str(failure)``).

    A spec that names no method, or options the method refuses, raise MethodError: those are
    mistakes in the question, not failures of the method; so does a class that cannot be built at
    all. A check that runs past ``seconds`` fails."""
    cls = method_class(spec_or_class)
    options = dict(options or {})
    if not core_errors(cls):
        try:  # options the method refuses: its own MethodError, before any check
            cls(head_dim=COST_DIM, **options)
        except MethodError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the class raises is said in one line, naming it
            first = (str(exc).strip().splitlines() or [""])[0]
            raise MethodError(f"method class {label(cls, options)} cannot be built (head_dim={COST_DIM}): "
                              f"{type(exc).__name__}: {first}") from None
    failures = []
    for check in checks(cls, options):
        try:
            with time_limit(seconds):
                check.run()
        except Exception as exc:  # noqa: BLE001 - any error of the method is a failure of the check
            text = str(exc).strip().splitlines()
            error = text[0] if text else ""
            failures.append(Failure(check, error if isinstance(exc, ContractError) else
                                    f"{type(exc).__name__}: {error}"))
    return failures


__all__ = ["CAPABILITIES", "Check", "ContractError", "Failure", "check_method", "checks", "skipped"]
