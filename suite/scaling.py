"""How measured curves scale: log-log slopes and crossovers against a reference. Plain Python (no
torch), shared by the kernel, decode and fidelity modes."""

from __future__ import annotations

import math
from collections.abc import Sequence


def loglog_slope(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of log y against log x over the points where both are positive; None
    with fewer than two distinct x."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values but {len(ys)} y values")
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y is not None and y > 0]
    if len({x for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    variance = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / variance


def slope_between(xs: Sequence[int], ys: Sequence[float], low: int, high: int) -> float | None:
    """The log-log slope over the x in [low, high] only; None unless both ends were measured."""
    if low not in xs or high not in xs:
        return None
    kept = [(x, y) for x, y in zip(xs, ys) if low <= x <= high]
    return loglog_slope([x for x, _ in kept], [y for _, y in kept])


def better_from(better: Sequence[bool]) -> int | None:
    """The index from which on every point is better (points in increasing x); None when the last
    one is not."""
    found = None
    for i in range(len(better) - 1, -1, -1):
        if not better[i]:
            break
        found = i
    return found


def crossover(lengths: Sequence[int], times: Sequence[float], reference: Sequence[float]) -> dict:
    """Where an implementation becomes faster than the reference for good, on common lengths.

    Returns ``{"length": float | None, "where": ...}``: ``within_grid`` with the length
    interpolated in log space between the last two grid points that bracket the change (ratio of
    times crossing 1); ``below_grid`` when already faster at the shortest length (``length`` is that
    length: the crossover is at most it); ``beyond_grid`` when not faster at the longest length
    (``length`` None); ``no_common_lengths`` when the two were never both measured.
    """
    if not lengths:
        return {"length": None, "where": "no_common_lengths"}
    ratios = [t / r for t, r in zip(times, reference)]
    start = better_from([ratio < 1.0 for ratio in ratios])
    if start is None:
        return {"length": None, "where": "beyond_grid", "checked_up_to": lengths[-1]}
    if start == 0:
        return {"length": float(lengths[0]), "where": "below_grid"}
    i = start - 1  # the last point at which it was not faster
    x0, x1 = math.log(lengths[i]), math.log(lengths[i + 1])
    y0, y1 = math.log(ratios[i]), math.log(ratios[i + 1])
    # log ratio is linear in log length between the two points; find where it reaches 0.
    return {"length": math.exp(x0 + (x1 - x0) * (0.0 - y0) / (y1 - y0)), "where": "within_grid"}
