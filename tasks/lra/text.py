"""Text (Long Range Arena): IMDb sentiment from the raw UTF-8 bytes of a review; 2 classes.

Token = byte + 1 (0 is padding), the first ``seq_len`` bytes (LRA: 4K). Splits as LRA's input
pipeline: train = IMDb train (25000), and IMDb test (25000) serves as both val and test, because
IMDb has no validation split (LRA, lra_benchmarks/text_classification/input_pipeline.py).

Sources, tried in order: ``<data_dir>/imdb`` (a ``DatasetDict.save_to_disk`` folder with ``train``
and ``test``, columns ``text`` and ``label``), then the Hub ids ``stanfordnlp/imdb`` and ``imdb``
in the local Hugging Face cache, offline.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import datasets

from tasks.base import TaskData, TaskError, TaskInfo
from tasks.cache import cached_splits
from tasks.lra.hub import local_or_hub
from tasks.splits import SequenceClassification, classification_task

HUB_IDS = ("stanfordnlp/imdb", "imdb")


def byte_tokens(data: bytes, seq_len: int) -> list[int]:
    """The first ``seq_len`` bytes as tokens, each shifted up by one so that 0 stays padding."""
    return [byte + 1 for byte in data[:seq_len]]


def token_features(*columns: str) -> datasets.Features:
    """Arrow schema of cached byte-token columns (int16 holds 1..256) and the label."""
    features = {column: datasets.Sequence(datasets.Value("int16")) for column in columns}
    return datasets.Features({**features, "label": datasets.Value("int64")})


def sequence_length(config: Mapping) -> int:
    """The task's ``seq_len``, checked to be a positive integer."""
    seq_len = config.get("seq_len")
    if not isinstance(seq_len, int) or seq_len < 1:
        raise TaskError(f"task.seq_len={seq_len!r}: expected a positive number of tokens")
    return seq_len


def load(config: Mapping, data_dir: Path) -> TaskData:
    """IMDb as byte tokens with LRA's splits."""
    name, seq_len = config.get("name", "text"), sequence_length(config)
    raw, tag = local_or_hub(name, data_dir / "imdb", HUB_IDS, ("train", "test"))
    if not {"text", "label"} <= set(raw["train"].column_names):
        raise TaskError(f"{name}: expected columns 'text' and 'label', got {raw['train'].column_names}")

    def encode(split: datasets.Dataset) -> datasets.Dataset:
        ids = [byte_tokens(text.encode("utf-8"), seq_len) for text in split["text"]]
        return datasets.Dataset.from_dict({"input_ids": ids, "label": split["label"]},
                                          features=token_features("input_ids"))

    def build(work_dir: Path) -> datasets.DatasetDict:
        test = encode(raw["test"])
        return datasets.DatasetDict(train=encode(raw["train"]), val=test, test=test)

    splits = cached_splits(data_dir / "cache" / f"{name}-{tag}-bytes{seq_len}", build)
    info = TaskInfo(
        name=name, family="lra", seq_len=seq_len, vocab_size=257, num_classes=2,
        extra={"source": tag, "tokens": "utf-8 bytes + 1", "val_is_test": True},
    )
    return classification_task(info, splits, lambda split: SequenceClassification(split, seq_len))
