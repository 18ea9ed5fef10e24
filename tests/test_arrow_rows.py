"""The task datasets read Arrow buffers directly (tasks.splits.ArrowRows); what they return must be
exactly what the ``datasets`` torch format returns, on plain, selected and sliced splits."""

from __future__ import annotations

import datasets
import numpy as np
import pyarrow as pa
import pytest
import torch

from tasks.lra.image import PixelClassification
from tasks.lra.retrieval import PairClassification
from tasks.splits import ArrowRows, SequenceClassification, TokenTargets, classification_split


def _reference(split: datasets.Dataset, index: int, column: str) -> torch.Tensor:
    return split.with_format("torch", columns=[column])[index][column].long()


def _views(split: datasets.Dataset):
    """The split itself, a scattered select() and a contiguous slice (an offset into the buffers)."""
    yield split
    yield split.select([7, 2, 2, 11, 0])
    yield split.select(range(3, 9))


@pytest.fixture
def token_split() -> datasets.Dataset:
    gen = np.random.default_rng(0)
    inputs = gen.integers(0, 600, size=(13, 9)).astype(np.int16)
    labels = np.where(gen.random((13, 9)) < 0.5, -100, inputs).astype(np.int16)
    return datasets.Dataset.from_dict({"input_ids": inputs, "label": labels})


def test_token_targets_match_the_datasets_torch_format(token_split):
    for view in _views(token_split):
        items = TokenTargets(view)
        assert len(items) == len(view)
        for i in range(len(view)):
            for column in ("input_ids", "label"):
                got = items[i][column]
                assert got.dtype == torch.int64
                assert torch.equal(got, _reference(view, i, column))


def test_sequence_classification_matches_and_truncates():
    gen = np.random.default_rng(1)
    ids = [gen.integers(0, 20, size=length).astype(np.uint8) for length in (0, 1, 5, 12, 3, 30, 7, 8, 9, 10, 2, 4)]
    split = classification_split(ids, [int(x) for x in gen.integers(0, 10, size=len(ids))])
    for view in _views(split):
        items = SequenceClassification(view, seq_len=6)
        for i in range(len(view)):
            assert torch.equal(items[i]["input_ids"], _reference(view, i, "input_ids")[:6])
            label = items[i]["label"]
            assert label.dim() == 0 and label.dtype == torch.int64
            assert int(label) == int(_reference(view, i, "label"))


def test_pixels_and_pairs_match_the_datasets_torch_format():
    gen = np.random.default_rng(2)
    pixels = datasets.Dataset.from_dict(
        {"pixels": gen.integers(0, 256, size=(12, 16)).astype(np.uint8), "label": gen.integers(0, 10, 12)})
    for view in _views(pixels):
        items = PixelClassification(view)
        for i in range(len(view)):
            assert torch.equal(items[i]["input_ids"], _reference(view, i, "pixels") + 1)
            assert torch.equal(items[i]["label"], _reference(view, i, "label"))
    pairs = datasets.Dataset.from_dict({
        "input_ids": [list(gen.integers(1, 200, size=n)) for n in range(1, 13)],
        "input_ids_2": [list(gen.integers(1, 200, size=13 - n)) for n in range(1, 13)],
        "label": list(gen.integers(0, 2, 12)),
    })
    for view in _views(pairs):
        items = PairClassification(view)
        for i in range(len(view)):
            for column in PairClassification.COLUMNS:
                assert torch.equal(items[i][column], _reference(view, i, column))


def test_large_list_columns_are_read_too():
    column = pa.LargeListArray.from_arrays(pa.array([0, 2, 2, 5], pa.int64()), pa.array([1, 2, 3, 4, 5], pa.int16()))
    split = datasets.Dataset(pa.table({"input_ids": column}))
    rows = ArrowRows(split, ("input_ids",))
    assert [rows.get("input_ids", i).tolist() for i in range(3)] == [[1, 2], [], [3, 4, 5]]
