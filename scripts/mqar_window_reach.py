"""The most that sliding-window attention can score on MQAR in the board's hybrid, per window.

The hybrid (conf/model/hybrid.yaml) is a causal convolution of kernel K then one attention layer,
so a query at position q can bind its key only to a position p that holds both the key (at 2i) and
its value (at 2i + 1) after the convolution: 2i + 1 <= p <= 2i + K - 1. With a window of w keys the
attention sees p only if q - p < w, so the latest such p decides. A query none of whose positions
is in view scores chance over the values, 1 / (V/2). The ceiling is the share of queries in view
plus chance on the rest, over examples from the board's generator (tasks/recall/mqar.py; the share
is a property of its query-slot law, not of one split).

    python scripts/mqar_window_reach.py            # the board's points: length 64, 4/8/16 pairs
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from tasks.base import IGNORE_LABEL
from tasks.recall import mqar

HYBRID = Path(__file__).resolve().parents[1] / "conf" / "model" / "hybrid.yaml"


def ceiling(seq_len: int, pairs: int, window: int, vocab_size: int = 512, examples: int = 3000,
            conv_kernel: int | None = None) -> float:
    """The accuracy of a model that answers every query whose pair is in its window and guesses
    a value at random on the rest (conv_kernel: the hybrid's unless given)."""
    kernel = OmegaConf.load(HYBRID).conv_kernel if conv_kernel is None else conv_kernel
    if kernel < 2:
        raise ValueError(f"conv_kernel={kernel}: a kernel under 2 never holds a key beside its value")
    inputs, labels = (t.numpy() for t in mqar.make(examples, seq_len, pairs, vocab_size, seed=0))
    rows, queries = np.nonzero(labels != IGNORE_LABEL)
    keys = inputs[rows, queries]
    pair = np.argmax(inputs[rows, : 2 * pairs : 2] == keys[:, None], axis=1)  # i with k_i = the query
    seen = (queries - (2 * pair + kernel - 1) < window).mean()  # the latest position with k_i and v_i
    return float(seen + (1 - seen) / (vocab_size // 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--pairs", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--windows", type=int, nargs="+", default=[8, 16, 32, 64])
    args = parser.parse_args()
    for pairs in args.pairs:
        cells = "  ".join(f"w{w}: {100 * ceiling(args.seq_len, pairs, w):5.1f}%" for w in args.windows)
        print(f"MQAR ({args.seq_len}, {pairs}): {cells}")


if __name__ == "__main__":
    main()
