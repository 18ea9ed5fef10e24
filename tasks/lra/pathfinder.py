"""Pathfinder and Path-X (Long Range Arena): are the two circles joined by one dashed path?

Images are read pixel by pixel as a sequence (32x32 -> 1024 tokens, 128x128 -> 16384 tokens), token
= grey value + 1 (0 is padding). Two sources:

- ``source: local`` reads the LRA release, ``<data_dir>/lra_release/pathfinder{32,128}/
  curv_contour_length_14/`` (the "hard" level LRA reports): ``metadata/<n>.npy`` are text files,
  one line per image, ``imgs/<n> sample_<i>.png <i> <label> ...``; images are 8-bit PNGs. Empty
  image files are skipped as LRA's pipeline did; splits are the first 80% / next 10% / last 10%
  of the images in metadata order (LRA's ``[:80%]``, ``[80%:90%]``, ``[90%:]``).
- ``source: generate`` draws images with a clean reimplementation of the contour-integration
  generator (Linsley et al. 2018, drewlinsley/pathfinder ``snakes2.py``) using the parameters LRA
  lists for each resolution, writes them in the release layout and reads them back with the same
  reader. It is a regenerated benchmark, not pixel-identical to LRA's: the paddles are drawn with
  box-filtered distance coverage instead of 2x supersampling and Lanczos resizing.

The generator's scene: two target paths start ``seed_distance`` apart, each a chain of
``contour_length`` short paddles separated by gaps; each turn is drawn with density
``cos(continuity * turn)^2`` (zero beyond ``pi / (2 * continuity)``); short distractor paths fill
the rest; no path comes nearer than ``thickness + margin`` to another. One circle marks the start
of a target path, the other the end of the same path (label 1) or of the other one (label 0).
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
from PIL import Image
from tqdm import tqdm

from tasks.base import TaskData, TaskError, TaskInfo
from tasks.cache import cached_splits, files_fingerprint
from tasks.lra.image import ImageError, PixelClassification, decode_image, pixel_features
from tasks.splits import classification_task

LEVEL = "curv_contour_length_14"  # the "hard" split, the one LRA reports
SOURCES = ("generate", "local")


@dataclass(frozen=True)
class Geometry:
    """The generator's parameters at one resolution (lengths in pixels)."""

    size: int
    padding: float  # paths keep this far inside the border
    paddle_length: float
    paddle_thickness: float
    margins: tuple[int, ...]  # half the gap between paddles; one value drawn per image
    continuity: float  # larger: straighter paths
    seed_distance: float  # distance between the starts of the two target paths
    marker_radius: float
    contour_length: int  # paddles per target path
    distractor_length: int  # paddles per distractor path
    num_distractors: int
    contrast: float  # paddle brightness (LRA's snake contrast x paddle contrast)


# LRA's settings, from the docstrings of lra_benchmarks/data/pathfinder.py (Pathfinder32 and
# Pathfinder128) with snakes2_wrapper.py's defaults for what they leave out (paddle_length 5 at
# 128). Distractor counts follow Python 2's integer division, as the generator ran then:
# 32: distractor_length = 14 // 3 = 4, 20 // 4 = 5 distractors; 128: 35 // 4 = 8 distractors.
GEOMETRIES = {
    32: Geometry(32, 1.0, 2.0, 0.5, (1,), 1.0, 7.0, 1.5, 14, 4, 5, 2.0 * 0.75),
    128: Geometry(128, 1.0, 5.0, 1.5, (2, 3), 1.8, 20.0, 3.0, 14, 4, 8, 0.9),
}


@dataclass
class Example:
    """One generated image with the ground truth needed to check it independently."""

    image: np.ndarray  # uint8 (size, size)
    label: int  # 1 when both markers sit on the same path
    margin: int  # half the gap between paddles in this image
    paths: list[np.ndarray]  # per path, (n_points, 2) polyline (y, x): paddle, pivot, paddle, ...
    paddles: list[np.ndarray]  # per path, (n_paddles, 2, 2): the drawn segments
    markers: np.ndarray  # (2, 2) marker centres (y, x)
    marker_paths: tuple[int, int]  # the path each marker sits on (0 and 1 are the targets)


def _squared_distance(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Squared distances (..., M) from points (..., 2) to the M segments starts[m] -> ends[m]."""
    dy, dx = (ends - starts).T
    inverse_length2 = 1.0 / np.maximum(dy * dy + dx * dx, 1e-12)
    py = points[..., 0, None] - starts[:, 0]
    px = points[..., 1, None] - starts[:, 1]
    t = np.clip((py * dy + px * dx) * inverse_length2, 0.0, 1.0)
    ey, ex = py - t * dy, px - t * dx
    return ey * ey + ex * ex


def _cross(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]


def _segment_distance2(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """Exact squared distances (K, M) between segments a0[k]->a1[k] and b0[m]->b1[m]: zero where
    they cross, else the nearest of the four endpoint-to-segment distances."""
    ends = np.minimum(_squared_distance(a0, b0, b1), _squared_distance(a1, b0, b1))
    ends = np.minimum(ends, np.minimum(_squared_distance(b0, a0, a1), _squared_distance(b1, a0, a1)).T)
    da, db = (a1 - a0)[:, None], (b1 - b0)[None]
    side_b0 = _cross(da, b0[None] - a0[:, None])
    side_b1 = _cross(da, b1[None] - a0[:, None])
    side_a0 = _cross(db, a0[:, None] - b0[None])
    side_a1 = _cross(db, a1[:, None] - b0[None])
    crossing = (side_b0 * side_b1 < 0) & (side_a0 * side_a1 < 0)
    return np.where(crossing, 0.0, ends)


def _unit(angle: np.ndarray | float) -> np.ndarray:
    """Unit vectors (..., 2) in (y, x) order, like image rows and columns."""
    return np.stack([np.sin(angle), np.cos(angle)], axis=-1)


class _Scene:
    """Paths grown paddle by paddle; every placed piece is an obstacle to later ones.

    A path's polyline runs start, end of paddle 0, pivot, start of paddle 1, end, pivot, ...: the
    gap after each paddle bends at its pivot, half a gap (``margin``) from each paddle. The trailing
    half gap is placed with its paddle, so nothing else can take the room where the path goes on.
    """

    def __init__(self, geometry: Geometry, margin: int, rng: np.random.Generator, capacity: int = 512) -> None:
        self.g, self.margin, self.rng = geometry, margin, rng
        self.clearance = geometry.paddle_thickness + margin
        limit = np.pi / (2 * geometry.continuity)
        # Like the original's one candidate per pixel of arc: a handful of turns within the limit,
        # weighted cos^2 (the weight vanishes at the limits, so they are left out).
        self.turns = np.linspace(-limit, limit, 19)[1:-1]
        self.turn_weights = np.cos(self.turns * geometry.continuity) ** 2
        self.starts = np.empty((capacity, 2))  # obstacle segments, the first ``count`` in use
        self.ends = np.empty((capacity, 2))
        self.owner = np.empty(capacity, dtype=int)
        self.count = 0
        self.paths: list[list[np.ndarray]] = []  # polyline points per path, ending at a pivot
        self.headings: list[float] = []
        self.newest: list[np.ndarray] = []  # obstacle indices of each path's newest paddle and half gap

    def _add(self, points: np.ndarray, path: int) -> np.ndarray:
        new = np.arange(self.count, self.count + len(points) - 1)
        if new[-1] >= len(self.starts):
            raise RuntimeError("pathfinder scene: obstacle capacity exceeded")
        self.starts[new], self.ends[new], self.owner[new] = points[:-1], points[1:], path
        self.count += len(new)
        return new

    def _clear(self, origin: np.ndarray, units: np.ndarray, length: float, path: int | None) -> np.ndarray:
        """Which straight pieces from ``origin`` along ``units`` (K, 2), ``length`` long, stay
        inside the border and at least the clearance away from every obstacle but ``path``'s
        newest paddle and half gap (which they continue)."""
        ends = origin + length * units  # (K, 2)
        lo, hi = self.g.padding, self.g.size - 1 - self.g.padding
        inside = ((ends >= lo) & (ends <= hi)).all(-1) & ((origin >= lo) & (origin <= hi)).all()
        starts_o, ends_o = self.starts[: self.count], self.ends[: self.count]
        # Only obstacles within reach of the pieces matter: a cheap test against one disk first.
        keep = _squared_distance(origin, starts_o, ends_o) < (length + self.clearance) ** 2
        if path is not None:
            keep[self.newest[path]] = False
        if not keep.any():
            return inside
        origins = np.broadcast_to(origin, ends.shape)
        distance2 = _segment_distance2(origins, ends, starts_o[keep], ends_o[keep])
        return inside & (distance2.min(axis=1) >= self.clearance**2)

    def seed(self, start: np.ndarray, heading: float) -> bool:
        """Start a new path with one paddle at ``start``; False when it does not fit."""
        unit = _unit(heading)
        if not self._clear(start, unit[None], self.g.paddle_length + self.margin, None)[0]:
            return False
        end = start + self.g.paddle_length * unit
        pivot = end + self.margin * unit
        self.paths.append([start, end, pivot])
        self.headings.append(heading)
        self.newest.append(self._add(np.stack([start, end, pivot]), len(self.paths) - 1))
        return True

    def extend(self, path: int) -> bool:
        """Add one paddle to ``path`` after its gap, turned at random; False at a dead end.

        The new half gap, paddle and trailing half gap lie on one line from the pivot.
        """
        headings = self.headings[path] + self.turns
        units = _unit(headings)
        pivot = self.paths[path][-1]
        weights = self.turn_weights * self._clear(pivot, units, self.g.paddle_length + 2 * self.margin, path)
        total = weights.sum()
        if total == 0:
            return False
        choice = min(int(np.searchsorted(np.cumsum(weights), self.rng.random() * total, side="right")),
                     len(weights) - 1)
        unit = units[choice]
        start = pivot + self.margin * unit
        end = start + self.g.paddle_length * unit
        next_pivot = end + self.margin * unit
        self.paths[path] += [start, end, next_pivot]
        self.headings[path] = float(headings[choice])
        self.newest[path] = self._add(np.stack([pivot, start, end, next_pivot]), path)[1:]
        return True


def _grow_targets(g: Geometry, margin: int, rng: np.random.Generator, attempts: int = 200) -> _Scene:
    """A scene holding the two full-length target paths, side by side at their starts."""
    for _ in range(attempts):
        scene = _Scene(g, margin, rng)
        lo, hi = 2 * g.seed_distance, g.size - 1 - 2 * g.seed_distance
        first = rng.uniform(lo, hi, size=2)
        second = first + g.seed_distance * _unit(rng.uniform(-np.pi, np.pi))
        if not (scene.seed(first, rng.uniform(-np.pi, np.pi)) and scene.seed(second, rng.uniform(-np.pi, np.pi))):
            continue
        # Both grow in turns, as in the original, so neither crowds the other out.
        if all(scene.extend(path) for _ in range(g.contour_length - 1) for path in (0, 1)):
            return scene
    raise RuntimeError(f"could not fit two paths of {g.contour_length} paddles in {attempts} attempts")


def _add_distractors(scene: _Scene, attempts: int = 20) -> None:
    """Short paths wherever they fit; some may be left out in a crowded image, as in the original."""
    g, rng = scene.g, scene.rng
    for _ in range(g.num_distractors):
        for _ in range(attempts):
            start = rng.uniform(g.padding, g.size - 1 - g.padding, size=2)
            if not scene.seed(start, rng.uniform(-np.pi, np.pi)):
                continue
            path = len(scene.paths) - 1
            if all(scene.extend(path) for _ in range(g.distractor_length - 1)):
                break
            _drop_last_path(scene)


def _drop_last_path(scene: _Scene) -> None:
    """Forget the newest path (a distractor that did not fit); its obstacles are the last added."""
    path = len(scene.paths) - 1
    scene.count = int(np.argmax(scene.owner[: scene.count] == path))
    del scene.paths[path], scene.headings[path], scene.newest[path]


def _coverage(distance: np.ndarray, half_width: float) -> np.ndarray:
    """Share of a pixel covered by a stroke of that half width (a one-pixel box filter)."""
    return np.clip(half_width + 0.5 - distance, 0.0, 1.0)


def _render(g: Geometry, paddles: np.ndarray, markers: np.ndarray) -> np.ndarray:
    """Grey image of the paddles (P, 2, 2) and the two markers. A paddle touches only a small
    window of pixels, so all windows are evaluated at once and merged with a maximum."""
    width = int(np.ceil(g.paddle_length + g.paddle_thickness)) + 4
    corner = np.floor(paddles.min(axis=1) - g.paddle_thickness / 2 - 1).astype(int)  # (P, 2)
    offsets = np.stack(np.meshgrid(np.arange(width), np.arange(width), indexing="ij"), -1).reshape(-1, 2)
    pixels = corner[:, None, :] + offsets[None]  # (P, W*W, 2)
    start, direction = paddles[:, None, 0], paddles[:, None, 1] - paddles[:, None, 0]
    t = ((pixels - start) * direction).sum(-1) / np.maximum((direction**2).sum(-1), 1e-12)
    nearest = start + np.clip(t, 0.0, 1.0)[..., None] * direction
    distance = np.sqrt(((pixels - nearest) ** 2).sum(-1))
    value = np.minimum(1.0, g.contrast * _coverage(distance, g.paddle_thickness / 2))
    inside = ((pixels >= 0) & (pixels < g.size)).all(-1)
    image = np.zeros((g.size, g.size))
    np.maximum.at(image, (pixels[..., 0][inside], pixels[..., 1][inside]), value[inside])
    grid = np.stack(np.mgrid[0 : g.size, 0 : g.size], axis=-1).astype(float)
    marker_distance = np.sqrt(((grid[:, :, None] - markers) ** 2).sum(-1)).min(-1)
    image = np.maximum(image, _coverage(marker_distance, g.marker_radius))
    return np.round(255 * image).astype(np.uint8)


def make_example(resolution: int, label: int, rng: np.random.Generator) -> Example:
    """Draw one image of the given label at 32 (Pathfinder) or 128 (Path-X) pixels."""
    g = GEOMETRIES[resolution]
    margin = int(rng.choice(g.margins))
    scene = _grow_targets(g, margin, rng)
    _add_distractors(scene)
    paths = [np.stack(points[:-1]) for points in scene.paths]  # without the trailing pivot
    origin = int(rng.integers(2))
    terminal = origin if label == 1 else 1 - origin
    markers = np.stack([paths[origin][0], paths[terminal][-1]])
    paddles = [np.stack([path[0::3], path[1::3]], axis=1) for path in paths]
    image = _render(g, np.concatenate(paddles), markers)
    return Example(image, label, margin, paths, paddles, markers, (origin, terminal))


def _draw_png(resolution: int, seed: int, index: int) -> tuple[bytes, int, int]:
    """Image ``index`` of a generated set: PNG bytes, label (``index % 2``) and margin."""
    example = make_example(resolution, index % 2, np.random.default_rng([seed, index]))
    png = io.BytesIO()
    Image.fromarray(example.image).save(png, format="PNG")
    return png.getvalue(), example.label, example.margin


def generate(out_dir: Path, num_images: int, resolution: int, seed: int, workers: int | None = None) -> None:
    """Write ``num_images`` images in the LRA release layout under ``out_dir`` (one batch, 0).

    Image i is drawn from its own seed ``(seed, i)`` with label ``i % 2``, so labels are balanced,
    a larger set extends a smaller one, and the result does not depend on ``workers`` (processes;
    default: one per available core).
    """
    g = GEOMETRIES[resolution]
    (out_dir / "imgs" / "0").mkdir(parents=True, exist_ok=True)
    (out_dir / "metadata").mkdir(parents=True, exist_ok=True)
    workers = workers or len(os.sched_getaffinity(0))
    draw = functools.partial(_draw_png, resolution, seed)
    with ProcessPoolExecutor(workers) if workers > 1 and num_images >= 64 else nullcontext() as pool:
        drawn = pool.map(draw, range(num_images), chunksize=16) if pool else map(draw, range(num_images))
        lines = []
        for i, (png, label, margin) in enumerate(tqdm(drawn, total=num_images,
                                                      desc=f"pathfinder{resolution}: generating", leave=False,
                                                      mininterval=2)):
            (out_dir / "imgs" / "0" / f"sample_{i}.png").write_bytes(png)
            # The original generator's fields: subpath, file, index, label, continuity, contour
            # length, distractor length, paddle length, thickness, margin, number of contrasts.
            lines.append(
                f"imgs/0 sample_{i}.png {i} {label} {g.continuity} {g.contour_length} "
                f"{g.distractor_length} {g.paddle_length} {g.paddle_thickness} {margin} 1"
            )
    (out_dir / "metadata" / "0.npy").write_text("\n".join(lines) + "\n")


def read_release(level_dir: Path) -> list[tuple[Path, int]]:
    """``(image path, label)`` of every non-empty image listed in ``level_dir/metadata/*.npy``."""
    metadata = sorted((level_dir / "metadata").glob("*.npy"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
    samples = []
    for meta in metadata:
        for number, line in enumerate(meta.read_text().splitlines(), start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 4 or fields[3] not in ("0", "1"):
                raise TaskError(f"{meta}:{number}: expected '<dir> <file> <index> <label 0|1> ...', got {line!r}")
            image = level_dir / fields[0] / fields[1]
            if image.is_file() and image.stat().st_size > 0:  # LRA drops the release's empty files
                samples.append((image, int(fields[3])))
    return samples


def _split(samples: list[tuple[Path, int]], resolution: int, sizes: tuple[int, int, int]) -> datasets.DatasetDict:
    splits, start = {}, 0
    for name, size in zip(("train", "val", "test"), sizes):
        pixels, labels = [], []
        for path, label in tqdm(samples[start : start + size], desc=f"pathfinder{resolution}: {name}", leave=False,
                                mininterval=2):
            try:
                image = decode_image(path)
            except ImageError as exc:
                raise TaskError(f"{path}: {exc}") from exc
            if image.ndim == 3:  # LRA read these as greyscale; the release's are already
                image = image[..., 0]
            if image.shape != (resolution, resolution):
                raise TaskError(f"{path}: image of {image.shape}, expected {resolution}x{resolution}")
            pixels.append(image.reshape(-1))
            labels.append(label)
        splits[name] = datasets.Dataset.from_dict({"pixels": pixels, "label": labels}, features=pixel_features())
        start += size
    return datasets.DatasetDict(splits)


def _count(config: Mapping, key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or value < 1:
        raise TaskError(f"task.{key}={value!r}: expected a positive number of examples")
    return value


def load(config: Mapping, data_dir: Path) -> TaskData:
    """Pathfinder (``resolution: 32``) or Path-X (``resolution: 128``), generated or from LRA's release."""
    name, resolution, source = config["name"], config.get("resolution"), config.get("source", "generate")
    if resolution not in GEOMETRIES:
        raise TaskError(f"task.resolution={resolution!r}; valid: {', '.join(map(str, GEOMETRIES))}")
    seq_len = resolution * resolution
    if config.get("seq_len", seq_len) != seq_len:
        raise TaskError(f"task.seq_len={config['seq_len']!r}: a {resolution}x{resolution} image is {seq_len} tokens")
    if source == "generate":
        sizes = (_count(config, "num_train"), _count(config, "num_val"), _count(config, "num_test"))
        seed = int(config.get("data_seed", 0))
        key = f"{name}-generated-r{resolution}-seed{seed}-n{sizes[0]}-{sizes[1]}-{sizes[2]}"

        def build(work_dir: Path) -> datasets.DatasetDict:
            level_dir = work_dir / f"pathfinder{resolution}" / LEVEL
            generate(level_dir, sum(sizes), resolution, seed)
            return _split(read_release(level_dir), resolution, sizes)

    elif source == "local":
        level_dir = data_dir / "lra_release" / f"pathfinder{resolution}" / LEVEL
        metadata = sorted((level_dir / "metadata").glob("*.npy"))
        if not metadata:
            raise TaskError(
                f"{name}: no LRA release at {level_dir} (expected metadata/*.npy and imgs/); download "
                f"lra_release.gz from the Long Range Arena repository (google-research/long-range-arena) "
                f"and unpack it under {data_dir}, or use task.source=generate"
            )
        key = f"{name}-release-r{resolution}-{files_fingerprint(metadata)}"

        def build(work_dir: Path) -> datasets.DatasetDict:
            samples = read_release(level_dir)
            val = test = len(samples) // 10
            return _split(samples, resolution, (len(samples) - val - test, val, test))

    else:
        raise TaskError(f"task.source={source!r}; valid: {', '.join(SOURCES)}")
    splits = cached_splits(data_dir / "cache" / key, build)
    info = TaskInfo(
        name=name,
        family="lra",
        seq_len=seq_len,
        vocab_size=257,
        num_classes=2,
        extra={"image_size": resolution, "level": LEVEL, "source": source, "regenerated": source == "generate"},
    )
    return classification_task(info, splits, PixelClassification)


__all__ = ["GEOMETRIES", "Example", "generate", "load", "make_example", "read_release"]
