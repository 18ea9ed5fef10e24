"""LRA text, retrieval, image, Pathfinder and Path-X: small files in each real format go through
the real loaders; generated Pathfinder images are checked against their own ground truth."""

from __future__ import annotations

import io
import zlib
from collections import deque
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from PIL import Image

import tasks
from tasks.base import TaskError
from tasks.lra import hub, pathfinder
from tasks.lra.image import ImageError, decode_image

# ---------------------------------------------------------------- PNG written with real filters


def _filter_row(kind: int, row: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    """The PNG specification's forward filters, written out per byte (independent of the decoder)."""
    out = []
    for i, x in enumerate(row.tolist()):
        a = row[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        a, b, c = int(a), int(b), int(c)
        if kind == 0:
            predictor = 0
        elif kind == 1:
            predictor = a
        elif kind == 2:
            predictor = b
        elif kind == 3:
            predictor = (a + b) // 2
        else:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            predictor = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        out.append((x - predictor) % 256)
    return np.array(out, dtype=np.uint8)


def png_with_filters(pixels: np.ndarray) -> bytes:
    """A PNG whose rows cycle through all five filter types, as Pillow's adaptive filtering mixes them."""
    height, width = pixels.shape[:2]
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    rows = pixels.reshape(height, width * channels)
    prev = np.zeros(width * channels, dtype=np.uint8)
    body = b""
    for y in range(height):
        body += bytes([y % 5]) + _filter_row(y % 5, rows[y], prev, channels).tobytes()
        prev = rows[y]
    colour = {1: 0, 3: 2, 4: 6}[channels]

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return len(payload).to_bytes(4, "big") + kind + payload + zlib.crc32(kind + payload).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, colour, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(body)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("shape", [(7, 5), (6, 9, 3), (5, 4, 4)])
def test_images_decode_through_every_row_filter(shape):
    pixels = np.random.default_rng(0).integers(0, 256, size=shape, dtype=np.uint8)
    expected = pixels[..., :3] if pixels.ndim == 3 else pixels  # RGBA: the alpha is dropped
    assert np.array_equal(decode_image(png_with_filters(pixels)), expected)


def pillow_png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_palette_and_grey_alpha_images_become_rgb(tmp_path):
    rng = np.random.default_rng(1)
    colours, indices = rng.integers(0, 256, (4, 3), dtype=np.uint8), rng.integers(0, 4, (6, 7), dtype=np.uint8)
    palette = Image.fromarray(indices)
    palette.putpalette(colours.tobytes())  # an L image with a palette is a P image
    assert palette.mode == "P"
    (tmp_path / "palette.png").write_bytes(pillow_png(palette))
    assert np.array_equal(decode_image(tmp_path / "palette.png"), colours[indices])  # read from a file too
    grey = colours[indices][..., 0]
    grey_alpha = Image.fromarray(np.stack([grey, 255 - grey], axis=-1))  # two channels: LA
    assert grey_alpha.mode == "LA"
    assert np.array_equal(decode_image(pillow_png(grey_alpha)), np.repeat(grey[..., None], 3, axis=-1))


def test_unreadable_and_deep_images_are_refused():
    with pytest.raises(ImageError, match="unreadable image"):
        decode_image(b"GIF89a")
    whole = pillow_png(Image.fromarray(np.random.default_rng(2).integers(0, 256, (16, 16), dtype=np.uint8)))
    with pytest.raises(ImageError, match="unreadable image"):
        decode_image(whole[: len(whole) // 2])  # truncated inside the pixel data
    deep = Image.fromarray(np.full((4, 4), 300, dtype=np.uint16))  # 16-bit grey: refused, not clipped to 255
    with pytest.raises(ImageError, match="unsupported image mode I"):
        decode_image(pillow_png(deep))


# ---------------------------------------------------------------- text (IMDb)


@pytest.fixture
def no_hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache, so tests never see (or fetch) a real dataset."""
    monkeypatch.setattr(hub.hub_constants, "HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    monkeypatch.setattr(hub.datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))


REVIEWS = ["A fine film.", "Dreadful, dull — zero stars", "Très bien!", "ok"]


def test_text_reads_a_saved_arrow_folder_as_bytes(tmp_path, no_hub_cache):
    raw = datasets.Dataset.from_dict({"text": REVIEWS, "label": [1, 0, 1, 0]})
    datasets.DatasetDict(train=raw, test=raw.select([1, 2, 3])).save_to_disk(str(tmp_path / "imdb"))
    data = tasks.load("text", {"name": "text", "seq_len": 8}, tmp_path)
    assert (data.info.vocab_size, data.info.num_classes, data.info.seq_len) == (257, 2, 8)
    assert len(data.train) == 4 and len(data.val) == len(data.test) == 3
    item = data.train[2]
    expected = [b + 1 for b in "Très bien!".encode()[:8]]  # the two bytes of è count twice
    assert item["input_ids"].dtype == torch.int64 and item["input_ids"].tolist() == expected
    assert item["label"].dtype == torch.int64 and item["label"].ndim == 0 and int(item["label"]) == 1
    assert data.test[2]["input_ids"].tolist() == [ord("o") + 1, ord("k") + 1]
    # Majority of train is a tie (2-2): label 0 wins ties; test holds labels 0, 1, 0.
    assert data.baseline == pytest.approx(2 / 3)


def test_text_without_data_names_what_it_tried(tmp_path, no_hub_cache):
    with pytest.raises(TaskError) as error:
        tasks.load("text", {"name": "text", "seq_len": 4096}, tmp_path)
    message = str(error.value)
    assert "text" in message and str(tmp_path / "imdb") in message and "stanfordnlp/imdb" in message


# ---------------------------------------------------------------- retrieval (AAN pairs)


def _write_aan(tsv_dir: Path, rows: dict[str, list[str]]) -> None:
    tsv_dir.mkdir(parents=True)
    for split, lines in rows.items():
        (tsv_dir / f"new_aan_pairs.{split}.tsv").write_text("".join(line + "\n" for line in lines))


def test_retrieval_reads_lra_tsvs(tmp_path):
    tsv = tmp_path / "lra_release" / "tsv_data"
    _write_aan(
        tsv,
        {
            "train": ["1\tP01-1\tP02-2\tb'Parsing \"with\" graphs'\tb'Graphs'", "0.0\tA\tB\tabc\tdefgh"],
            "eval": ["0\tC\tD\tx\ty"],
            "test": ["1.0\tE\tF\tlonger text one\tshort", "0\tG\tH\tq\tr"],
        },
    )
    data = tasks.load("retrieval", {"name": "retrieval", "seq_len": 6}, tmp_path)
    assert data.info.extra["pair"] is True and data.info.seq_len == 6
    assert (len(data.train), len(data.val), len(data.test)) == (2, 1, 2)
    first = data.train[0]
    # Quotes are literal (no CSV quoting) and each document is cut at seq_len bytes.
    assert first["input_ids"].tolist() == [b + 1 for b in b"b'Pars"]
    assert first["input_ids_2"].tolist() == [b + 1 for b in b"b'Grap"]
    assert int(first["label"]) == 1 and int(data.train[1]["label"]) == 0 and int(data.test[0]["label"]) == 1
    assert data.test[1]["input_ids_2"].tolist() == [ord("r") + 1]
    assert data.baseline == 0.5  # train tie -> predicts 0; test labels 1, 0


def test_retrieval_rejects_bad_rows_and_missing_files(tmp_path):
    with pytest.raises(TaskError, match="new_aan_pairs.train.tsv"):
        tasks.load("retrieval", {"name": "retrieval", "seq_len": 4000}, tmp_path)
    _write_aan(tmp_path / "lra_release" / "tsv_data",
               {"train": ["1\ta\tb\tonly four"], "eval": ["0\tc\td\tx\ty"], "test": ["0\te\tf\tx\ty"]})
    with pytest.raises(TaskError, match=r"train.tsv:1: 4 tab-separated fields"):
        tasks.load("retrieval", {"name": "retrieval", "seq_len": 4000}, tmp_path)


# ---------------------------------------------------------------- image (CIFAR-10 in grey)


def tf_grey(rgb: np.ndarray) -> np.ndarray:
    """tf.image.rgb_to_grayscale on uint8, step by step: to [0, 1], weigh, times 255.5, truncate."""
    scaled = rgb.astype(np.float32) * np.float32(1 / 255)
    luma = (scaled[..., 0] * np.float32(0.2989) + scaled[..., 1] * np.float32(0.5870)
            + scaled[..., 2] * np.float32(0.1140))
    return (luma * np.float32(255.5)).astype(np.uint8)


def _cifar_folder(path: Path, images: np.ndarray, labels: list[int], encoded: bool) -> None:
    if encoded:  # the Hub's layout: an Image feature holding PNG bytes
        cells = [{"bytes": png_with_filters(image), "path": None} for image in images]
        feature = {"bytes": datasets.Value("binary"), "path": datasets.Value("string")}
        split = datasets.Dataset.from_dict(
            {"img": cells, "label": labels},
            features=datasets.Features({"img": feature, "label": datasets.Value("int64")}))
        split = split.cast_column("img", datasets.Image())
    else:
        split = datasets.Dataset.from_dict({"image": images.tolist(), "label": labels})
    datasets.DatasetDict(train=split, test=split.select([0, 1])).save_to_disk(str(path))


@pytest.mark.parametrize("encoded", [True, False])
def test_image_reads_cifar_as_lra_grey(tmp_path, no_hub_cache, encoded):
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, size=(10, 32, 32, 3), dtype=np.uint8)
    images[0, 0, 0], images[0, 0, 1], images[0, 0, 2] = (255, 255, 255), (255, 0, 0), (0, 0, 0)
    labels = [3, 3, 3, 1, 2, 5, 3, 7, 9, 0]
    _cifar_folder(tmp_path / "cifar10", images, labels, encoded)
    data = tasks.load("image", {"name": "image", "seq_len": 1024}, tmp_path)
    assert (len(data.train), len(data.val), len(data.test)) == (9, 1, 2)  # LRA: train[:90%], train[90%:], test
    assert (data.info.num_classes, data.info.vocab_size) == (10, 257)
    first = data.train[0]["input_ids"]
    assert first.shape == (1024,) and first.dtype == torch.int64
    assert first[:3].tolist() == [256, 77, 1]  # white -> 255, red -> trunc(255.5 * 0.2989) = 76, black -> 0; +1
    assert torch.equal(first, torch.from_numpy(tf_grey(images[0]).reshape(-1).astype(np.int64) + 1))
    assert torch.equal(data.val[0]["input_ids"], torch.from_numpy(tf_grey(images[9]).reshape(-1).astype(np.int64) + 1))
    assert int(data.val[0]["label"]) == 0
    assert data.baseline == 1.0  # train's majority is 3, and the test split holds two 3s


def test_image_rejects_a_wrong_length(tmp_path):
    with pytest.raises(TaskError, match="1024"):
        tasks.load("image", {"name": "image", "seq_len": 512}, tmp_path)


# ---------------------------------------------------------------- Pathfinder: the release layout


def test_pathfinder_reads_the_release_layout(tmp_path):
    level = tmp_path / "lra_release" / "pathfinder32" / "curv_contour_length_14"
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(11, 32, 32), dtype=np.uint8)
    labels = [1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0]
    lines = {0: [], 1: []}
    for i, (image, label) in enumerate(zip(images, labels)):
        batch = i // 6  # two metadata files, read in numeric order
        folder = level / "imgs" / str(batch)
        folder.mkdir(parents=True, exist_ok=True)
        data = b"" if i == 4 else png_with_filters(image)  # the release has an empty file; LRA skips it
        (folder / f"sample_{i}.png").write_bytes(data)
        lines[batch].append(f"imgs/{batch} sample_{i}.png {i} {label} 1.0 14 4 2 0.5 1 1")
    (level / "metadata").mkdir()
    for batch, batch_lines in lines.items():
        (level / "metadata" / f"{batch}.npy").write_text("\n".join(batch_lines) + "\n")
    data = tasks.load("pathfinder", {"name": "pathfinder", "seq_len": 1024, "resolution": 32, "source": "local"},
                      tmp_path)
    kept = [i for i in range(11) if i != 4]
    assert (len(data.train), len(data.val), len(data.test)) == (8, 1, 1)  # 80/10/10 in order
    for split, indices in ((data.train, kept[:8]), (data.val, kept[8:9]), (data.test, kept[9:])):
        for item, i in zip(split, indices):
            assert torch.equal(item["input_ids"], torch.from_numpy(images[i].reshape(-1).astype(np.int64) + 1))
            assert int(item["label"]) == labels[i]
    assert data.info.extra["regenerated"] is False and data.info.seq_len == 1024


def test_pathfinder_errors_name_the_bad_setting(tmp_path):
    with pytest.raises(TaskError, match="pathx: no LRA release at .*pathfinder128"):
        tasks.load("pathx", {"name": "pathx", "seq_len": 16384, "resolution": 128, "source": "local"}, tmp_path)
    with pytest.raises(TaskError, match="resolution=64"):
        tasks.load("pathfinder", {"name": "pathfinder", "resolution": 64}, tmp_path)
    with pytest.raises(TaskError, match="seq_len=1000"):
        tasks.load("pathfinder", {"name": "pathfinder", "resolution": 32, "seq_len": 1000}, tmp_path)
    with pytest.raises(TaskError, match="source='web'"):
        tasks.load("pathfinder", {"name": "pathfinder", "resolution": 32, "source": "web"}, tmp_path)


# ---------------------------------------------------------------- Pathfinder: generated


def test_generated_pathfinder_is_balanced_seeded_and_cached(tmp_path):
    config = {"name": "pathfinder", "seq_len": 1024, "resolution": 32, "source": "generate",
              "num_train": 8, "num_val": 4, "num_test": 4, "data_seed": 5}
    data = tasks.load("pathfinder", config, tmp_path)
    for split, size in ((data.train, 8), (data.val, 4), (data.test, 4)):
        labels = [int(item["label"]) for item in split]
        assert len(labels) == size and sum(labels) == size // 2
    ids = torch.stack([item["input_ids"] for item in data.train])
    assert ids.shape == (8, 1024) and int(ids.min()) >= 1 and int(ids.max()) <= 256
    assert data.info.extra["regenerated"] is True and data.baseline == 0.5
    # The images are the generator's own, written as release PNGs and read back.
    expected = pathfinder.make_example(32, 1, np.random.default_rng([5, 1])).image
    assert torch.equal(data.train[1]["input_ids"], torch.from_numpy(expected.reshape(-1).astype(np.int64) + 1))
    again = tasks.load("pathfinder", config, tmp_path)  # from the cache
    assert torch.equal(again.test[3]["input_ids"], data.test[3]["input_ids"])


def _rasterise(polyline: np.ndarray, scale: int, size: int) -> set[tuple[int, int]]:
    """Cells of a (size*scale)^2 grid that a polyline passes through, sampled densely."""
    cells = set()
    for a, b in zip(polyline[:-1], polyline[1:]):
        for t in np.linspace(0, 1, int(np.linalg.norm(b - a) * scale * 4) + 2):
            y, x = np.floor((a + t * (b - a)) * scale).astype(int)
            cells.add((int(y), int(x)))
    return cells


def _components(cells: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Label the 8-connected components of a set of grid cells (breadth-first search)."""
    label, component = {}, 0
    for seed in cells:
        if seed in label:
            continue
        label[seed], queue = component, deque([seed])
        while queue:
            y, x = queue.popleft()
            for neighbour in ((y + dy, x + dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)):
                if neighbour in cells and neighbour not in label:
                    label[neighbour] = component
                    queue.append(neighbour)
        component += 1
    return label


def _min_distance(path_a: np.ndarray, path_b: np.ndarray) -> float:
    """Smallest distance between two polylines, from dense samples of both."""
    def samples(path):
        return np.concatenate([a + np.linspace(0, 1, 20)[:, None] * (b - a) for a, b in zip(path[:-1], path[1:])])
    a, b = samples(path_a), samples(path_b)
    return float(np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1)).min())


@pytest.mark.parametrize("resolution, count", [(32, 10), (128, 4)])
def test_generated_markers_and_connectivity(resolution, count):
    g = pathfinder.GEOMETRIES[resolution]
    scale = 4  # a finer grid than the image, so distinct paths never share or touch a cell
    for index in range(count):
        label = index % 2
        example = pathfinder.make_example(resolution, label, np.random.default_rng([11, index]))
        assert example.label == label and example.image.shape == (resolution, resolution)
        targets = example.paths[:2]
        assert all(len(path) == 3 * g.contour_length - 1 for path in targets)
        # The markers sit at the start of one target and the end of one target, drawn bright.
        origin, terminal = example.marker_paths
        assert (np.allclose(example.markers[0], targets[origin][0])
                and np.allclose(example.markers[1], targets[terminal][-1]))
        for marker in example.markers:
            assert example.image[tuple(np.round(marker).astype(int))] >= 200
        # Every paddle is drawn: some pixel next to its midpoint is bright (a thin paddle may
        # pass between pixel centres, so the brightest of the 3x3 around it counts).
        padded = np.pad(example.image, 1)
        for paddles in example.paddles:
            for y, x in np.round(paddles.mean(axis=1)).astype(int):
                assert padded[y : y + 3, x : x + 3].max() >= 80
        # Paths keep their clearance from each other, so the gaps never join two paths.
        clearance = g.paddle_thickness + example.margin
        for i in range(len(example.paths)):
            for j in range(i + 1, len(example.paths)):
                assert _min_distance(example.paths[i], example.paths[j]) >= clearance - 1e-6
        # Bridging the gaps, the two targets are two separate components; the label says
        # whether both markers fall in the same one.
        cells = {i: _rasterise(path, scale, resolution) for i, path in enumerate(targets)}
        components = _components(cells[0] | cells[1])
        assert len(set(components.values())) == 2
        marker_components = [components[tuple(np.floor(m * scale).astype(int))] for m in example.markers]
        assert (marker_components[0] == marker_components[1]) == (label == 1)


def test_generation_is_deterministic_per_seed():
    a = pathfinder.make_example(32, 0, np.random.default_rng([7, 3])).image
    b = pathfinder.make_example(32, 0, np.random.default_rng([7, 3])).image
    c = pathfinder.make_example(32, 0, np.random.default_rng([8, 3])).image
    assert np.array_equal(a, b) and not np.array_equal(a, c)


# ---------------------------------------------------------------- registry and published numbers


def test_lra_tasks_are_registered_with_configs():
    conf = Path(__file__).resolve().parents[1] / "conf" / "task"
    for name in ("text", "retrieval", "image", "pathfinder", "pathx"):
        assert name in tasks.available()
        assert f"name: {name}\n" in (conf / f"{name}.yaml").read_text()
