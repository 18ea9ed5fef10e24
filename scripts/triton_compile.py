"""Every Triton kernel the suite can launch, compiled for the GPUs it targets on a CPU: no device, no driver.

    python scripts/triton_compile.py                 # the representative subset; exits 1 on any finding
    python scripts/triton_compile.py --full          # every variant, every target (minutes)
    python scripts/triton_compile.py --json out.json # the rows as JSON too
    python scripts/triton_compile.py --core 1,1,4096,256,256 --dtype float32 --block-size 256   # one core call

What is compiled is what the launch code launches. Each method's Triton path (``_forward_triton`` and its
backward) runs on meta tensors, which have shapes and dtypes but no data, with ``JITFunction.run`` replaced
by a recorder; the shared core ``feature_attention_triton`` is called the same way. The shapes come from
the configs: every experiment preset with every value its sweep takes (its methods, or every method with
a Triton path when it names none), the paper budget, every grid of ``mode=kernel`` and of
scripts/gpu_kernel_bench.py, and scripts/check_triton_gpu.py's shapes; each in float32, bfloat16 and
float16, causal and not. A new kernel, tile choice or preset is covered by being written.

Each recorded launch is specialised by Triton's own binder for the target, as a launch on that GPU would
be (argument types, divisibility by 16, constexprs, num_warps and num_stages), and compiled with
``triton.compile``. Shared memory is the compiled kernel's ``metadata.shared`` (what the launch asks the
driver for); registers and spills are what ``ptxas -v`` (the one the triton wheel ships) reports for its
PTX. A variant passes when it compiles, fits the target's shared memory per block, spills nothing and its
registers times threads fit the register file (what the driver checks at launch, or what costs speed).
A spill that only Triton's ptxas flag --regAllocOptLevel=2 makes (none without it) is accepted, and
its row says so.

Run it with TRITON_INTERPRET unset: the interpreter replaces the kernels it would compile.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import importlib.util
import itertools
import json
import os
import pkgutil
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402


@dataclass(frozen=True)
class Target:
    """A GPU generation: compute capability, the devices, the opt-in shared memory a block may use.

    The limits are the CUDA C++ Programming Guide's "maximum amount of shared memory per thread block"
    (Technical Specifications per Compute Capability): 163 KB on 8.0, 227 KB on 9.0 and 10.0; Triton
    compares ``metadata.shared`` with the device's CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
    which reads 166,912 and 232,448 bytes on these devices.
    """

    capability: int
    devices: str
    shared_limit: int

    @property
    def name(self) -> str:
        return f"sm_{self.capability}"


TARGETS = (Target(80, "A100", 166_912), Target(90, "H100, H200", 232_448), Target(100, "B200", 232_448))
# 64K 32-bit registers per block on all three (and 255 per thread, which ptxas enforces itself).
REGISTERS_PER_BLOCK = 65_536
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Keys of a preset's sweep that change no launch: seeds and training settings.
SWEEP_KEYS_WITHOUT_SHAPES = re.compile(r"^(seed|budget\..*)$")
# The representative subset: per kernel and input dtype, its heaviest variant on these targets.
SUBSET_TARGETS = (80, 90)


# -- what the launch code launches ---------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    """One way the suite calls a Triton path: a method (or "core") at a shape, dtype and form."""

    method: str
    options: tuple  # sorted (key, value) pairs of the method's options
    heads: int
    length: int
    head_dim: int
    value_dim: int
    dtype: str
    causal: bool

    def describe(self) -> str:
        form = "causal" if self.causal else "full"
        return f"{self.method} h{self.heads} N{self.length} d{self.head_dim}/{self.value_dim} {self.dtype} {form}"


@dataclass
class Launch:
    """A kernel launch as the launch code made it: the kernel and its arguments."""

    kernel: object  # triton JITFunction
    args: tuple
    kwargs: dict


@contextlib.contextmanager
def recording() -> Iterator[list[Launch]]:
    """Launches are recorded instead of run, and Triton paths accept tensors off CUDA (meta tensors)."""
    from triton.runtime.jit import JITFunction


    launches: list[Launch] = []

    def record(self, *args, grid, warmup, **kwargs):
        launches.append(Launch(self, args, kwargs))

    patched = [(JITFunction, "run", record)]
    for name, module in list(sys.modules.items()):
        if name.startswith("methods") and getattr(module, "triton_unusable_reason", None) is not None:
            patched.append((module, "triton_unusable_reason", lambda device: None))
    saved = [(owner, attribute, getattr(owner, attribute)) for owner, attribute, _ in patched]
    for owner, attribute, value in patched:
        setattr(owner, attribute, value)
    try:
        yield launches
    finally:
        for owner, attribute, value in saved:
            setattr(owner, attribute, value)


@functools.cache
def meta_module(name: str, head_dim: int, options: tuple) -> torch.nn.Module:
    """The method as the suite builds it, moved to the meta device; built once (FAVOR+'s and Hedgehog's
    orthogonal draws take most of the time a call costs)."""
    import methods

    return methods.build(name, head_dim=head_dim, impl="triton", **dict(options)).to("meta")


def drive(call: Call, block_size: int | None = None) -> list[Launch]:
    """The launches of ``call``'s forward and backward, run on meta tensors."""
    from methods._featuremap import triton as featuremap_triton  # noqa: F401  (patched by recording)
    from methods.loglinear import triton as loglinear_triton  # noqa: F401

    dtype = DTYPES[call.dtype]
    shape = (1, call.heads, call.length)
    with recording() as launches:
        if call.method == "core":
            from methods._featuremap.triton import feature_attention_triton

            phi_q, phi_k = (torch.empty(*shape, call.head_dim, device="meta", dtype=dtype, requires_grad=True)
                            for _ in range(2))
            v = torch.empty(*shape, call.value_dim, device="meta", dtype=dtype, requires_grad=True)
            extra = {} if block_size is None else {"block_size": block_size}
            out = feature_attention_triton(phi_q, phi_k, v, causal=call.causal, **extra)
        else:
            module = meta_module(call.method, call.head_dim, call.options)
            q, k = (torch.empty(*shape, module.query_key_dim, device="meta", dtype=dtype, requires_grad=True)
                    for _ in range(2))  # at the width the method reads (Taylor: its feature_dim)
            v = torch.empty(*shape, call.value_dim, device="meta", dtype=dtype, requires_grad=True)
            out = module._forward_triton(q, k, v, call.causal)
        out.float().sum().backward()
    return launches


def triton_methods() -> list[str]:
    import methods

    return [name for name in methods.available() if "triton" in methods.get(name).impls]


# -- the calls the configs make --------------------------------------------------------------------------

def _compose(overrides: list[str], hydra: bool = False) -> dict:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from suite.groups import store

    store()  # the method group is made from the classes
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["data_dir=/nowhere", *overrides], return_hydra_config=hydra)
    if hydra:
        params = cfg.hydra.sweeper.params
        return OmegaConf.to_container(params, resolve=False) if params else {}
    return OmegaConf.to_container(cfg, resolve=True)


def preset_jobs(preset: str) -> list[list[str]]:
    """The overrides of every job of a preset's sweep that can change a launch, one method each.

    Swept methods are the preset's own; a preset that sweeps none runs with any method, so it gets
    every method with a Triton path (the boards' jobs: board_jobs)."""
    swept = {key: str(values).split(",") for key, values in _compose([preset], hydra=True).items()
             if not SWEEP_KEYS_WITHOUT_SHAPES.match(key)}
    with_triton = triton_methods()
    if "method" in swept:
        swept["method"] = [m for m in swept["method"] if m in with_triton]
    else:
        swept["method"] = with_triton
    keys = list(swept)
    return [[preset, *(f"{key}={value}" for key, value in zip(keys, values))]
            for values in itertools.product(*(swept[key] for key in keys))]


def board_jobs() -> list[list[str]]:
    """The overrides of every job the boards (suite/boards/) run with a method that has a Triton
    path, the seeds left out (they change no launch)."""
    import methods
    from suite import board

    with_triton = {f"method={name}" for name in triton_methods()}
    found = {}
    for name in board.names():
        for multirun in board.stages(board.load(name), methods.available()):
            for job in (j for j in board.jobs(multirun) if with_triton & set(j)):
                found[tuple(o for o in job if not o.startswith("seed="))] = None
    return [list(job) for job in found]


def model_calls(overrides: list[str]) -> list[Call]:
    """The attention calls of the model ``overrides`` compose: its method at the task's length and the
    model's heads (suite/model.py: d_model // num_heads per head), in every dtype and form."""
    config = _compose(overrides)
    method = config["method"]
    if method["name"] not in triton_methods():
        return []
    model = config["model"]
    heads, head_dim = model["num_heads"], model["d_model"] // model["num_heads"]
    options = tuple(sorted(method["options"].items()))
    return [Call(method["name"], options, heads, config["task"]["seq_len"], head_dim, head_dim, dtype, causal)
            for dtype in DTYPES for causal in (False, True)]


def kernel_grid_calls() -> list[Call]:
    """mode=kernel's grids (conf/mode/kernel.yaml and scripts/gpu_kernel_bench.py's own) for every
    method with a Triton path, in every dtype as well as the grid's own."""
    sys.path.insert(0, str(REPO / "scripts"))
    import gpu_kernel_bench

    calls = []
    for name in triton_methods():
        options = tuple(sorted(_compose([f"method={name}", "mode=kernel"])["method"]["options"].items()))
        for grid in gpu_kernel_bench.grids().values():
            for n, head_dim, dtype, causal in itertools.product(grid["lengths"], grid["head_dims"], DTYPES,
                                                               (False, True)):
                calls.append(Call(name, options, grid["heads"], n, head_dim, grid["value_dim"] or head_dim,
                                  dtype, causal))
    return calls


def check_script_calls(forms: tuple[bool, ...] = (False, True)) -> list[Call]:
    """scripts/check_triton_gpu.py's shapes: each method at its default options and at every value of
    the options its Triton module lists in CHECKED_OPTIONS (the entries of its launch table), and the
    core; causal or not as ``forms`` say."""
    sys.path.insert(0, str(REPO / "scripts"))
    import check_triton_gpu

    calls = []
    for name in triton_methods():
        variations = [()] + [((option, value),) for option, values in checked_options(name).items()
                             for value in values]
        calls += [Call(name, options, heads, n, d, d, dtype, causal) for options in variations
                  for _, heads, n, d in check_triton_gpu.METHOD_SHAPES for dtype in DTYPES for causal in forms]
    calls += [Call("core", (), heads, n, f, e, dtype, causal) for _, heads, n, f, e in check_triton_gpu.CORE_SHAPES
              for dtype in DTYPES for causal in forms]
    return calls


def checked_options(name: str) -> dict:
    """CHECKED_OPTIONS of the method's own Triton module (methods/<package>/triton.py), if it has one."""
    import methods

    module = methods.get(name).__module__.rsplit(".", 1)[0] + ".triton"
    if importlib.util.find_spec(module) is None:
        return {}
    return getattr(importlib.import_module(module), "CHECKED_OPTIONS", {})


def config_calls(quick: bool) -> list[Call]:
    """Every call the configs make; ``quick``: the check script's causal calls only (their shapes hold
    the kernel grids' head sizes, an odd one, one token and the longest length; the causal form
    launches every kernel with the most flags set), for the representative subset."""
    calls = check_script_calls((True,) if quick else (False, True))
    if not quick:
        calls += kernel_grid_calls()
        presets = [f"experiment={p.stem}" for p in sorted((REPO / "conf" / "experiment").glob("*.yaml"))]
        jobs = [job for preset in presets for job in preset_jobs(preset)] + board_jobs()
        jobs += [["budget=paper", f"method={name}"] for name in triton_methods()]
        calls += [call for job in jobs for call in model_calls(job)]
    return list(dict.fromkeys(calls))


# -- one compile per distinct specialisation ---------------------------------------------------------------

@dataclass
class Variant:
    """A kernel specialised as its launches on ``target`` would be, and the calls that launch it."""

    kernel: object
    target: Target
    signature: dict
    constexprs: dict
    attrs: dict
    options: object  # the backend's CUDAOptions
    calls: list[str] = field(default_factory=list)

    @property
    def kernel_name(self) -> str:
        return self.kernel.__name__

    def configuration(self) -> str:
        """What varies between variants of one kernel: pointer dtypes, constexprs, divisibility, warps."""
        names = list(self.signature)
        pointers = sorted({t for t in self.signature.values() if t.startswith("*")})
        values = {names[path[0]]: _short(value) for path, value in self.constexprs.items()}
        divisible = [names[path[0]] for path, attr in self.attrs.items()
                     if attr and not self.signature[names[path[0]]].startswith("*")]
        parts = [",".join(pointers), " ".join(f"{k}={v}" for k, v in values.items())]
        if divisible:
            parts.append(f"div16={','.join(divisible)}")
        parts.append(f"warps={self.options.num_warps} stages={self.options.num_stages}")
        return "; ".join(parts)

    def key(self) -> tuple:
        return (self.kernel_name, self.target.capability, self.configuration())


def _short(value) -> str:
    name = getattr(value, "name", None)  # a tl.dtype
    return name if isinstance(name, str) else str(value)


@functools.cache
def _binder(fn, capability: int) -> tuple:
    """The backend of ``capability`` and ``fn``'s argument binder for it, as JITFunction.create_binder."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    backend = make_backend(GPUTarget("cuda", capability, 32))
    return backend, create_function_from_signature(fn.signature, fn.params, backend)


def specialise(launch: Launch, target: Target) -> Variant:
    """The launch as Triton's own binder specialises it for ``target`` (triton/runtime/jit.py's run)."""
    from triton import knobs

    fn = launch.kernel
    backend, binder = _binder(fn, target.capability)
    kwargs = dict(launch.kwargs)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    bound, specialization, options = binder(*launch.args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    return Variant(fn, target, signature, constexprs, attrs, options)


def variants(calls: list[Call], targets: tuple[Target, ...], block_size: int | None = None,
             kernels: list[str] | None = None) -> list[Variant]:
    """The distinct variants the calls launch (of ``kernels`` only, when given), on each target, each
    with the calls that launch it; ``block_size`` goes to the core (``drive``)."""
    found: dict[tuple, Variant] = {}
    for call in calls:
        for launch in drive(call, block_size):
            if kernels and launch.kernel.__name__ not in kernels:
                continue
            for target in targets:
                variant = specialise(launch, target)
                variant = found.setdefault(variant.key(), variant)
                if call.describe() not in variant.calls:
                    variant.calls.append(call.describe())
    return list(found.values())


def subset(found: list[Variant]) -> list[Variant]:
    """Per kernel and input dtype (its pointer types), the variant with the largest tiles, then the most
    flags set, on each of SUBSET_TARGETS: the ones nearest the limits."""
    def weight(v: Variant) -> tuple:
        values = list(v.constexprs.values())
        tiles = 1
        for value in values:
            if isinstance(value, int) and not isinstance(value, bool):
                tiles *= value
        return tiles, sum(value is True for value in values), v.configuration()

    best: dict[tuple, Variant] = {}
    for v in found:
        if v.target.capability not in SUBSET_TARGETS:
            continue
        pointers = tuple(sorted({t for t in v.signature.values() if t.startswith("*")}))
        group = (v.kernel_name, v.target.capability, pointers)
        if group not in best or weight(v) > weight(best[group]):
            best[group] = v
    return list(best.values())


# -- compiling and reading what it needs -----------------------------------------------------------------

@dataclass
class Result:
    """What one variant needs on its target; ``problems`` is empty when it can be launched as it is."""

    kernel: str
    target: str
    configuration: str
    calls: list[str]
    compiled: bool
    error: str | None = None
    shared: int | None = None
    shared_limit: int | None = None
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    threads: int | None = None
    spills_without_flag: int | None = None  # spill bytes without TRITON_PTXAS_FLAG, where it spills
    problems: list[str] = field(default_factory=list)
    accepted: str | None = None  # why a spill does not count as a problem


def compile_variant(variant: Variant) -> Result:
    """Compile ``variant`` (Triton's cache makes a repeat cheap) and check it against its target."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = variant.target
    result = Result(variant.kernel_name, target.name, variant.configuration(), variant.calls, compiled=False,
                    shared_limit=target.shared_limit)
    source = ASTSource(variant.kernel, variant.signature, variant.constexprs, variant.attrs)
    try:
        kernel = triton.compile(source, target=GPUTarget("cuda", target.capability, 32),
                                options=variant.options.__dict__)
    except Exception as error:  # a kernel that does not compile is a finding, not a crash
        result.error = f"{type(error).__name__}: {str(error).strip().splitlines()[-1] if str(error).strip() else ''}"
        result.problems.append(f"does not compile ({result.error})")
        return result
    result.compiled = True
    result.shared = kernel.metadata.shared
    result.threads = kernel.metadata.num_warps * 32
    usage = ptxas_usage(kernel, target)
    result.registers, result.spill_stores, result.spill_loads = (
        usage["registers"], usage["spill_stores"], usage["spill_loads"])
    result.spills_without_flag = usage.get("spills_without_flag")
    result.problems = problems(result)
    return result


def problems(result: Result) -> list[str]:
    """What would stop or slow a launch: too much shared memory, too many registers, spills (but for
    those of TRITON_PTXAS_FLAG's artefact, which go to ``result.accepted``)."""
    found = []
    if result.shared > result.shared_limit:
        found.append(f"needs {result.shared:,} B of shared memory, more than the {result.shared_limit:,} B "
                     f"a block gets on {result.target}")
    if result.registers * result.threads > REGISTERS_PER_BLOCK:
        found.append(f"{result.registers} registers x {result.threads} threads exceed the "
                     f"{REGISTERS_PER_BLOCK:,} of a block")
    if result.spill_stores or result.spill_loads:
        spilled = f"spills {result.spill_stores} B stored, {result.spill_loads} B loaded"
        if result.spills_without_flag == 0:
            result.accepted = (f"{spilled} at {result.registers} registers, none without ptxas "
                               f"{TRITON_PTXAS_FLAG}: the flag's artefact, not register pressure")
        else:
            found.append(spilled)
    return found


PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")
PTXAS_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


# Triton 3.9 adds this to every ptxas call ("work around ptxas 13.x bug"). With it the allocator
# sometimes spills a few bytes at register counts far below the limit, where the same PTX assembled
# without it spills nothing: an artefact of the flag, not register pressure, and accepted as such.
TRITON_PTXAS_FLAG = "--regAllocOptLevel=2"


def ptxas_usage(kernel, target: Target) -> dict:
    """Registers and spill bytes from ``ptxas -v`` on the kernel's PTX, with the flags Triton's own
    ptxas call uses (triton/backends/nvidia/compiler.py's make_cubin), and where that spills, the spill
    bytes without TRITON_PTXAS_FLAG too (``spills_without_flag``). Kept beside the kernel in Triton's
    cache, keyed by the kernel's hash, so a warm run does not assemble again."""
    from triton.runtime.cache import get_cache_manager

    cache = get_cache_manager(kernel.hash)
    name = f"{kernel.metadata.name}.ptxas-v1.json"
    cached = cache.get_file(name)
    if cached:
        return json.loads(Path(cached).read_text())
    with tempfile.TemporaryDirectory() as work:
        ptx = Path(work) / "kernel.ptx"
        ptx.write_text(kernel.asm["ptx"])
        usage = _assemble(ptx, target, [TRITON_PTXAS_FLAG])
        if usage["spill_stores"] or usage["spill_loads"]:
            plain = _assemble(ptx, target, [])
            usage["spills_without_flag"] = plain["spill_stores"] + plain["spill_loads"]
    cache.put(json.dumps(usage), name, binary=False)
    return usage


def _assemble(ptx: Path, target: Target, flags: list[str]) -> dict:
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    command = [get_ptxas(target.capability).path, "-v", *flags,
               f"--gpu-name={sm_arch_from_capability(target.capability)}", str(ptx), "-o", f"{ptx}.o"]
    log = subprocess.run(command, capture_output=True, text=True, check=True).stderr
    registers, spills = PTXAS_REGISTERS.search(log), PTXAS_SPILLS.search(log)
    if not registers or not spills:
        raise RuntimeError(f"unexpected ptxas -v output: {log!r}")
    return {"registers": int(registers[1]), "spill_stores": int(spills[1]), "spill_loads": int(spills[2])}


def uncovered_kernels(found: list[Variant]) -> list[str]:
    """Triton functions of methods/ that no call launches, nor calls from a launched kernel."""
    from triton.runtime.jit import JITFunction

    import methods

    for info in pkgutil.walk_packages(methods.__path__, "methods."):
        importlib.import_module(info.name)
    defined = {f"{fn.__module__}.{fn.__name__}": fn for name, module in sys.modules.items()
               if name.startswith("methods.") for fn in vars(module).values() if isinstance(fn, JITFunction)}
    launched = {v.kernel_name: v.kernel for v in found}
    sources = "\n".join(fn.src for fn in launched.values())
    called = {name for name, fn in defined.items() if re.search(rf"\b{fn.__name__}\s*\(", sources)}
    return sorted(name for name, fn in defined.items() if fn.__name__ not in launched and name not in called)


def format_result(result: Result) -> str:
    if not result.compiled:
        state = "ERROR"
        usage = result.error
    else:
        state = "ok" if not result.problems else "FAIL"
        usage = (f"{result.shared:>7,}/{result.shared_limit:,} B shared, {result.registers:>3} regs, "
                 f"spill {result.spill_stores}/{result.spill_loads} B")
    return f"{result.kernel:<28} {result.target:<7} {state:<5} {usage}  [{result.configuration}]"


def run(calls: list[Call], targets: tuple[Target, ...], full: bool, block_size: int | None = None,
        kernels: list[str] | None = None, report: Callable[[str], None] = print) -> tuple[list[Result], list[str]]:
    """Compile the variants ``calls`` launch (all of them, or the representative subset): the results,
    and the Triton functions of methods/ that no call reaches (not asked when ``kernels`` are named)."""
    started = time.perf_counter()
    if not full:
        targets = tuple(t for t in targets if t.capability in SUBSET_TARGETS)
    found = variants(calls, targets, block_size, kernels)
    chosen = found if full else subset(found)
    report(f"{len(calls)} calls launch {len(found)} variants on {', '.join(t.name for t in targets)}; "
           f"compiling {len(chosen)}")
    results = []
    for variant in chosen:
        results.append(compile_variant(variant))
        report(format_result(results[-1]))
        for problem in results[-1].problems:
            report(f"    {problem}")
        if results[-1].accepted:
            report(f"    accepted: {results[-1].accepted}")
    uncovered = [] if kernels else uncovered_kernels(found)
    for name in uncovered:
        report(f"{name}: no call the configs make launches it")
    bad = sum(bool(r.problems) for r in results)
    report(f"{len(results) - bad} of {len(results)} variants compile, fit and do not spill; "
           f"{time.perf_counter() - started:.0f} s")
    return results, uncovered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="every variant (default: the representative subset)")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--targets", nargs="+", type=int, choices=[t.capability for t in TARGETS],
                        default=[t.capability for t in TARGETS])
    parser.add_argument("--core", help="B,H,N,F,E: compile the core's launches at this shape only")
    parser.add_argument("--dtype", default="float32", choices=list(DTYPES), help="with --core")
    parser.add_argument("--block-size", type=int, help="with --core: feature_attention_triton's (default: its table)")
    parser.add_argument("--causal", action="store_true", help="with --core")
    parser.add_argument("--kernels", nargs="+", help="compile only these kernels")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("TRITON_INTERPRET=1 replaces the kernels with the interpreter; run this without it")
        return 2
    targets = tuple(t for t in TARGETS if t.capability in args.targets)
    if args.core:
        _, heads, n, f, e = (int(x) for x in args.core.split(","))
        calls, full = [Call("core", (), heads, n, f, e, args.dtype, args.causal)], True
    else:
        calls, full = config_calls(quick=not args.full), args.full
    results, uncovered = run(calls, targets, full, args.block_size, args.kernels)
    if args.json:
        rows = [vars(r) for r in results]
        Path(args.json).write_text(json.dumps({"results": rows, "uncovered": uncovered}, indent=1))
    return 1 if uncovered or any(r.problems for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
