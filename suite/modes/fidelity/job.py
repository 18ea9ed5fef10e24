"""mode=fidelity: how far a kernelized method's attention is from exact softmax attention, the
denominator first (attention is a kernel smoother; a wrong normaliser rescales the whole output).

For every input source (synthetic q, k, v at a grid of score temperatures, and q, k, v captured
from a softmax model trained on the run's task), sequence length N and feature size d_phi, the job
measures per query, against float64 exact attention over all N keys (over keys 0..i for query i
where the captured model is a decoder: causal, as it attended in training): the denominator's
relative error, the numerator's, the output's, the total variation of the attention row, and the
output error with only the numerator or only the denominator approximated. Each is summarised by
mean, median, p95 and max over queries, beside the FLOPs and memory of the linear form and of exact
attention at that N. The grid is ``mode.grids[<budget name>]`` (conf/mode/fidelity.yaml).

When the grid has a ``fit`` block, each captured source's queries are split in two halves
(suite/modes/fidelity/fit.py) and every method is measured on the held-out half there, so that
all records compare their maps on the same queries. A method that declares parameters to fit to
softmax attention (``attention_fit_parameters``: Hedgehog's map) is fitted on the other half, and
measured as built (method ``<name>``) and fitted (method ``<name> fitted``, with the fit's facts).
"""

from __future__ import annotations

import copy
import json
import statistics
from collections.abc import Mapping

import torch
from tqdm.auto import tqdm

import methods
from suite.job import JobResult, Outcome
from suite.metrics import format_value
from suite.modes.common import error_lines, heading, select_grid, text_table
from suite.modes.fidelity import POINT_METRICS
from suite.modes.fidelity import capture as fidelity_capture
from suite.modes.fidelity.fit import fit_to_softmax, split_queries
from suite.modes.fidelity.measure import ERROR_NAMES, method_weights, query_errors, scores, summarize
from suite.scaling import loglog_slope

FLOAT32_BYTES = 4

REFERENCE = methods.REFERENCE  # the exact method: measured too, its errors are float32 rounding


# -- the grid ---------------------------------------------------------------------------------------

def feature_variants(method: Mapping, grid: Mapping) -> list[dict]:
    """Option overrides, one per feature map to measure, as the method declares them for the grid's
    feature counts (FAVOR+: one per count; Taylor: its full and symmetric-half maps)."""
    return methods.get(method["name"]).fidelity_variants(list(grid["d_phi"]))


# -- input sources ----------------------------------------------------------------------------------

def synthetic_sources(grid: Mapping, head_dim: int, seed: int, device: torch.device) -> list[dict]:
    """q, k, v ~ N(0, I) with q and k scaled by sqrt(std), so q.k/sqrt(D) has standard deviation
    ``std``; one draw per temperature at the longest N (shorter N use its prefix)."""
    longest = max(grid["seq_lens"])
    sources = []
    for index, std in enumerate(grid["score_stds"]):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + index)
        q, k, v = (torch.randn(grid["sequences"], 1, longest, head_dim, generator=generator) for _ in range(3))
        sources.append({"name": f"synthetic std={std:g}", "kind": "synthetic", "nominal_score_std": float(std),
                        "q": (q * std**0.5).to(device), "k": (k * std**0.5).to(device), "v": v.to(device)})
    return sources


def captured_sources(config: Mapping, grid: Mapping, device: torch.device) -> tuple[list[dict], dict]:
    """One source per attention layer of the trained softmax model, and facts for the record."""
    cfg = fidelity_capture.capture_config(config, grid.get("capture") or {})
    model, data, facts = fidelity_capture.trained_model(cfg, device)
    examples = fidelity_capture.longest_examples(data.test, grid["sequences"])
    per_layer = fidelity_capture.attention_inputs(model, examples, device)
    facts.update(task=cfg["task"]["name"], examples=len(examples), length=int(per_layer[0][0].shape[2]))
    sources = [{"name": f"{cfg['task']['name']} layer {i}", "kind": "captured", "nominal_score_std": None,
                "q": q, "k": k, "v": v} for i, (q, k, v) in enumerate(per_layer)]
    return sources, facts


# -- one cell of the grid ---------------------------------------------------------------------------

def build_modules(method: Mapping, variant: Mapping, head_dim: int, draws: int,
                  device: torch.device, seed: int = 0) -> list[torch.nn.Module]:
    """The method with one variant's options, once per independent random draw (one when the
    method has no random seed). Parameters a method draws as it is built (nn.init) come from
    ``seed``, so that a variant is the same map in every cell."""
    options = {**method["options"], **variant}
    seeded = "seed" in methods.get(method["name"]).method_options
    count = draws if seeded else 1
    built = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for draw in range(count):
            extra = {"seed": (options.get("seed") or 0) + draw} if seeded else {}
            built.append(methods.build(method["name"], head_dim=head_dim, impl="naive", **{**options, **extra})
                         .to(device).eval())
    return built


def feature_size(module: methods.AttentionMethod) -> int | None:
    """d_phi: the length of the method's feature vector as it resolved it; None for the exact reference."""
    return module.resolved_options().get("num_features")


@torch.no_grad()
def measure_cell(modules: list[torch.nn.Module], source: Mapping, n: int, queries: int, seed: int,
                 candidates: torch.Tensor | None = None, causal: bool = False) -> dict:
    """Errors of the method over the first ``n`` tokens of ``source``: ``queries`` sampled queries
    per sequence and head (among the positions ``candidates`` below n; None: any), against all
    ``n`` keys (causal: those up to the query), pooled over sequences, heads and draws."""
    q, k, v = (source[key][..., :n, :] for key in ("q", "k", "v"))
    generator = torch.Generator().manual_seed(seed + n)
    pool = torch.arange(n) if candidates is None else candidates[candidates < n]
    index = pool[torch.randperm(len(pool), generator=generator)[: min(queries, len(pool))]].sort().values.to(q.device)
    pooled: dict[str, list[torch.Tensor]] = {}
    score_var = []
    for module in modules:
        for b in range(q.shape[0]):  # one sequence at a time: bounded memory for large d_phi
            q_b, k_b, v_b = q[b : b + 1], k[b : b + 1], v[b : b + 1]
            s = scores(q_b[..., index, :], k_b, index if causal else None)
            score_var.append(s[torch.isfinite(s)].var().reshape(1))
            errors = query_errors(s, v_b, method_weights(module, q_b, k_b, index, causal))
            for name, value in errors.items():
                pooled.setdefault(name, []).append(value.flatten())
    flat = {name: torch.cat(values) for name, values in pooled.items()}
    # Overflowed queries have no finite error: counted, never averaged. Underflowed ones (the
    # method outputs 0) are counted and kept: that is what the method computes.
    overflow, underflow = flat["overflow"], flat["underflow"]
    cell = {name: summarize(flat[name][~overflow]) for name in ERROR_NAMES}
    cell.update(queries=int(overflow.numel()), overflow_queries=int(overflow.sum()),
                underflow_queries=int(underflow.sum()), score_std=float(torch.cat(score_var).mean().sqrt()))
    return cell


def cost_fields(module: methods.AttentionMethod, n: int, d: int, e: int, causal: bool = False) -> dict:
    """FLOPs and memory of exact attention at this N beside the method's (one sequence and head, causal
    or not as the errors were measured), as the methods declare them: FLOPs of the matrix products
    their CPU implementation runs; memory of the score matrix, or of the features and the state."""
    reference = methods.build(REFERENCE, head_dim=d)
    exact = round(reference.forward_flops(1, 1, n, e, causal=causal, impl="naive"))
    fields = {"exact_attention_flops": exact, "exact_attention_memory_bytes": FLOAT32_BYTES * n * n}
    features = module.resolved_options().get("num_features")
    if features and {"flops", "recurrent"} <= module.capabilities():  # a linear form: features and a state
        flops = round(module.forward_flops(1, 1, n, e, causal=causal, impl=module.cpu_default))
        fields.update(kernelized_flops=flops, flops_vs_exact=flops / exact,
                      kernelized_memory_bytes=FLOAT32_BYTES * 2 * n * features + module.state_bytes(1, 1, n, e))
    return fields


def slopes(points: list[dict]) -> list[dict]:
    """Per source and N, the log-log slope of the mean denominator error against the number of
    random features (num_features swept): -0.5 is the Monte Carlo rate. Maps of fixed kernel
    (Taylor's two sizes) have no such law and get no slope."""
    swept = [p for p in points if "num_features" in p["variant"] and p["denominator_rel_error"]]
    found = []
    for source, n in dict.fromkeys((p["source"], p["seq_len"]) for p in swept):
        row = [p for p in swept if p["source"] == source and p["seq_len"] == n]
        if len({p["d_phi"] for p in row}) < 2:
            continue
        slope = loglog_slope([p["d_phi"] for p in row], [p["denominator_rel_error"]["mean"] for p in row])
        found.append({"source": source, "seq_len": n, "denominator_error_slope": slope})
    return found


# -- fitting to softmax ----------------------------------------------------------------------------

def fit_settings(method: Mapping, grid: Mapping) -> Mapping | None:
    """The grid's ``fit`` block when the method declares parameters to fit to softmax attention;
    None otherwise (the method is measured as built)."""
    if "fit" in grid and methods.get(method["name"]).fits_attention():
        return grid["fit"]
    return None


def fitted_modules(modules: list[torch.nn.Module], source: Mapping, settings: Mapping,
                   seed: int, causal: bool = False) -> tuple[list[torch.nn.Module], list[dict]]:
    """Copies of ``modules`` fitted on the source's fitting queries, and each fit's facts."""
    fitted = [copy.deepcopy(module) for module in modules]
    facts = [fit_to_softmax(module, source["q"], source["k"], source["fit_queries"], source["held_out"],
                            settings, seed, causal) for module in fitted]
    return fitted, facts


def measured_point(label: str, modules: list[torch.nn.Module], source: Mapping, n: int, variant: Mapping,
                   grid: Mapping, seed: int, causal: bool = False) -> dict:
    """One point: the cell's identity, its errors (on the source's held-out queries, if it has
    them) and its costs."""
    point = {"method": label, "source": source["name"], "source_kind": source["kind"],
             "nominal_score_std": source["nominal_score_std"], "seq_len": n, "d_phi": feature_size(modules[0]),
             "variant": dict(variant), "draws": len(modules)}
    point.update(measure_cell(modules, source, n, grid["queries"], seed, source.get("held_out"), causal))
    point.update(cost_fields(modules[0], n, source["q"].shape[-1], source["v"].shape[-1], causal))
    return point


# -- the job ----------------------------------------------------------------------------------------

def record_task(config: Mapping) -> str:
    """The task a fidelity record is filed under, ok or not applicable: the captured model's task
    when the grid captures one, else "synthetic"."""
    grid = select_grid(config)
    if not grid["captured"]:
        return "synthetic"
    return fidelity_capture.capture_config(config, grid.get("capture") or {})["task"]["name"]


def job(config: Mapping, device: torch.device, config_hash: str) -> JobResult:
    """mode=fidelity: every (source, N, d_phi) cell of the budget's grid, one record."""
    method = config["method"]  # one that declares its weights (the mode needs them: suite/run.py)
    grid = select_grid(config)
    head_dim = config["model"]["d_model"] // config["model"]["num_heads"]
    seed = config["seed"]
    variants = feature_variants(method, grid)
    fit = fit_settings(method, grid)

    sources = synthetic_sources(grid, head_dim, seed, device)
    capture = None
    if grid["captured"]:
        captured, capture = captured_sources(config, grid, device)
        for source in captured if "fit" in grid else []:
            source["fit_queries"], source["held_out"] = split_queries(source["q"].shape[2], seed)
        sources += captured
    # A decoder attended to keys 0..i only: every source is then measured on those rows, one way per record.
    causal = bool(capture and capture.get("causal"))

    points, skipped, resolved, fits = [], [], [], {}
    cells = [(s, n, v) for s in sources for n in grid["seq_lens"] for v in variants]
    for source, n, variant in tqdm(cells, desc=f"fidelity of {method['name']}", unit="cell", dynamic_ncols=True,
                                   mininterval=0.5):
        available, held_out = source["q"].shape[2], source.get("held_out")
        if n > available or (held_out is not None and not (held_out < n).any()):
            reason = f"the source has {available} tokens" if n > available else "no held-out query below N"
            skipped.append({"source": source["name"], "seq_len": n, "reason": reason})
            continue
        modules = build_modules(method, variant, head_dim, grid["feature_draws"], device, seed)
        if modules[0].resolved_options() not in resolved:
            resolved.append(modules[0].resolved_options())
        points.append(measured_point(method["name"], modules, source, n, variant, grid, seed, causal))
        if held_out is not None and fit is not None and fit["steps"]:
            key = (source["name"], json.dumps(variant, sort_keys=True))
            if key not in fits:  # one fit per source and map, at the source's whole length
                fits[key] = fitted_modules(modules, source, fit, seed, causal)
            fitted, facts = fits[key]
            points.append({**measured_point(f"{method['name']} fitted", fitted, source, n, variant, grid, seed, causal),
                           "fit": facts})

    task = {"name": record_task(config), "seq_len": max(grid["seq_lens"]),
            "head_dim": head_dim, "sources": [s["name"] for s in sources], "causal": causal,
            "capture_model": capture}
    metrics = {"points": points, "denominator_error_slopes": slopes(points), "skipped": skipped,
               "causal": causal, "note": methods.get(method["name"]).fidelity_note}
    return JobResult(kind=config["mode"]["name"], outcome=Outcome(metrics=metrics), task=task,
                     resolved={"variants": resolved})


# -- the summary ------------------------------------------------------------------------------------

def summary(record: Mapping) -> str:
    """The table, the denominator's columns first, then the decomposition and the method's note."""
    m = record["metrics"]
    lines = heading(record, f"{record['method']['name']}: fidelity to exact softmax attention")
    if record["error"]:
        return "\n".join(lines + error_lines(record))
    seen = ("causal (the captured model is a decoder): query i sees keys 0..i" if m.get("causal") else
            "non-causal: every query sees all N keys")
    lines.append(f"{seen}; errors are mean (p95) over queries, relative to exact float64 attention")
    lines += table(m["points"])
    for slope in m.get("denominator_error_slopes", []):
        value = slope["denominator_error_slope"]
        lines.append(f"denominator error ~ d_phi^{value:.2f} on {slope['source']}, N={slope['seq_len']}"
                     if value is not None else f"no slope on {slope['source']}, N={slope['seq_len']}")
    lines.append(decomposition_line(m["points"]))
    lines += fit_lines(m["points"])
    for skip in m.get("skipped", []):
        lines.append(f"skipped {skip['source']} at N={skip['seq_len']}: {skip['reason']}")
    if m.get("note"):
        lines.append(m["note"])
    return "\n".join(lines)


def table(points: list[dict]) -> list[str]:
    """One row per point, its columns in POINT_METRICS order (the denominator first); the map
    first when the points hold more than one (a method as built and fitted)."""
    errors = [metric for metric in POINT_METRICS if metric.name in ERROR_NAMES]
    maps = len({p.get("method") for p in points}) > 1
    header = (["map"] if maps else []) + ["source", "N", "d_phi", "score std"] + [metric.label for metric in errors]
    header += ["FLOPs vs exact", "flags"]
    rows = []
    for p in points:
        cells = ([p["method"]] if maps else []) + [p["source"], str(p["seq_len"]),
                                                   "-" if p["d_phi"] is None else str(p["d_phi"]),
                                                   f"{p['score_std']:.2g}"]
        for metric in errors:
            stats = p[metric.name]
            cells.append("overflow" if stats is None else
                         f"{format_value(metric, stats['mean'])} ({format_value(metric, stats['p95'])})")
        cells.append("-" if "flops_vs_exact" not in p else f"{p['flops_vs_exact']:.3g}x")
        flags = [f"{p[key]} {key.split('_')[0]}" for key in ("overflow_queries", "underflow_queries") if p[key]]
        cells.append(", ".join(flags) or "-")
        rows.append(cells)
    return text_table(header, rows)


def fit_lines(points: list[dict]) -> list[str]:
    """Per fitted map and source: its held-out cross-entropy as built and fitted, beside the floor."""
    lines, seen = [], set()
    for p in points:
        for facts in p.get("fit", []):
            key = (p["method"], p["source"], p["d_phi"])
            if key in seen:
                continue
            seen.add(key)
            held = facts["held_out_cross_entropy"]
            lines.append(f"{p['method']} d_phi={p['d_phi']} on {p['source']}: held-out cross-entropy "
                         f"{held['initial']:.4g} as built, {held['fitted']:.4g} fitted (softmax's entropy "
                         f"{facts['held_out_softmax_entropy']:.4g}; {facts['steps']} Adam steps at lr "
                         f"{facts['lr']:g} on {facts['fit_queries']} queries, {facts['held_out_queries']} held out)")
    return lines


def decomposition_line(points: list[dict]) -> str:
    """Which approximated part drives the output error: in how many cells, and medians over cells
    of the per-cell mean errors (a few exploding cells would swamp a mean)."""
    usable = [p for p in points if p["output_rel_error"] is not None]
    if not usable:
        return "decomposition: every cell overflowed"
    den = [p["output_rel_error_approx_denominator"]["mean"] for p in usable]
    num = [p["output_rel_error_approx_numerator"]["mean"] for p in usable]
    both = [p["output_rel_error"]["mean"] for p in usable]
    larger = sum(d > n for d, n in zip(den, num))
    below = sum(b < min(d, n) for b, d, n in zip(both, den, num))
    return (f"decomposition: the approximate denominator alone (exact numerator) errs more than the approximate "
            f"numerator alone (exact denominator) in {larger} of {len(usable)} cells; median over cells of the "
            f"mean output error: denominator only {statistics.median(den):.3g}, numerator only "
            f"{statistics.median(num):.3g}, both {statistics.median(both):.3g}; both together err less than "
            f"either alone in {below} cells (their errors cancel in the ratio)")
