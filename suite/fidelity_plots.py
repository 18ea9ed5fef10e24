"""The fidelity job's plots as standalone SVG files (no matplotlib here): log-log line charts of the
denominator error against d_phi (with the 1/sqrt(d_phi) law for random features) and against N,
and of FLOPs against d_phi beside exact attention's at each N."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html import escape
from pathlib import Path

WIDTH, HEIGHT = 680, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 210, 34, 50  # the right margin holds the legend
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
REFERENCE_COLOR = "#777777"


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    color: str
    dashed: bool = False


def _log_range(values: list[float]) -> tuple[float, float]:
    low, high = math.log10(min(values)), math.log10(max(values))
    pad = 0.05 * (high - low) if high > low else 0.5
    return low - pad, high + pad


def _ticks(low: float, high: float) -> list[float]:
    """Powers of ten inside [10^low, 10^high]; the two ends when fewer than two fit."""
    powers = [10.0**e for e in range(math.ceil(low), math.floor(high) + 1)]
    return powers if len(powers) >= 2 else [10**low, 10**high]


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 11, extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-family="sans-serif" font-size="{size}" '
            f'text-anchor="{anchor}"{extra}>{escape(text)}</text>')


def line_chart(title: str, x_label: str, y_label: str, series: list[Series]) -> str:
    """A log-log chart: one polyline (with dots) per series, ticks at powers of ten, a legend."""
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    (x0, x1), (y0, y1) = _log_range(xs), _log_range(ys)
    px = lambda x: LEFT + (math.log10(x) - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT)  # noqa: E731
    py = lambda y: HEIGHT - BOTTOM - (math.log10(y) - y0) / (y1 - y0) * (HEIGHT - TOP - BOTTOM)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">',
           f"<title>{escape(title)}</title>",
           f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           _text(LEFT, 20, title, size=13),
           f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" '
           f'fill="none" stroke="#333"/>']
    for t in _ticks(x0, x1):
        out.append(f'<line x1="{px(t):.1f}" y1="{TOP}" x2="{px(t):.1f}" y2="{HEIGHT - BOTTOM}" stroke="#ddd"/>')
        out.append(_text(px(t), HEIGHT - BOTTOM + 15, f"{t:.3g}", anchor="middle"))
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{LEFT}" y1="{py(t):.1f}" x2="{WIDTH - RIGHT}" y2="{py(t):.1f}" stroke="#ddd"/>')
        out.append(_text(LEFT - 5, py(t) + 4, f"{t:.3g}", anchor="end"))
    out.append(_text((LEFT + WIDTH - RIGHT) / 2, HEIGHT - 12, f"{x_label} (log)", anchor="middle"))
    out.append(_text(16, (TOP + HEIGHT - BOTTOM) / 2, f"{y_label} (log)", anchor="middle",
                     extra=f' transform="rotate(-90 16 {(TOP + HEIGHT - BOTTOM) / 2:.1f})"'))
    for i, s in enumerate(series):
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(s.points))
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="1.8"{dash}/>')
        if not s.dashed:
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{s.color}"/>' for x, y in s.points]
        ly = TOP + 10 + 16 * i
        out.append(f'<line x1="{WIDTH - RIGHT + 10}" y1="{ly}" x2="{WIDTH - RIGHT + 30}" y2="{ly}" '
                   f'stroke="{s.color}" stroke-width="1.8"{dash}/>')
        out.append(_text(WIDTH - RIGHT + 35, ly + 4, s.label, size=10))
    out.append("</svg>")
    return "\n".join(out) + "\n"


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
            series.append(Series(f"{source}, N={n}", line, COLORS[i % len(COLORS)]))
    random_features = any("num_features" in p["variant"] for p in points)
    if series and random_features and len(series[0].points) >= 2:
        first = series[0].points
        centre_x = math.exp(sum(math.log(x) for x, _ in first) / len(first))
        centre_y = math.exp(sum(math.log(y) for _, y in first) / len(first))
        law = [(x, centre_y * (x / centre_x) ** -0.5) for x, _ in first]
        series.append(Series("1/sqrt(d_phi)", law, REFERENCE_COLOR, dashed=True))
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
            series.append(Series(f"{source}{d_phi}", line, COLORS[i % len(COLORS)]))
    return series


def cost_vs_d_phi(points: list[dict]) -> list[Series]:
    """The linear form's FLOPs per N (solid) and exact attention's at that N (dashed): where a
    solid line crosses its dashed one, more features stop saving anything."""
    series = []
    lengths = sorted({p["seq_len"] for p in points if "kernelized_flops" in p})
    for i, n in enumerate(lengths):
        at_n = {p["d_phi"]: p for p in points if p["seq_len"] == n and "kernelized_flops" in p}
        color = COLORS[i % len(COLORS)]
        series.append(Series(f"linear form, N={n}", _positive([(f, p["kernelized_flops"]) for f, p in at_n.items()]), color))
        series.append(Series(f"exact, N={n}", _positive([(f, p["exact_attention_flops"]) for f, p in at_n.items()]),
                             color, dashed=True))
    return [s for s in series if s.points]


PLOTS = {
    "error_vs_d_phi": (error_vs_d_phi, "denominator error against d_phi", "d_phi (features)", "mean denominator rel. error"),
    "error_vs_seq_len": (error_vs_seq_len, "denominator error against N", "N (keys)", "mean denominator rel. error"),
    "cost_vs_d_phi": (cost_vs_d_phi, "FLOPs per head against d_phi", "d_phi (features)", "FLOPs"),
}


def write_plots(metrics: Mapping, folder: Path, stem: str, method: str) -> list[str]:
    """Write each plot that has data as ``<stem>.<plot>.svg`` in ``folder``; return the file names."""
    names = []
    for plot, (make, title, x_label, y_label) in PLOTS.items():
        series = make(metrics["points"]) if metrics["points"] else []
        if not series:
            continue
        name = f"{stem}.{plot}.svg"
        svg = line_chart(f"{method}: {title}", x_label, y_label, series)
        write_atomically(folder / name, lambda tmp: tmp.write_text(svg))
        names.append(name)
    return names


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write`` a temporary file beside ``path``, then rename it over ``path``: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
