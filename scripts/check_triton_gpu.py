"""Check every Triton implementation against its naive reference on a CUDA GPU.

    python scripts/check_triton_gpu.py            # from the repository root; a few minutes on one GPU
    python scripts/check_triton_gpu.py --smoke    # tiny shapes on the CPU under TRITON_INTERPRET=1

For each method whose class lists "triton" in ``impls``, the naive and the triton module are built
with the same parameters (naive built first, its parameters moved off their initial values so that
learned parts matter, then its state_dict copied), run forward and backward on the same inputs, and
compared: output, input gradients and parameter gradients. Then the shared core
``feature_attention_triton`` is checked directly on bfloat16 and float16 features, the only way to
reach its low-precision products (the methods hand it float32 features).

Errors are max |fast - ref| / max |ref| (tests/utils.py). Tolerances: float32 1e-3 (products are
exact float32; what is left is summation order over up to 4096 terms); bfloat16 5e-2 (8 mantissa
bits, 3.9e-3 per rounding, a few roundings in a row, amplified in the gradients by v_j - o_i where
few keys are seen; as in tests/test_featuremap_triton.py); float16 1e-2 (11 bits; TF32 products).
Exits 1 if any case fails or errors, 0 otherwise, and 0 with a message when there is no CUDA.
Needs only torch, triton and numpy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 5e-2, torch.float16: 1e-2}
DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
# (batch, heads, N, D): one token, an awkward length, the longest, an odd head dim, a wide head.
METHOD_SHAPES = [(2, 3, 1, 64), (2, 4, 1000, 64), (1, 2, 4096, 64), (1, 2, 777, 40), (1, 2, 4096, 128)]
# (batch, heads, N, F, E) for the core op: F and E off the tile sizes as well.
CORE_SHAPES = [(2, 4, 4096, 64, 64), (1, 3, 1000, 266, 100)]
SMOKE_METHOD_SHAPES = [(1, 2, 20, 8)]
SMOKE_CORE_SHAPES = [(1, 2, 20, 12, 20)]
# How far each learned parameter is moved off its initial value (loglinear starts at lambda = 1).
PARAMETER_NUDGE = 0.1


@dataclass
class Case:
    """One comparison: a label, its dtype and form, and what computes its relative errors."""

    label: str
    dtype: torch.dtype
    causal: bool
    shape: tuple
    compute: Callable[[], dict[str, float]]

    @property
    def name(self) -> str:
        return (f"{self.label} {DTYPE_NAMES[self.dtype]} {'causal' if self.causal else 'full'} "
                f"{'x'.join(map(str, self.shape))}")


def triton_methods(only: list[str] | None = None) -> list[str]:
    """The methods with a Triton implementation (or those of ``only``)."""
    import methods

    names = [n for n in methods.available() if "triton" in methods.get(n).impls]
    return [n for n in names if not only or n in only]


def cases(device: str, smoke: bool, names: list[str], quick: bool = False) -> list[Case]:
    """Every case to check on ``device``: each method in float32 and bfloat16, causal and not, on
    every shape; then the shared core on bfloat16 and float16 features. ``quick`` (the dry run of
    scripts/gpu_run.py) keeps one form per dtype."""
    method_shapes, core_shapes = (SMOKE_METHOD_SHAPES, SMOKE_CORE_SHAPES) if smoke else (METHOD_SHAPES, CORE_SHAPES)
    forms = [(torch.float32, True), (torch.bfloat16, False)] if quick else [
        (dtype, causal) for dtype in (torch.float32, torch.bfloat16) for causal in (False, True)]
    found = [Case(name, dtype, causal, shape, partial(check_method, name, dtype, causal, shape, device))
             for name in names for dtype, causal in forms for shape in method_shapes]
    # float32 features are what the methods pass, so they are covered above.
    core_forms = [(torch.bfloat16, True)] if quick else [
        (dtype, causal) for dtype in (torch.bfloat16, torch.float16) for causal in (False, True)]
    for dtype, causal in core_forms:
        for shape in core_shapes if dtype == torch.bfloat16 else core_shapes[-1:]:
            found.append(Case("core", dtype, causal, shape, partial(check_core, dtype, causal, shape, device)))
    return found


def evaluate(case: Case) -> dict:
    """The case's largest errors, its tolerance and verdict, as a row (an exception is a failure)."""
    started = time.perf_counter()
    row = {"case": case.name, "tolerance": TOLERANCE[case.dtype], "errors": {}, "error": None}
    try:
        row["errors"] = case.compute()
    except Exception as error:  # one broken case must not hide the others
        row["error"] = f"{type(error).__name__}: {error}"
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    # NaN compares False: a non-finite error fails.
    row["ok"] = row["error"] is None and max(row["errors"].values()) <= row["tolerance"]
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def format_row(row: dict) -> str:
    """One printed line: the case, its errors on o, dq, dk, dv and the worst parameter gradient."""
    if row["error"]:
        return f"{row['case']:<44} ERROR {row['error']}"
    errors = row["errors"]
    shown = " ".join(f"{k}={v:.1e}" for k, v in errors.items() if k in ("o", "dq", "dk", "dv"))
    extra = {k: v for k, v in errors.items() if k not in ("o", "dq", "dk", "dv")}
    if extra:
        worst = max(extra, key=extra.get)
        shown += f" {worst}={extra[worst]:.1e}"
    verdict = "PASS" if row["ok"] else "FAIL"
    return f"{row['case']:<44} {shown:<58} {row['tolerance']:>7.0e}  {verdict} ({row['seconds']:.1f} s)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU under TRITON_INTERPRET=1")
    parser.add_argument("--methods", nargs="*", help="only these methods (default: all with a triton impl)")
    args = parser.parse_args()

    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels are first imported, below
        device = "cpu"
    else:
        if not torch.cuda.is_available():
            print("no CUDA: nothing to check here (this script runs the Triton kernels on a GPU; "
                  "--smoke runs them interpreted)")
            return 0
        # The point is the compiled kernels; an interpreted run would take hours at these sizes.
        os.environ.pop("TRITON_INTERPRET", None)
        device = "cuda"
        torch.backends.cuda.matmul.allow_tf32 = False  # the references are exact float32

    try:
        import triton
    except ImportError:
        print("triton is not installed: pip install -e '.[gpu]'")
        return 1

    names = triton_methods(args.methods)
    device_name = torch.cuda.get_device_name() if device == "cuda" else "cpu (interpreted)"
    print(f"torch {torch.__version__}, triton {triton.__version__}, {device_name}; methods: {', '.join(names)}")
    print(f"\n{'case':<44} {'largest relative errors':<58} {'tol':>7}  result")
    start = time.perf_counter()
    rows = []
    for case in cases(device, args.smoke, names):
        rows.append(evaluate(case))
        print(format_row(rows[-1]), flush=True)
    failures = sum(not row["ok"] for row in rows)
    print(f"\n{failures} of {len(rows)} cases failed; {time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


def check_method(name: str, dtype: torch.dtype, causal: bool, shape: tuple, device: str) -> dict[str, float]:
    """Errors of the triton module against the naive one: output, input and parameter gradients."""
    import methods

    batch, heads, n, head_dim = shape
    torch.manual_seed(0)
    naive = methods.build(name, head_dim=head_dim, impl="naive")
    with torch.no_grad():
        for parameter in naive.parameters():
            parameter.add_(PARAMETER_NUDGE * torch.randn_like(parameter))
    fast = methods.build(name, head_dim=head_dim, impl="triton")
    fast.load_state_dict(naive.state_dict())
    gen = torch.Generator().manual_seed(1)
    q, k, v, grad_out = (torch.randn(batch, heads, n, head_dim, generator=gen) for _ in range(4))
    inputs = [t.to(device, dtype) for t in (q, k, v)]
    ref = forward_backward(naive.to(device).eval(), inputs, causal, grad_out.to(device))
    out = forward_backward(fast.to(device).eval(), inputs, causal, grad_out.to(device))
    # With one token the output is v whatever the features are (up to eps): the other gradients
    # are rounding noise of an eps-sized value (as in tests/test_featuremap.py).
    keys = ("o", "dv") if n == 1 else ref
    return {key: relative_error(ref[key], out[key]) for key in keys}


def forward_backward(module, inputs, causal: bool, grad_out: torch.Tensor) -> dict[str, torch.Tensor]:
    """The output and every gradient of sum(output * grad_out), by name."""
    q, k, v = (t.detach().clone().requires_grad_() for t in inputs)
    out = module(q, k, v, causal=causal)
    (out.float() * grad_out).sum().backward()
    results = {"o": out, "dq": q.grad, "dk": k.grad, "dv": v.grad}
    results.update({f"d{key}": p.grad for key, p in module.named_parameters() if p.grad is not None})
    return results


def check_core(dtype: torch.dtype, causal: bool, shape: tuple, device: str) -> dict[str, float]:
    """Errors of feature_attention_triton against the naive definition on features of ``dtype``."""
    from methods._featuremap.naive import feature_attention
    from methods._featuremap.triton import feature_attention_triton

    batch, heads, n, features, values = shape
    gen = torch.Generator().manual_seed(2)
    phi_q, phi_k = (torch.rand(batch, heads, n, features, generator=gen) for _ in range(2))
    v, grad_out = (torch.randn(batch, heads, n, values, generator=gen) for _ in range(2))
    leaves = [t.to(device, dtype).requires_grad_() for t in (phi_q, phi_k, v)]
    grad_out = grad_out.to(device)
    results = []
    for attention in (feature_attention, feature_attention_triton):
        out = attention(*leaves, causal=causal)
        grads = torch.autograd.grad((out.float() * grad_out).sum(), leaves)
        results.append(dict(zip(("o", "dq", "dk", "dv"), (out, *grads))))
    ref, fast = results
    return {key: relative_error(ref[key], fast[key]) for key in ref}


def relative_error(ref: torch.Tensor, out: torch.Tensor) -> float:
    """tests/utils.rel_error, with shape and finiteness folded in: a mismatch is an infinite error."""
    from tests.utils import rel_error

    if ref.shape != out.shape or not torch.isfinite(out).all():
        return float("inf")
    return rel_error(ref, out)


if __name__ == "__main__":
    sys.exit(main())
