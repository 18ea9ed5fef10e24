"""A task's splits as the harness reads them: Arrow columns written column-wise
(``classification_split``) and read straight from their buffers (``ArrowRows``), torch views of
them with one label per example (``SequenceClassification``) or per token (``TokenTargets``), and
the TaskData of a classification task with its majority-class baseline."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import datasets
import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import Dataset

from tasks.base import TaskData, TaskInfo


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
    """Columns of an Arrow split read straight from its buffers, not through the ``datasets`` torch
    format, whose per-item cost would leave a plain DataLoader behind the model (the figures:
    docs/measurements.md). A list column gives an int64 vector per row (its first ``limit`` values
    when given), a scalar column a 0-dim int64 tensor."""

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


class TokenTargets(Dataset):
    """Items ``{"input_ids": int64 (L,), "label": int64 (L,)}`` (IGNORE_LABEL where not scored) read
    from an Arrow split whose ``input_ids`` and ``label`` columns are equal-length int lists."""

    def __init__(self, split: datasets.Dataset) -> None:
        self.rows = ArrowRows(split, ("input_ids", "label"))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows.get("input_ids", index), "label": self.rows.get("label", index)}


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
