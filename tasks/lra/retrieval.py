"""Retrieval (Long Range Arena): does one ACL Anthology Network paper cite the other? 2 classes.

Each document is read as raw bytes, the first ``seq_len`` of them (LRA: 4000), token = byte + 1.
Items carry both documents, ``input_ids`` and ``input_ids_2``; the harness encodes them with one
shared tower and classifies ``[x1, x2, x1 * x2, x1 - x2]`` (``TaskInfo.extra["pair"]``).

Source: the LRA release, ``<data_dir>/lra_release/tsv_data/new_aan_pairs.{train,eval,test}.tsv``,
one pair per line, five tab-separated fields without header or quoting: label (``0``/``1``,
possibly written ``1.0``), id1, id2, text1, text2 (LRA's lra_benchmarks/matching/input_pipeline.py
reads them with ``use_quote_delim=False``). Texts are kept byte for byte as LRA fed them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import datasets
import torch
from torch.utils.data import Dataset

from tasks.base import TaskData, TaskError, TaskInfo
from tasks.cache import cached_splits, files_fingerprint
from tasks.lra.text import byte_tokens, sequence_length, token_features
from tasks.splits import ArrowRows, classification_task

FILES = {"train": "new_aan_pairs.train.tsv", "val": "new_aan_pairs.eval.tsv", "test": "new_aan_pairs.test.tsv"}


def read_pairs(path: Path) -> Iterator[tuple[int, bytes, bytes]]:
    """``(label, text1, text2)`` per line of an AAN pairs TSV; a malformed line is a TaskError."""
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            fields = line.split(b"\t")
            if len(fields) != 5:
                raise TaskError(f"{path}:{number}: {len(fields)} tab-separated fields, "
                                "expected 5 (label id1 id2 text1 text2)")
            try:
                label = float(fields[0])
            except ValueError:
                label = -1.0
            if label not in (0.0, 1.0):
                raise TaskError(f"{path}:{number}: label {fields[0][:20]!r}, expected 0 or 1")
            yield int(label), fields[3], fields[4]


class PairClassification(Dataset):
    """Items ``{"input_ids", "input_ids_2": int64 (<= seq_len), "label": int64 scalar}``."""

    COLUMNS = ("input_ids", "input_ids_2", "label")

    def __init__(self, split: datasets.Dataset) -> None:
        self.rows = ArrowRows(split, self.COLUMNS)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {key: self.rows.get(key, index) for key in self.COLUMNS}


def load(config: Mapping, data_dir: Path) -> TaskData:
    """AAN document pairs from the LRA release, as byte tokens."""
    name, seq_len = config.get("name", "retrieval"), sequence_length(config)
    tsv_dir = data_dir / "lra_release" / "tsv_data"
    paths = {split: tsv_dir / file for split, file in FILES.items()}
    missing = [str(path) for path in paths.values() if not path.is_file()]
    if missing:
        raise TaskError(
            f"{name}: missing {', '.join(missing)}; download lra_release.gz from the Long Range Arena "
            f"repository (google-research/long-range-arena) and unpack it under {data_dir}"
        )

    def encode(path: Path) -> datasets.Dataset:
        columns: dict[str, list] = {"input_ids": [], "input_ids_2": [], "label": []}
        for label, text1, text2 in read_pairs(path):
            columns["input_ids"].append(byte_tokens(text1, seq_len))
            columns["input_ids_2"].append(byte_tokens(text2, seq_len))
            columns["label"].append(label)
        if not columns["label"]:
            raise TaskError(f"{name}: {path} holds no pairs")
        return datasets.Dataset.from_dict(columns, features=token_features("input_ids", "input_ids_2"))

    def build(work_dir: Path) -> datasets.DatasetDict:
        return datasets.DatasetDict({split: encode(path) for split, path in paths.items()})

    key = f"{name}-aan-{files_fingerprint(paths.values())}-bytes{seq_len}"
    splits = cached_splits(data_dir / "cache" / key, build)
    info = TaskInfo(
        name=name, family="lra", seq_len=seq_len, vocab_size=257, num_classes=2,
        extra={"pair": True, "tokens": "bytes + 1"},
    )
    return classification_task(info, splits, PairClassification)
