"""The fidelity job's plots as standalone SVG files (no matplotlib here): log-log line charts of the
denominator error against d_phi (with the 1/sqrt(d_phi) law for random features) and against N,
and of FLOPs against d_phi beside exact attention's at each N."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from suite.records import write_atomically
from suite.site.svg import Axis, Series, color_of, plot, standalone

REFERENCE_COLOR = "#777777"
DASHED = "6 4"


def _positive(points: list[tuple[float, float | None]]) -> list[tuple[float, float]]:
    return [(x, y) for x, y in points if x and y is not None and x > 0 and y > 0]


def _mean_error(point: Mapping, name: str = "denominator_rel_error") -> float | None:
    return point[name]["mean"] if point.get(name) else None


def error_vs_d_phi(points: list[dict]) -> list[Series]:
    """Per source at its largest N; the 1/sqrt(d_phi) law through the first series' geometric
    mean when the method draws random features (its d_phi is the num_features option)."""
    series = []
    for i, source in enumerate(dict.fromkeys(p["source"] for p in points)):
        own = [p for p in points if p["source"] == source]
        n = max(p["seq_len"] for p in own)
        line = _positive([(p["d_phi"], _mean_error(p)) for p in own if p["seq_len"] == n])
        if line:
            series.append(Series(f"{source}, N={n}", line, color_of(i)))
    random_features = any("num_features" in p["variant"] for p in points)
    if series and random_features and len(series[0].points) >= 2:
        first = series[0].points
        centre_x = math.exp(sum(math.log(x) for x, _ in first) / len(first))
        centre_y = math.exp(sum(math.log(y) for _, y in first) / len(first))
        law = [(x, centre_y * (x / centre_x) ** -0.5) for x, _ in first]
        series.append(Series("1/sqrt(d_phi)", law, REFERENCE_COLOR, dash=DASHED))
    return series


def error_vs_seq_len(points: list[dict]) -> list[Series]:
    """Per source at the largest d_phi measured."""
    largest = max((p["d_phi"] or 0) for p in points)
    series = []
    for i, source in enumerate(dict.fromkeys(p["source"] for p in points)):
        line = _positive([(p["seq_len"], _mean_error(p)) for p in points
                          if p["source"] == source and (p["d_phi"] or 0) == largest])
        if line:
            d_phi = f", d_phi={largest}" if largest else ""
            series.append(Series(f"{source}{d_phi}", line, color_of(i)))
    return series


def cost_vs_d_phi(points: list[dict]) -> list[Series]:
    """The linear form's FLOPs per N (solid) and exact attention's at that N (dashed): where a
    solid line crosses its dashed one, more features stop saving anything."""
    series = []
    lengths = sorted({p["seq_len"] for p in points if "kernelized_flops" in p})
    for i, n in enumerate(lengths):
        at_n = {p["d_phi"]: p for p in points if p["seq_len"] == n and "kernelized_flops" in p}
        color = color_of(i)
        series.append(Series(f"linear form, N={n}", _positive([(f, p["kernelized_flops"]) for f, p in at_n.items()]), color))
        series.append(Series(f"exact, N={n}", _positive([(f, p["exact_attention_flops"]) for f, p in at_n.items()]),
                             color, dash=DASHED))
    return [s for s in series if s.points]


PLOTS = {
    "error_vs_d_phi": (error_vs_d_phi, "denominator error against d_phi", "d_phi (features)", "mean denominator rel. error"),
    "error_vs_seq_len": (error_vs_seq_len, "denominator error against N", "N (keys)", "mean denominator rel. error"),
    "cost_vs_d_phi": (cost_vs_d_phi, "FLOPs per head against d_phi", "d_phi (features)", "FLOPs"),
}


def write_plots(metrics: Mapping, folder: Path, stem: str, method: str) -> list[str]:
    """Write each plot that has data as ``<stem>.<plot>.svg`` in ``folder``; return the file names."""
    names = []
    for kind, (make, title, x_label, y_label) in PLOTS.items():
        series = make(metrics["points"]) if metrics["points"] else []
        if not series:
            continue
        name = f"{stem}.{kind}.svg"
        svg = standalone(plot(f"{method}: {title}", Axis(x_label, log=True), Axis(y_label, log=True), series))
        write_atomically(folder / name, lambda tmp: tmp.write_text(svg))
        names.append(name)
    return names
