"""Generated tasks' plumbing: per-split seeds, config validation, the keyed Arrow cache of
generated splits, and a torch view of per-token targets.

The atomic cache itself is ``tasks.common.cached_splits``; this module adds the key (every
field that defines the data) and the conversion from generated tensors to Arrow columns.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path

import datasets
import numpy as np
import torch
from torch.utils.data import Dataset

from tasks.base import TaskError
from tasks.common import ArrowRows, cached_splits

SPLITS = ("train", "val", "test")
IGNORE_LABEL = -100  # token targets: positions that are not scored

# Generates (inputs, labels) for ``num_examples`` examples from one integer seed.
MakeSplit = Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]


def split_seed(data_seed: int, split: str) -> int:
    """A seed for ``split`` derived from the task's ``data_seed``: train, val and test draw from
    independent streams, so no split is a prefix or copy of another."""
    return int(np.random.SeedSequence([data_seed, SPLITS.index(split)]).generate_state(1)[0])


def int_option(config: Mapping, key: str, minimum: int = 1) -> int:
    """``config[key]`` as an int >= ``minimum``; a TaskError naming the key otherwise."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TaskError(f"task.{key}={value!r}: expected an integer >= {minimum}")
    return value


def choice_option(config: Mapping, key: str, choices: tuple[str, ...]) -> str:
    """``config[key]`` if it is one of ``choices``; a TaskError listing them otherwise."""
    value = config.get(key)
    if value not in choices:
        raise TaskError(f"task.{key}={value!r}: valid choices are {', '.join(choices)}")
    return value


def split_sizes(config: Mapping) -> dict[str, int]:
    """``num_train``, ``num_val`` and ``num_test`` of the task config, validated."""
    return {split: int_option(config, f"num_{split}") for split in SPLITS}


def fields_key(fields: Mapping) -> str:
    """A short stable digest of the fields that define a generated dataset (JSON, sorted keys)."""
    text = json.dumps(dict(fields), sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def compact(values: torch.Tensor) -> np.ndarray:
    """``values`` as int16 when they fit (token ids and -100 labels usually do), else int32: the
    cache is read back as int64 anyway, and long generated splits would take 4x the disk."""
    small = values.numel() == 0 or (values.min() >= -(2**15) and values.max() < 2**15)
    return values.numpy().astype(np.int16 if small else np.int32)


def generated_splits(cache_root: Path, fields: Mapping, make: MakeSplit) -> datasets.DatasetDict:
    """Train, val and test from ``make(num_examples, seed)``, cached under
    ``cache_root/<digest of fields>``; ``fields`` must hold ``data_seed`` and ``num_<split>``."""
    cache_dir = cache_root / fields_key(fields)

    def build(work_dir: Path) -> datasets.DatasetDict:
        splits = {}
        for split in SPLITS:
            inputs, labels = make(fields[f"num_{split}"], split_seed(fields["data_seed"], split))
            splits[split] = datasets.Dataset.from_dict({"input_ids": compact(inputs), "label": compact(labels)})
        # What defines the data, readable beside it, for whoever wonders what a folder holds.
        (work_dir / "fields.json").write_text(json.dumps(dict(fields), sort_keys=True, indent=1) + "\n")
        return datasets.DatasetDict(splits)

    return cached_splits(cache_dir, build)


class TokenTargets(Dataset):
    """Items ``{"input_ids": int64 (L,), "label": int64 (L,)}`` (label -100 where not scored) read
    from an Arrow split whose ``input_ids`` and ``label`` columns are equal-length int lists."""

    def __init__(self, split: datasets.Dataset) -> None:
        self.rows = ArrowRows(split, ("input_ids", "label"))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows.get("input_ids", index), "label": self.rows.get("label", index)}
