"""Batches for the train/eval loop: split capping and padding collation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset, Subset

from suite.model import PAD_ID
from tasks.base import IGNORE_LABEL  # positions a token-target task does not score


def capped(split: Dataset, limit: int | None) -> Dataset:
    """The first ``limit`` examples of ``split`` (all of them when ``limit`` is None)."""
    if limit is None or limit >= len(split):
        return split
    return Subset(split, range(limit))


def collate(items: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Pad every sequence field to the longest in the batch; stack sequence labels."""
    batch = {}
    for key in items[0]:
        values = [torch.as_tensor(item[key]) for item in items]
        if key.startswith("input_ids"):
            batch[key] = pad_sequence(values, batch_first=True, padding_value=PAD_ID)
        elif key == "label" and values[0].dim() == 1:
            batch[key] = pad_sequence(values, batch_first=True, padding_value=IGNORE_LABEL)
        else:
            batch[key] = torch.stack(values)
    return batch


def real_tokens(batch: Mapping[str, torch.Tensor]) -> int:
    """Non-padding input tokens in a batch: the unit of the tokens/s figures."""
    return sum(int((v != PAD_ID).sum()) for k, v in batch.items() if k.startswith("input_ids"))
