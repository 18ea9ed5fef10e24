"""The site's charts as Vega-Lite specs, built with Altair: one function, :func:`chart`, draws
every figure (board, Pareto, kernel, decode, fidelity) from rows of plain values.

In the browser (vega-embed, bundled into the build's assets) a point's values show on hover, a
click on a legend entry shows that series alone (shift-click adds more), and sweeps zoom and pan
with the mouse wheel and drag; without JavaScript the same spec, rendered to SVG at build time,
is shown. Colour is never the only cue: each method also has its own marker shape.

Ticks are chosen here, at round values in the unit shown (powers of two of bytes and lengths,
1-2-5 steps of seconds and rates), since a log scale's own ticks are round only in its raw unit
(10^7 bytes reads 9.5 MiB).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import altair as alt
from altair.utils.schemapi import validate_jsonschema
from altair.vegalite.v6.schema import load_schema

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f")
# Seven shapes and ten colours give 70 distinct (colour, shape) pairs when both follow the series'
# index; "cross" is kept for a failed run.
SHAPES = ("circle", "square", "triangle-up", "diamond", "triangle-down", "triangle-right", "triangle-left")
DASHES = ((1, 0), (7, 3), (2, 3), (9, 3, 2, 3))  # per implementation of one method (one colour)
WIDTH, HEIGHT = 440, 300
MAX_TICKS = 8
FADED = 0.12  # opacity of the series a legend click did not select
BINARY = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


# -- ticks and their labels -------------------------------------------------------------------------

@dataclass(frozen=True)
class Axis:
    """One axis: its title, the unit its values are in, and its scale."""

    title: str
    unit: str = ""  # "bytes", "s", "count", "fraction", or "" (plain numbers)
    log: bool = False

    def label_expr(self) -> str:
        """A Vega expression writing a tick value ``datum.value`` in this unit."""
        v = "datum.value"
        if self.unit == "bytes":
            parts = [f"{v} >= {size} ? format({v} / {size}, '~g') + ' {name}'" for name, size in BINARY]
            return " : ".join(parts) + f" : format({v}, '~g') + ' B'"
        if self.unit == "s":
            return (f"{v} >= 1 ? format({v}, '~g') + ' s' : {v} >= 1e-3 ? format({v} * 1e3, '~g') + ' ms' : "
                    f"{v} >= 1e-6 ? format({v} * 1e6, '~g') + ' µs' : format({v} * 1e9, '~g') + ' ns'")
        if self.unit == "count":  # lengths and feature sizes as kernel plots write them: 512, 1K, 16K, 1M
            return (f"{v} >= 1048576 && {v} % 1048576 == 0 ? format({v} / 1048576, '~g') + 'M' : "
                    f"{v} >= 1024 && {v} % 1024 == 0 ? format({v} / 1024, '~g') + 'K' : format({v}, ',~g')")
        if self.unit == "fraction":
            return f"format({v}, '.1~%')"
        return f"format({v}, ',~g')"

    def ticks(self, values: Sequence[float]) -> list[float] | None:
        """Round tick values from the largest at or below ``values`` to the smallest at or above,
        at most MAX_TICKS of them; None on a linear axis (its scale's own ticks are round)."""
        if not self.log or not values:
            return None
        lo, hi = min(values), max(values)
        for candidates in self._levels(lo, hi):
            first = max((t for t in candidates if t <= lo), default=candidates[0])
            last = min((t for t in candidates if t >= hi), default=candidates[-1])
            chosen = [t for t in candidates if first <= t <= last]
            if len(chosen) <= MAX_TICKS:
                return chosen
        return chosen

    def _levels(self, lo: float, hi: float) -> Iterator[list[float]]:
        """Ever sparser round sequences covering [lo, hi]."""
        if self.unit in ("bytes", "count"):  # powers of two: 1 KiB, 4 KiB, ...; 256, 1K, 4K
            first, last = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
            for step in range(1, 64):
                if self.unit == "bytes" and 10 % step and step < 10:
                    continue  # steps that divide 10 keep 1 KiB, 1 MiB, 1 GiB on the ticks
                start = first - first % step
                yield [2.0**k for k in range(start, last + step, step)]
        else:  # 1-2-5 steps, then powers of ten
            first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
            yield [float(f"{m}e{k}") for k in range(first, last + 1) for m in (1, 2, 5)]
            for step in range(1, 64):
                start = first - first % step
                yield [float(f"1e{k}") for k in range(start, last + step, step)]


def scale_and_axis(axis: Axis, values: Sequence[float]) -> tuple[alt.Scale, alt.Axis]:
    """The scale (log: its domain from one round tick to another) and the axis (those ticks,
    labelled in the axis' unit) for ``values``."""
    title = axis.title + (" (log)" if axis.log else "")
    ticks = axis.ticks(values)
    if ticks is None and axis.unit == "fraction":  # a share: 0% to 100%, never beyond
        return (alt.Scale(domain=[0, 1], nice=False, zero=True),
                alt.Axis(title=title, labelExpr=axis.label_expr(), grid=True))
    if ticks is None:
        return (alt.Scale(zero=False, nice=True, padding=10),
                alt.Axis(title=title, labelExpr=axis.label_expr(), grid=True))
    domain = [ticks[0], ticks[-1]] if len(ticks) > 1 else [ticks[0] / 2, ticks[0] * 2]
    return (alt.Scale(type="log", domain=domain, nice=False, padding=10),
            alt.Axis(title=title, values=ticks, labelExpr=axis.label_expr(), grid=True))


# -- the chart --------------------------------------------------------------------------------------

@dataclass
class Layout:
    """What a chart draws besides points: lines, the error's shape, sizes, zoom."""

    line: bool = True  # join a series' points (by x)
    error: str = ""  # "bar" or "band" from the rows' lo and hi, or "" for none
    size: Axis | None = None  # marker area by the rows' size (e.g. peak memory)
    zoom: bool = False  # wheel zooms, drag pans (the scaling plots)
    frontier: list[dict] = field(default_factory=list)  # rows of the Pareto frontier, joined by a dashed line
    markers: list[dict] = field(default_factory=list)  # {x, series, label}: a vertical line each
    levels: list[dict] = field(default_factory=list)  # {y, label}: a grey dashed horizontal line each (a baseline)
    baseline: list[dict] = field(default_factory=list)  # {x, y, label}: a grey dashed line through them (by x)
    dashes: bool = False  # one dash pattern per implementation (rows' impl)


def styles(names: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """The legend's order (as the rows bring the series: the figures order them by method) with a
    colour and a shape per series."""
    ordered = list(dict.fromkeys(names))
    return (ordered, [PALETTE[i % len(PALETTE)] for i in range(len(ordered))],
            [SHAPES[i % len(SHAPES)] for i in range(len(ordered))])


def size_legend(axis: Axis, sizes: list[float]) -> list[float]:
    """A few round marker sizes (in the axis' unit) within the measured ones, largest last."""
    ticks = axis.ticks(sizes)
    inside = [t for t in ticks if min(sizes) <= t <= max(sizes)]
    return inside[-3:] if inside else [ticks[0]]  # all alike: the round size just below


def chart(title: str, rows: list[dict], x: Axis, y: Axis, layout: Layout, *, subtitle: Sequence[str] = (),
          failed: list[dict] = ()) -> dict:
    """A Vega-Lite spec: ``rows`` hold ``series``, ``x``, ``y`` (and ``lo``/``hi``, ``size``,
    ``hollow``, ``impl`` where the layout uses them) plus ``tip`` text; ``failed`` rows
    (``series``, ``x``, ``tip``) are crosses on the top edge."""
    domain, colours, shapes = styles([r["series"] for r in (*rows, *failed)])
    xs = [r["x"] for r in (*rows, *failed, *layout.markers, *layout.baseline)]
    ys = [v for r in rows for v in (r["y"], r.get("lo"), r.get("hi")) if v is not None]
    ys += [r["y"] for r in (*layout.levels, *layout.baseline)]
    x_scale, x_axis = scale_and_axis(x, xs)
    y_scale, y_axis = scale_and_axis(y, ys)
    legend = alt.Legend(title=None, symbolLimit=0, labelLimit=360, orient="right", symbolOpacity=1)
    colour = alt.Color("series:N", scale=alt.Scale(domain=domain, range=colours), legend=legend)
    shape = alt.Shape("series:N", scale=alt.Scale(domain=domain, range=shapes), legend=legend)
    pick = alt.selection_point(fields=["series"], bind="legend", name="pick")

    def shown(full: float = 1.0):  # a series the legend did not pick fades
        return alt.when(pick).then(alt.value(full)).otherwise(alt.value(full * FADED))

    enc_x = alt.X("x:Q", scale=x_scale, axis=x_axis)
    enc_y = alt.Y("y:Q", scale=y_scale, axis=y_axis)
    tooltip = [alt.Tooltip("series:N", title="series"), alt.Tooltip("x_text:N", title=x.title),
               alt.Tooltip("y_text:N", title=y.title), alt.Tooltip("tip:N", title="about")]
    base = alt.Chart()  # the layer's data: ``rows``, given once to the whole layer
    layers = []
    if layout.error == "band":
        layers.append(base.mark_area(interpolate="linear").encode(
            enc_x, alt.Y("lo:Q", scale=y_scale, axis=y_axis), alt.Y2("hi:Q"), colour, opacity=shown(0.2),
            detail="impl:N" if layout.dashes else alt.Undefined).transform_filter("isValid(datum.lo)"))
    elif layout.error == "bar":
        layers.append(base.mark_rule(strokeWidth=1.5).encode(
            enc_x, alt.Y("lo:Q", scale=y_scale, axis=y_axis), alt.Y2("hi:Q"), colour, opacity=shown(),
        ).transform_filter("isValid(datum.lo)"))
    if layout.line:
        dash = (alt.StrokeDash("impl:N", scale=alt.Scale(range=[list(d) for d in DASHES]),
                               legend=alt.Legend(title="implementation"))
                if layout.dashes else alt.Undefined)
        layers.append(base.mark_line(strokeWidth=2).encode(
            enc_x, enc_y, colour, opacity=shown(), strokeDash=dash,
            detail="impl:N" if layout.dashes else alt.Undefined, order="x:Q"))
    if layout.frontier:
        layers.append(alt.Chart(alt.Data(values=layout.frontier)).mark_line(
            color="#222", strokeDash=[5, 3], strokeWidth=1.5).encode(
            enc_x, enc_y, order="x:Q", tooltip=alt.value("Pareto frontier")))
    sizes = [r["size"] for r in rows if r.get("size")]
    size = (alt.Size("size:Q", scale=alt.Scale(range=[30, 420], domain=[0, max(sizes)]),
                     legend=alt.Legend(title=layout.size.title, labelExpr=layout.size.label_expr(),
                                       values=size_legend(layout.size, sizes), symbolFillColor="#8b949e",
                                       symbolStrokeColor="#5f6b76", symbolType="circle"))
            if layout.size and sizes else alt.value(64))
    fill = alt.when("datum.hollow").then(alt.value("#ffffff")).otherwise(
        alt.Fill("series:N", scale=alt.Scale(domain=domain, range=colours), legend=None))
    points = base.mark_point(filled=True, strokeWidth=1.6).encode(
        enc_x, enc_y, colour, shape, size=size, fill=fill,
        stroke=alt.Stroke("series:N", scale=alt.Scale(domain=domain, range=colours), legend=None),
        opacity=shown(), tooltip=tooltip).add_params(pick)
    if layout.zoom:
        points = points.add_params(alt.selection_interval(bind="scales", name="zoom"))
    layers.append(points)
    if failed:
        layers.append(alt.Chart(alt.Data(values=failed)).mark_point(shape="cross", size=70, filled=True).encode(
            enc_x, alt.YValue(6), colour, opacity=shown(),
            tooltip=[alt.Tooltip("series:N", title="series"), alt.Tooltip("tip:N", title="no value")]))
    if layout.levels:
        layers.append(alt.Chart(alt.Data(values=layout.levels)).mark_rule(
            color="#8b949e", strokeDash=[4, 4], strokeWidth=1.5).encode(
            enc_y, tooltip=alt.Tooltip("label:N", title="level")))
    if layout.baseline:
        layers.append(alt.Chart(alt.Data(values=layout.baseline)).mark_line(
            color="#8b949e", strokeDash=[4, 4], strokeWidth=1.5, point=True).encode(
            enc_x, enc_y, order="x:Q", tooltip=alt.Tooltip("label:N", title="baseline")))
    if layout.markers:
        layers.append(alt.Chart(alt.Data(values=layout.markers)).mark_rule(strokeDash=[3, 3], strokeWidth=1.5).encode(
            enc_x, colour, opacity=shown(), tooltip=alt.Tooltip("label:N", title="crossover")))
    spec = alt.layer(*layers, data=alt.Data(values=rows)).properties(
        width=WIDTH, height=HEIGHT, description=title,
        title=alt.Title(title, subtitle=list(subtitle) or alt.Undefined, anchor="start", fontSize=13,
                        subtitleColor="#5f6b76", limit=WIDTH + 260),
    ).resolve_scale(color="shared", shape="shared").configure_view(stroke="#8b949e").configure(
        font="sans-serif", background="#ffffff").to_dict(validate=False)
    # Altair's validation of every part as it is written would take longer than drawing the
    # figure; tests/test_site.py validates each figure's whole spec against the Vega-Lite schema.
    spec.pop("$schema", None)  # vega-embed is told the mode; the page references nothing remote
    return spec


def validate(spec: dict) -> None:
    """Raise jsonschema's ValidationError if ``spec`` is not a valid Vega-Lite spec (Altair's schema)."""
    validate_jsonschema(spec, load_schema())
