"""Image (Long Range Arena): CIFAR-10 read as a sequence of 1024 grey pixels; 10 classes.

Grey is computed as LRA did, with ``tf.image.rgb_to_grayscale`` on uint8 images: in float32,
``grey = trunc(255.5 * (0.2989 R + 0.5870 G + 0.1140 B) / 255)``; token = grey + 1 (0 is padding).
Splits as LRA's input pipeline: train = the first 90% of CIFAR-10's train split (45000), val =
the last 10% (5000), test = the test split (10000).

Sources, tried in order: ``<data_dir>/cifar10`` (a ``DatasetDict.save_to_disk`` folder with
``train`` and ``test``), then the Hub ids ``uoft-cs/cifar10`` and ``cifar10`` in the local Hugging
Face cache, offline. Images may be stored encoded (the Hub's ``Image`` feature, PNG; decoded with
Pillow) or as uint8 arrays.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import datasets
import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset
from tqdm import tqdm

from tasks.base import TaskData, TaskError, TaskInfo
from tasks.cache import cached_splits
from tasks.lra.hub import local_or_hub
from tasks.splits import ArrowRows, classification_task

HUB_IDS = ("uoft-cs/cifar10", "cifar10")
IMAGE_COLUMNS = ("img", "image")
TF_GREY_WEIGHTS = np.array([0.2989, 0.5870, 0.1140], dtype=np.float32)
# Pillow modes of 8-bit images: greyscale and RGB are read as they are, the others become RGB
# (palettes expanded, alpha dropped, 1-bit to 0/255). Deeper modes (I;16, F) are refused, not clipped.
DIRECT_MODES = ("L", "RGB")
CONVERTED_MODES = ("1", "LA", "P", "PA", "RGBA", "RGBX")


class ImageError(ValueError):
    """Bytes or a file that Pillow cannot read as an 8-bit image."""


def decode_image(source: bytes | Path) -> np.ndarray:
    """Pixels of an encoded image (bytes or a file) as uint8: (H, W) for greyscale, (H, W, 3) otherwise."""
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
            if image.mode in CONVERTED_MODES:
                image = image.convert("RGB")
            elif image.mode not in DIRECT_MODES:
                raise ImageError(f"unsupported image mode {image.mode} (8-bit greyscale, RGB or palette expected)")
            return np.asarray(image)
    except OSError as exc:  # not an image (UnidentifiedImageError), or a truncated or corrupt one
        raise ImageError(f"unreadable image ({exc})") from exc


def pixel_features() -> datasets.Features:
    """Arrow schema of a cached image split: raw grey pixels (uint8, 1 byte each) and the label."""
    return datasets.Features({"pixels": datasets.Sequence(datasets.Value("uint8")), "label": datasets.Value("int64")})


class PixelClassification(Dataset):
    """Items ``{"input_ids": grey pixels + 1 (int64), "label": int64 scalar}`` of a cached split."""

    def __init__(self, split: datasets.Dataset) -> None:
        self.rows = ArrowRows(split, ("pixels", "label"))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows.get("pixels", index) + 1, "label": self.rows.get("label", index)}


def to_grey(rgb: np.ndarray) -> np.ndarray:
    """uint8 (..., 3) RGB -> uint8 grey, exactly as ``tf.image.rgb_to_grayscale`` rounds it."""
    luma = (rgb.astype(np.float32) / np.float32(255)) @ TF_GREY_WEIGHTS
    return np.minimum(luma * np.float32(255.5), 255).astype(np.uint8)


def _pixels(value: object) -> np.ndarray:
    """An image cell as uint8 RGB (H, W, 3): encoded bytes of the ``Image`` feature, or an array."""
    if isinstance(value, dict):  # Image(decode=False): {"bytes": ..., "path": ...}
        data = value.get("bytes") or Path(value["path"]).read_bytes()
        image = decode_image(data)
    else:
        image = np.asarray(value, dtype=np.uint8)
    if image.ndim == 2:
        return np.repeat(image[..., None], 3, axis=-1)
    return image[..., :3]  # drop alpha


def _grey_split(split: datasets.Dataset, column: str, desc: str) -> datasets.Dataset:
    pixels = []
    for value in tqdm(split[column], desc=desc, leave=False, mininterval=2):
        try:
            pixels.append(to_grey(_pixels(value)).reshape(-1))
        except ImageError as exc:
            raise TaskError(f"image: undecodable image in {desc}: {exc}") from exc
    return datasets.Dataset.from_dict({"pixels": pixels, "label": split["label"]}, features=pixel_features())


def load(config: Mapping, data_dir: Path) -> TaskData:
    """CIFAR-10 in grey, 1024 tokens per image, LRA's splits."""
    name = config.get("name", "image")
    if config.get("seq_len", 1024) != 1024:
        raise TaskError(f"task.seq_len={config['seq_len']!r}: a 32x32 image is 1024 tokens")
    raw, tag = local_or_hub(name, data_dir / "cifar10", HUB_IDS, ("train", "test"))
    column = next((c for c in IMAGE_COLUMNS if c in raw["train"].column_names), None)
    if column is None or "label" not in raw["train"].column_names:
        raise TaskError(f"{name}: expected columns 'label' and one of {IMAGE_COLUMNS}, got {raw['train'].column_names}")

    def build(work_dir: Path) -> datasets.DatasetDict:
        # Kept encoded: decode_image reads them (one mode conversion and one error, as for Pathfinder's files).
        train, test = (raw[s].cast_column(column, datasets.Image(decode=False))
                       if isinstance(raw[s].features[column], datasets.Image) else raw[s]
                       for s in ("train", "test"))
        cut = len(train) * 9 // 10
        return datasets.DatasetDict(
            train=_grey_split(train.select(range(cut)), column, "image: train"),
            val=_grey_split(train.select(range(cut, len(train))), column, "image: val"),
            test=_grey_split(test, column, "image: test"),
        )

    splits = cached_splits(data_dir / "cache" / f"{name}-{tag}-grey", build)
    info = TaskInfo(name=name, family="lra", seq_len=1024, vocab_size=257, num_classes=10,
                    extra={"source": tag, "image_size": 32})
    return classification_task(info, splits, PixelClassification)
