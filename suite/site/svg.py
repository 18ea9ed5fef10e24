"""Plots as inline SVG, drawn in Python: no JavaScript and no network needed to see them.

One drawing function, :func:`plot`, serves every figure of the site (Pareto, kernel, fidelity,
decode). Every text that reaches the SVG goes through :func:`html.escape`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

PLOT_WIDTH, HEIGHT = 530, 400  # PLOT_WIDTH: left margin and axes; the legend is added to its right
LEFT, TOP, BOTTOM = 78, 36, 52
CHAR_WIDTH = 6.6  # of the legend's 11px font, to size the legend to its longest label
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f")
# Marker shapes, so that colour is not a series' only cue; six shapes and ten colours give 30
# distinct (colour, shape) pairs when both follow the series' index.
SHAPES = ("circle", "square", "triangle", "diamond", "triangle-down", "plus")  # "x" marks a failure
RADIUS = 4  # of a point's marker, unless the series sizes its points


@dataclass(frozen=True)
class Axis:
    """One axis: its label, log or linear scale, the log base of its ticks, how ticks read."""

    label: str
    log: bool = False
    fmt: Callable[[float], str] = lambda v: f"{v:g}"
    base: int = 10  # log ticks at powers of this base (2 for sequence lengths)


@dataclass
class Series:
    """A named set of (x, y) points; ``failed`` holds (x, status) of runs with no value."""

    label: str
    points: list[tuple[float, float]]
    color: str
    line: bool = True
    failed: list[tuple[float, str]] = field(default_factory=list)
    tips: list[str] = field(default_factory=list)  # a tooltip per point, same order as points
    dash: str = ""  # stroke-dasharray: tells apart lines of one color
    shape: str = "circle"  # one of SHAPES
    errors: list[float | None] = field(default_factory=list)  # per point: a bar from y - e to y + e
    sizes: list[float] = field(default_factory=list)  # per point: the marker's radius in pixels
    hollow: list[bool] = field(default_factory=list)  # per point: drawn as an outline only


@dataclass(frozen=True)
class Marker:
    """A vertical line at ``x`` with a short label (e.g. a crossover)."""

    x: float
    label: str
    color: str


def color_of(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def shape_of(index: int) -> str:
    return SHAPES[index % len(SHAPES)]


def marker(shape: str, cx: float, cy: float, r: float, color: str, hollow: bool = False, tip: str = "") -> str:
    """One point's marker, with its tooltip; hollow: an outline on white (a point to read with care)."""
    paint = (f'fill="#fff" stroke="{escape(color)}" stroke-width="1.5"' if hollow
             else f'fill="{escape(color)}"')
    title = f"<title>{escape(tip)}</title>" if tip else ""
    if shape == "circle":
        return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" {paint}>{title}</circle>'
    if shape == "plus":  # strokes only: hollow or not, it reads the same
        d = f"M{cx - r:.1f},{cy:.1f} h{2 * r:.1f} M{cx:.1f},{cy - r:.1f} v{2 * r:.1f}"
        return f'<path d="{d}" fill="none" stroke="{escape(color)}" stroke-width="2">{title}</path>'
    corners = {
        "square": [(-0.9, -0.9), (0.9, -0.9), (0.9, 0.9), (-0.9, 0.9)],
        "diamond": [(0, -1.3), (1.3, 0), (0, 1.3), (-1.3, 0)],
        "triangle": [(0, -1.3), (1.15, 0.8), (-1.15, 0.8)],
        "triangle-down": [(0, 1.3), (1.15, -0.8), (-1.15, -0.8)],
    }[shape]
    d = "M" + " L".join(f"{cx + a * r:.1f},{cy + b * r:.1f}" for a, b in corners) + " Z"
    return f'<path d="{d}" {paint}>{title}</path>'


def pareto_front(points: Sequence[tuple[float, float]], x_better: str, y_better: str) -> list[int]:
    """Indices of the points no other point dominates (at least as good on both axes, better on
    one), given which direction ("higher" or "lower") is better on each; sorted by x."""
    sx = 1 if x_better == "higher" else -1
    sy = 1 if y_better == "higher" else -1

    def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
        ge = sx * a[0] >= sx * b[0] and sy * a[1] >= sy * b[1]
        return ge and (sx * a[0] > sx * b[0] or sy * a[1] > sy * b[1])

    front = [i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)]
    return sorted(front, key=lambda i: points[i][0])


class _Scale:
    """Maps data values on one axis to pixels, linearly or in log space."""

    def __init__(self, values: list[float], axis: Axis, lo_px: float, hi_px: float):
        self.axis, self.lo_px, self.hi_px = axis, lo_px, hi_px
        vals = [v for v in values if v > 0] if axis.log else list(values)
        lo, hi = (min(vals), max(vals)) if vals else (1.0, 10.0)
        if axis.log:
            lo, hi = math.log(lo), math.log(hi)
            pad = 0.06 * (hi - lo) or math.log(2)
        else:
            pad = 0.06 * (hi - lo) or (abs(hi) * 0.1 or 1.0)
        self.lo, self.hi = lo - pad, hi + pad

    def __call__(self, v: float) -> float:
        t = (math.log(v) if self.axis.log else v)
        return self.lo_px + (t - self.lo) / (self.hi - self.lo) * (self.hi_px - self.lo_px)

    def contains(self, v: float) -> bool:
        if self.axis.log and v <= 0:
            return False
        t = math.log(v) if self.axis.log else v
        return self.lo <= t <= self.hi

    def ticks(self) -> list[float]:
        if self.axis.log:
            b = self.axis.base
            lo, hi = self.lo / math.log(b), self.hi / math.log(b)
            ticks = [b ** k for k in range(math.ceil(lo), math.floor(hi) + 1)]
            while len(ticks) > 8:  # too dense: every other power
                ticks = ticks[::2]
            if len(ticks) >= 2:
                return ticks
            # Less than a decade: add 2x and 5x steps, then fall back to linear ticks.
            dense = [m * 10 ** k for k in range(math.floor(lo) - 1, math.ceil(hi) + 1) for m in (1, 2, 5)]
            ticks = [t for t in dense if self.contains(t)]
            if len(ticks) >= 2:
                return ticks
            lo_v, hi_v = math.exp(self.lo), math.exp(self.hi)
        else:
            lo_v, hi_v = self.lo, self.hi
        raw = (hi_v - lo_v) / 5
        # Base-2 axes (bytes) step in round numbers of their binary unit (KiB, MiB, ...), others in 1-2-5s.
        unit = 1024.0 ** max(0, math.floor(math.log(raw, 1024))) if self.axis.base == 2 and raw > 0 else 1.0
        mag = unit * 10 ** math.floor(math.log10(raw / unit)) if raw > 0 else 1.0
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
        first = math.ceil(lo_v / step) * step
        return [first + i * step for i in range(int((hi_v - first) / step) + 1) if self.contains(first + i * step)]


def _text(x: float, y: float, text: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{escape(v)}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(text)}</text>'


def plot(title: str, x: Axis, y: Axis, series: Sequence[Series], *, markers: Sequence[Marker] = (),
         frontier: Sequence[tuple[float, float]] = (), note: str = "") -> str:
    """An SVG figure: axes with ticks, one line or point set per series, a legend, markers."""
    xs = [p[0] for s in series for p in s.points] + [f[0] for s in series for f in s.failed]
    ys = [p[1] for s in series for p in s.points]
    ys += [p[1] + sign * e for s in series for p, e in zip(s.points, s.errors) if e for sign in (-1, 1)]
    labels = [s.label for s in series] + ["x on top: no value (failed)", "Pareto frontier"]
    width = PLOT_WIDTH + 50 + int(CHAR_WIDTH * max(map(len, labels)))
    height = max(HEIGHT, TOP + 18 * len(labels) + 10)  # taller when the legend needs it: no series left out
    sx = _Scale(xs, x, LEFT, PLOT_WIDTH)
    sy = _Scale(ys, y, HEIGHT - BOTTOM, TOP)
    out = [f'<svg class="plot" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
           f"<title>{escape(title)}</title>",
           _text(LEFT, 15, title, class_="plot-title")]
    x0, x1, y0, y1 = LEFT, PLOT_WIDTH, HEIGHT - BOTTOM, TOP
    out.append(f'<rect class="frame" x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}"/>')
    for t in sx.ticks():
        px = sx(t)
        out.append(f'<line class="grid" x1="{px:.1f}" y1="{y1}" x2="{px:.1f}" y2="{y0}"/>')
        out.append(_text(px, y0 + 16, x.fmt(t), class_="tick", text_anchor="middle"))
    for t in sy.ticks():
        py = sy(t)
        out.append(f'<line class="grid" x1="{x0}" y1="{py:.1f}" x2="{x1}" y2="{py:.1f}"/>')
        out.append(_text(x0 - 6, py + 4, y.fmt(t), class_="tick", text_anchor="end"))
    out.append(_text((x0 + x1) / 2, HEIGHT - 12, x.label + (" (log)" if x.log else ""),
                     class_="axis-label", text_anchor="middle"))
    out.append(f'<text class="axis-label" transform="translate(16 {(y0 + y1) / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{escape(y.label + (" (log)" if y.log else ""))}</text>')
    if frontier:  # a dashed line through the frontier, and a ring on each of its points
        path = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in frontier)
        out.append(f'<polyline class="frontier" points="{path}"/>')
        out.extend(f'<circle class="frontier-point" cx="{sx(a):.1f}" cy="{sy(b):.1f}" r="8"/>' for a, b in frontier)
    for m in markers:
        if sx.contains(m.x):
            px = sx(m.x)
            out.append(f'<line class="marker" x1="{px:.1f}" y1="{y1}" x2="{px:.1f}" y2="{y0}" '
                       f'stroke="{escape(m.color)}"/>')
            right_half = px > (x0 + x1) / 2  # label on the side with room
            out.append(_text(px - 3 if right_half else px + 3, y1 + 12 + 12 * markers.index(m), m.label,
                             class_="marker-label", fill=m.color, text_anchor="end" if right_half else "start"))
    for s in series:
        color = escape(s.color)
        pts = [(a, b) for a, b in s.points if sx.contains(a) and sy.contains(b)]
        if s.line and len(pts) >= 2:
            path = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in pts)
            dash = f' stroke-dasharray="{escape(s.dash)}"' if s.dash else ""
            out.append(f'<polyline class="series" points="{path}" stroke="{color}"{dash}/>')
        for i, (a, b) in enumerate(s.points):
            if not (sx.contains(a) and sy.contains(b)):
                continue
            error = s.errors[i] if i < len(s.errors) else None
            if error:  # a bar of +- error, with short caps
                top, bottom, px = sy(b + error), sy(b - error), sx(a)
                out.append(f'<path class="error-bar" d="M{px:.1f},{top:.1f} V{bottom:.1f} M{px - 3:.1f},{top:.1f} '
                           f'h6 M{px - 3:.1f},{bottom:.1f} h6" fill="none" stroke="{color}"/>')
            tip = s.tips[i] if i < len(s.tips) else ""
            label = f"{s.label}: {x.fmt(a)}, {y.fmt(b)}" + (f" ({tip})" if tip else "")
            radius = s.sizes[i] if i < len(s.sizes) else RADIUS
            hollow = s.hollow[i] if i < len(s.hollow) else False
            out.append(marker(s.shape, sx(a), sy(b), radius, s.color, hollow, label))
        for a, status in s.failed:  # no value to plot: a cross on the top edge, named
            if sx.contains(a):
                px = sx(a)
                out.append(f'<g class="failed" stroke="{color}"><title>{escape(f"{s.label}: {status} at {x.fmt(a)}")}'
                           f'</title><path d="M{px - 4:.1f},{y1 + 2} l8,8 m0,-8 l-8,8"/></g>')
    ly = TOP + 4
    for s in series:
        dash = f' stroke-dasharray="{escape(s.dash)}"' if s.dash else ""
        if s.line:
            out.append(f'<line x1="{x1 + 12}" y1="{ly + 6}" x2="{x1 + 28}" y2="{ly + 6}" '
                       f'stroke="{escape(s.color)}" stroke-width="3"{dash}/>')
        out.append(marker(s.shape, x1 + 20, ly + 6, RADIUS, s.color))
        out.append(_text(x1 + 32, ly + 10, s.label, class_="legend"))
        ly += 18
    if frontier:
        out.append(f'<line class="frontier" x1="{x1 + 14}" y1="{ly + 6}" x2="{x1 + 26}" y2="{ly + 6}"/>')
        out.append(_text(x1 + 32, ly + 10, "Pareto frontier", class_="legend"))
        ly += 18
    if any(s.failed for s in series):
        out.append(_text(x1 + 14, ly + 10, "x on top: no value (failed)", class_="legend"))
    if note:
        out.append(_text(x0, 30, note, class_="plot-note"))
    out.append("</svg>")
    return "\n".join(out)


# What board.css gives a plot on the site, for an SVG file that must look the same on its own.
STANDALONE_STYLE = """
.frame { fill: none; stroke: #8b949e; } .grid { stroke: #eaeef2; }
text { font-family: sans-serif; font-size: 11px; fill: #1d2329; }
.plot-title { font-weight: 600; font-size: 13px; } .plot-note, .axis-label { fill: #5f6b76; }
.axis-label { font-size: 12px; } .series { fill: none; stroke-width: 2; }
.frontier, .frontier-point { fill: none; stroke: #222; stroke-width: 1.5; } .frontier { stroke-dasharray: 5 3; }
.marker { stroke-dasharray: 3 3; stroke-width: 1.5; } .failed path { fill: none; stroke-width: 2; }
"""


def standalone(svg: str) -> str:
    """A figure from :func:`plot` as a complete SVG file: its namespace, a white ground, its style."""
    opening, rest = svg.split("\n", 1)
    opening = opening.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    return f'{opening}\n<style>{STANDALONE_STYLE}</style>\n<rect width="100%" height="100%" fill="#fff"/>\n{rest}\n'
