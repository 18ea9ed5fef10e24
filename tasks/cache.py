"""The atomic Arrow cache of a task's splits, and the keys it is found by.

``cached_splits`` loads the splits saved in a folder, building them first when absent; a task
names the folder by what defines its data: the files it reads (``files_fingerprint``) or the
fields of a generator (``fields_key``). ``generated_splits`` is that cache for a generator of
(inputs, labels) tensors, one integer seed per split.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import datasets
import numpy as np
import torch

from tasks.base import SPLITS

# Generates (inputs, labels) for ``num_examples`` examples from one integer seed.
MakeSplit = Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]


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


def files_fingerprint(paths: Iterable[Path]) -> str:
    """A short stable tag of the files' names, sizes and modification times, for cache keys."""
    digest = hashlib.blake2b(digest_size=6)
    for path in paths:
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


def fields_key(fields: Mapping) -> str:
    """A short stable digest of the fields that define a generated dataset (JSON, sorted keys)."""
    text = json.dumps(dict(fields), sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def split_seed(data_seed: int, split: str) -> int:
    """A seed for ``split`` derived from the task's ``data_seed``: train, val and test draw from
    independent streams, so no split is a prefix or copy of another."""
    return int(np.random.SeedSequence([data_seed, SPLITS.index(split)]).generate_state(1)[0])


def compact(values: torch.Tensor) -> np.ndarray:
    """``values`` as int16 when they fit (token ids and -100 labels usually do), else int32: the
    cache is read back as int64 anyway, and long generated splits would take 4x the disk."""
    small = values.numel() == 0 or (values.min() >= -(2**15) and values.max() < 2**15)
    return values.numpy().astype(np.int16 if small else np.int32)


def generated_splits(cache_root: Path, fields: Mapping, make: MakeSplit,
                     names: tuple[str, ...] = SPLITS) -> datasets.DatasetDict:
    """The splits ``names`` (train, val and test) from ``make(num_examples, seed)``, cached under
    ``cache_root/<digest of fields>``; ``fields`` must hold ``data_seed`` and ``num_<split>``."""
    cache_dir = cache_root / fields_key(fields)

    def build(work_dir: Path) -> datasets.DatasetDict:
        splits = {}
        for split in names:
            inputs, labels = make(fields[f"num_{split}"], split_seed(fields["data_seed"], split))
            splits[split] = datasets.Dataset.from_dict({"input_ids": compact(inputs), "label": compact(labels)})
        # What defines the data, readable beside it, for whoever wonders what a folder holds.
        (work_dir / "fields.json").write_text(json.dumps(dict(fields), sort_keys=True, indent=1) + "\n")
        return datasets.DatasetDict(splits)

    return cached_splits(cache_dir, build)
