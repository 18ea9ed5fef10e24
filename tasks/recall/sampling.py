"""Vectorised draws without replacement, one row per example, for the recall generators."""

from __future__ import annotations

import numpy as np

SCORES_PER_CHUNK = 1 << 22  # random scores held at once by the weighted sampler (32 MiB of float64)


def sample_without_replacement(rng: np.random.Generator, weights: np.ndarray, num_rows: int, k: int) -> np.ndarray:
    """``(num_rows, k)`` indices into ``weights``, each row ``k`` distinct weighted draws in draw order.

    Efraimidis & Spirakis (2006): the ``k`` largest ``log(u) / w`` (u uniform) are a weighted
    sample without replacement, ordered as successive draws; vectorised, unlike a loop of
    ``np.random.choice`` calls.
    """
    out = np.empty((num_rows, k), dtype=np.int64)
    rows_per_chunk = max(1, SCORES_PER_CHUNK // len(weights))
    for start in range(0, num_rows, rows_per_chunk):
        rows = min(rows_per_chunk, num_rows - start)
        scores = np.log(rng.random((rows, len(weights)))) / weights
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        out[start:start + rows] = np.take_along_axis(top, order, axis=1)
    return out


def distinct_uniform(rng: np.random.Generator, n: int, num_rows: int, k: int) -> np.ndarray:
    """``(num_rows, k)`` integers in ``[0, n)``, distinct within a row, uniformly drawn.

    Redraws the rows that repeat a value: cheap while ``k * k`` is small next to ``n`` (MQAR's
    keys: a few dozen of thousands), where the weighted sampler would draw ``n`` scores per row.
    """
    if k * k > n:
        return sample_without_replacement(rng, np.ones(n), num_rows, k)
    out = rng.integers(0, n, size=(num_rows, k))
    while True:
        ordered = np.sort(out, axis=1)
        repeats = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if not repeats.any():
            return out
        out[repeats] = rng.integers(0, n, size=(int(repeats.sum()), k))
