"""Selective copying, the synthetic task of Mamba (Gu & Dao 2023, "Mamba: Linear-Time Sequence
Modeling with Selective State Spaces", Section 3.1 and Appendix E.1), generated as S4's
``copying.py`` does with ``variable=True``, the generator Mamba's experiment used.

An alphabet of ``A = vocab_size`` symbols (Mamba: 16) holds a noise symbol, ``A - 2`` data
symbols and a marker. An example of ``seq_len`` tokens (Mamba: 4096) has ``M = num_tokens`` data
tokens (Mamba: 16), drawn uniformly with replacement, at ``M`` distinct positions chosen uniformly
in the first ``seq_len - M`` positions and kept in order; every other position there is noise.
The last ``M`` positions are markers, and the target at the ``i``-th marker is the ``i``-th data
token, so the model must remember the content tokens in order and ignore the noise between them
(unlike plain copying, the spacing varies, so a fixed time-invariant kernel cannot do it).
Labels are -100 everywhere else.

S4 numbers the noise 0 and the marker ``A - 1``; here ids are shifted up by one so that 0 stays
padding: noise = 1, data symbols ``2 .. A - 1``, marker = ``A``, ``A + 1`` ids in all. The metric
is accuracy over the marker positions; the baseline is chance, one over the data symbols.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from tasks.base import IGNORE_LABEL, TaskData, TaskError, TaskInfo
from tasks.cache import generated_splits
from tasks.options import choice_option, int_option, split_sizes
from tasks.recall import selective_copying_baseline
from tasks.recall.sampling import distinct_uniform
from tasks.splits import TokenTargets

NOISE = 1
FIRST_DATA = 2
FORMAT_VERSION = 1  # part of the cache key: bump when the generated data changes


def check(seq_len: int, num_tokens: int, vocab_size: int) -> None:
    """Raise TaskError unless the sizes describe a possible example."""
    if vocab_size < 3:
        raise TaskError(f"task.vocab_size={vocab_size}: needs a noise symbol, a marker and at least one data "
                        "symbol (>= 3)")
    if 2 * num_tokens > seq_len:
        raise TaskError(f"task.num_tokens={num_tokens}: at most seq_len / 2 = {seq_len // 2} tokens fit in "
                        f"seq_len={seq_len} (the tokens, then as many markers)")


def make(num_examples: int, seq_len: int, num_tokens: int, vocab_size: int,
         seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, labels)``, int64 of shape (num_examples, seq_len), as the module docstring says."""
    check(seq_len, num_tokens, vocab_size)
    rng = np.random.default_rng(seed)
    marker = vocab_size  # S4's A - 1, shifted
    content_len = seq_len - num_tokens
    tokens = rng.integers(FIRST_DATA, marker, size=(num_examples, num_tokens))
    positions = np.sort(distinct_uniform(rng, content_len, num_examples, num_tokens), axis=1)

    inputs = np.full((num_examples, seq_len), NOISE, dtype=np.int64)
    np.put_along_axis(inputs, positions, tokens, axis=1)
    inputs[:, content_len:] = marker
    labels = np.full((num_examples, seq_len), IGNORE_LABEL, dtype=np.int64)
    labels[:, content_len:] = tokens
    return torch.from_numpy(inputs), torch.from_numpy(labels)


def load(config: Mapping, data_dir: Path) -> TaskData:
    """Generate (or read from ``<data_dir>/recall/selective_copying/<key>/``) the splits of ``config``."""
    choice_option(config, "source", ("generate",))  # nothing to read: these tasks are defined by their generator
    seq_len = int_option(config, "seq_len", 2)
    num_tokens = int_option(config, "num_tokens")
    vocab_size = int_option(config, "vocab_size", 3)
    check(seq_len, num_tokens, vocab_size)
    fields = {
        "task": "selective_copying", "version": FORMAT_VERSION, "seq_len": seq_len, "num_tokens": num_tokens,
        "vocab_size": vocab_size, "data_seed": int_option(config, "data_seed", 0),
        **{f"num_{split}": size for split, size in split_sizes(config).items()},
    }
    splits = generated_splits(
        Path(data_dir) / "recall" / "selective_copying", fields,
        lambda num, seed: make(num, seq_len, num_tokens, vocab_size, seed),
    )
    num_symbols = vocab_size - 2
    info = TaskInfo(
        name=config.get("name", "selective_copying"),
        family="recall",
        seq_len=seq_len,
        vocab_size=vocab_size + 1,
        num_classes=vocab_size + 1,  # a prediction is a token id
        target="token",
        metric="accuracy",
        baseline_name="chance (1 / number of data symbols)",
        extra={"num_tokens": num_tokens, "num_symbols": num_symbols},
    )
    return TaskData(info=info, train=TokenTargets(splits["train"]), val=TokenTargets(splits["val"]),
                    test=TokenTargets(splits["test"]), baseline=selective_copying_baseline({"vocab_size": vocab_size}))
