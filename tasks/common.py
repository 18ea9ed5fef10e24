"""Pieces the LRA tasks share: TSV files in the release's dialect, the atomic Arrow cache, and a
thin torch view of a cached split."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import Dataset

from tasks.base import TaskData, TaskError, TaskInfo

# LRA's retrieval texts are far longer than the csv module's default field limit (128 KiB).
csv.field_size_limit(sys.maxsize)


def write_tsv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Write rows as LRA's generators did: ``csv.writer`` with a tab delimiter (CRLF line ends)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(header)
        writer.writerows(rows)


def read_tsv(path: Path, num_fields: int, header: Sequence[str] | None = None) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_number, fields)`` of a tab-separated file, checking the header and field count.

    ``header`` is the expected first row (``None`` for files without one). A malformed row raises
    TaskError naming the file and line. Accepts LF and CRLF line ends; skips blank lines.
    """
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t")
        try:
            if header is not None:
                first = next(reader, None)
                if first is None:
                    raise TaskError(f"{path}: empty file, expected the header {list(header)!r}")
                if first != list(header):
                    raise TaskError(f"{path}:1: header {first!r}, expected {list(header)!r}")
            for fields in reader:
                if not fields:
                    continue
                if len(fields) != num_fields:
                    raise TaskError(
                        f"{path}:{reader.line_num}: {len(fields)} tab-separated fields, expected {num_fields}"
                    )
                yield reader.line_num, fields
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TaskError(f"{path}:{reader.line_num}: unreadable TSV ({exc})") from exc


def files_fingerprint(paths: Iterable[Path]) -> str:
    """A short stable tag of the files' names, sizes and modification times, for cache keys."""
    digest = hashlib.blake2b(digest_size=6)
    for path in paths:
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


@contextmanager
def _quiet_datasets() -> Iterator[None]:
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def cached_splits(cache_dir: Path, build: Callable[[Path], datasets.DatasetDict]) -> datasets.DatasetDict:
    """Load the Arrow splits saved under ``cache_dir/arrow``, building them first when absent.

    ``build(work_dir)`` may write files of its own (e.g. generated TSVs) into ``work_dir``; it and
    the saved splits appear under ``cache_dir`` together by one rename, so an interrupted or failed
    build never leaves a partial cache behind.
    """
    if not cache_dir.is_dir():
        cache_dir.parent.mkdir(parents=True, exist_ok=True)
        work_dir = Path(tempfile.mkdtemp(prefix=f".{cache_dir.name}.tmp-", dir=cache_dir.parent))
        try:
            splits = build(work_dir)
            with _quiet_datasets():  # its per-shard bars would bury the generator's one
                splits.save_to_disk(str(work_dir / "arrow"))
            os.rename(work_dir, cache_dir)
        except OSError:
            if not cache_dir.is_dir():  # not a concurrent run that finished first: a real failure
                raise
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)
    return datasets.load_from_disk(str(cache_dir / "arrow"))


def classification_split(input_ids: Sequence[np.ndarray], labels: Sequence[int]) -> datasets.Dataset:
    """An Arrow split with columns ``input_ids`` (one small-int array per example, dtype kept) and
    ``label`` (int64), built column-wise: far faster than ``Dataset.from_dict`` on Python lists."""
    offsets = np.zeros(len(input_ids) + 1, dtype=np.int64)
    np.cumsum([len(ids) for ids in input_ids], out=offsets[1:])
    values = pa.array(np.concatenate(input_ids)) if input_ids else pa.array([], pa.uint8())
    if offsets[-1] < 2**31:
        column = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
    else:  # more tokens than 32-bit offsets can address
        column = pa.LargeListArray.from_arrays(pa.array(offsets), values)
    return datasets.Dataset.from_dict({"input_ids": column, "label": pa.array(np.asarray(labels, dtype=np.int64))})


class ArrowRows:
    """Columns of an Arrow split read straight from its buffers: about 9 us an MQAR item (two
    128-token lists), against 215 through the ``datasets`` torch format, so a plain DataLoader
    keeps up with the model. A list column gives an int64 vector per row
    (its first ``limit`` values when given), a scalar column a 0-dim int64 tensor."""

    def __init__(self, split: datasets.Dataset, columns: Sequence[str]) -> None:
        table = split.with_format("arrow")[:]  # honours a select(); zero-copy for a plain slice
        self.num_rows = len(table)
        self._columns = {}
        for name in columns:
            column = table.column(name).combine_chunks()
            if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                self._columns[name] = (column.offsets.to_numpy(), column.values.to_numpy())
            else:
                self._columns[name] = (None, column.to_numpy())

    def __len__(self) -> int:
        return self.num_rows

    def column(self, name: str) -> np.ndarray:
        """A scalar column, whole (e.g. the labels a baseline counts)."""
        offsets, values = self._columns[name]
        if offsets is not None:
            raise TypeError(f"column {name!r} holds lists")
        return values

    def get(self, name: str, index: int, limit: int | None = None) -> torch.Tensor:
        offsets, values = self._columns[name]
        if offsets is None:
            return torch.tensor(values[index], dtype=torch.int64)
        start, stop = offsets[index], offsets[index + 1]
        if limit is not None:
            stop = min(stop, start + limit)
        return torch.from_numpy(values[start:stop].astype(np.int64))


class SequenceClassification(Dataset):
    """Items ``{"input_ids": int64 (<= seq_len), "label": int64 scalar}`` of an Arrow split with
    columns ``input_ids`` (a list of small ints per example) and ``label``."""

    def __init__(self, split: datasets.Dataset, seq_len: int) -> None:
        self.rows = ArrowRows(split, ("input_ids", "label"))
        self.seq_len = seq_len

    @property
    def labels(self) -> np.ndarray:
        return self.rows.column("label")

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows.get("input_ids", index, self.seq_len), "label": self.rows.get("label", index)}


def majority_baseline(train_labels: Sequence[int] | np.ndarray, test_labels: Sequence[int] | np.ndarray) -> float:
    """Test accuracy of always predicting the most frequent train label (ties: the smallest);
    labels are non-negative class ids, as a list, an array or a ``datasets`` column."""
    majority = int(np.argmax(np.bincount(np.asarray(train_labels, dtype=np.int64))))
    return float(np.mean(np.asarray(test_labels, dtype=np.int64) == majority))


def classification_task(info: TaskInfo, splits: datasets.DatasetDict,
                        items: Callable[[datasets.Dataset], Dataset]) -> TaskData:
    """TaskData over cached Arrow splits with a ``label`` column, each split read through ``items``,
    with the majority-class baseline of the train labels on the test split."""
    return TaskData(
        info=info,
        train=items(splits["train"]),
        val=items(splits["val"]),
        test=items(splits["test"]),
        baseline=majority_baseline(splits["train"]["label"], splits["test"]["label"]),
    )
