"""A generated long-range DNA classification task. It is synthetic: no organism's DNA is in it,
and it needs no download.

Background: an order-``k`` Markov chain over A, C, G, T (default k = 3) whose transition table is
drawn once per ``data_seed`` (each row from a Dirichlet(2) distribution), so sequences have
local statistics a model can learn but no signal about the label; a few bases (``n_rate``) are N,
as in assembled genomes.

Signal: ``P = num_motif_pairs`` pairs of motifs ``(A_i, B_i)``, random ``motif_len``-mers fixed by
the seed. The *first part* of a sequence is its first ``region_fraction`` of positions and the
*last part* its last ``region_fraction``; they are at least ``seq_len * (1 - 2 * region_fraction)``
bases apart (512 of 1024 by default). An example is positive iff, for some ``i``, ``A_i`` occurs in
the first part and ``B_i`` in the last part. Half the examples are positive. Of the negatives, a
``mismatched_share`` (default one half; none when ``P = 1``) are *mismatched*: ``A_i`` first and
``B_j`` last with ``j != i``; the rest are split evenly between "an A motif only", "a B motif
only" and "neither". No motif occurs anywhere else: backgrounds that happen to contain one are
drawn again, so the rule above is the whole truth about the label.

Why this design: detecting "some A motif first" and "some B motif last" independently and
combining the two answers (what a mean-pooled classifier over local features can do) reaches
``presence_shortcut_accuracy`` = 0.5 + 0.5 * (1 - mismatched_share), 75% by default; the record
carries it beside the majority baseline. The rest needs the *pairing* of what sits at the two ends,
which a linear read-out of independent detections cannot express: some position must gather evidence from the
other end, hundreds of bases away, which is the long-range interaction attention is supposed to
provide. With ``num_motif_pairs=1`` the task is "both motifs present", which pooling of two local
detectors solves entirely.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tasks.base import TaskData, TaskError, TaskInfo
from tasks.cache import generated_splits
from tasks.genomics.nucleotides import ALPHABET, N_ID, VOCAB_SIZE
from tasks.options import choice_option, int_option, split_sizes
from tasks.splits import SequenceClassification, classification_task

FORMAT_VERSION = 1  # part of the cache key: bump when the generated data changes
DESIGN_STREAM = 7  # seeds the motifs and the Markov table apart from the splits' streams
DIRICHLET_ALPHA = 2.0
ROWS_PER_CHUNK = 2048  # examples drawn at once (bounds memory at long lengths)
# Example kinds; "mismatched" needs two pairs or more.
POSITIVE, A_ONLY, B_ONLY, NEITHER, MISMATCHED = range(5)


@dataclass(frozen=True)
class Design:
    """What is fixed per ``data_seed``: the Markov table and the motif pairs."""

    transitions: np.ndarray  # (4**order, 4): next-base probabilities per context of ``order`` bases
    motifs_a: tuple[str, ...]
    motifs_b: tuple[str, ...]


def make_design(data_seed: int, markov_order: int, num_motif_pairs: int, motif_len: int) -> Design:
    """The Markov table and ``num_motif_pairs`` pairs of distinct motifs drawn from ``data_seed``."""
    rng = np.random.default_rng([data_seed, DESIGN_STREAM])
    transitions = rng.dirichlet(np.full(4, DIRICHLET_ALPHA), size=4**markov_order)
    motifs: list[str] = []
    while len(motifs) < 2 * num_motif_pairs:
        motif = "".join(ALPHABET[i] for i in rng.integers(0, 4, motif_len))
        if motif not in motifs:
            motifs.append(motif)
    return Design(transitions, tuple(motifs[0::2]), tuple(motifs[1::2]))


def markov_background(transitions: np.ndarray, num_rows: int, seq_len: int, rng: np.random.Generator) -> np.ndarray:
    """``(num_rows, seq_len)`` bases 0..3 from the chain (the first ``order`` bases uniform)."""
    order = round(np.log(len(transitions)) / np.log(4))
    cdf = np.cumsum(transitions, axis=1)[:, :3]
    uniforms = rng.random((num_rows, seq_len))
    bases = np.empty((num_rows, seq_len), dtype=np.int64)
    bases[:, :order] = (uniforms[:, :order] * 4).astype(np.int64)
    context = np.zeros(num_rows, dtype=np.int64)
    for t in range(order):
        context = context * 4 + bases[:, t]
    for t in range(order, seq_len):
        bases[:, t] = (uniforms[:, t, None] > cdf[context]).sum(axis=1)
        context = (context * 4 + bases[:, t]) % len(transitions)
    return bases


def motif_code(motif: str) -> int:
    """A motif as a base-4 number (A=0 .. T=3), the same code ``window_codes`` gives its occurrence."""
    code = 0
    for base in motif:
        code = code * 4 + ALPHABET.index(base)
    return code


def window_codes(tokens: np.ndarray, width: int) -> np.ndarray:
    """``(rows, seq_len - width + 1)`` base-4 codes of every window; -1 where a window holds an N."""
    positions = tokens.shape[1] - width + 1
    codes = np.zeros((tokens.shape[0], positions), dtype=np.int64)
    has_n = np.zeros(codes.shape, dtype=bool)
    for j in range(width):
        window_column = tokens[:, j:j + positions]
        codes = codes * 4 + (window_column - 1)
        has_n |= window_column == N_ID
    codes[has_n] = -1
    return codes


def count_occurrences(tokens: np.ndarray, motifs: tuple[str, ...]) -> np.ndarray:
    """Per row, how many times any of ``motifs`` (all of one length) starts in it (token ids 1..5)."""
    codes = window_codes(tokens, len(motifs[0]))
    return np.isin(codes, [motif_code(m) for m in motifs]).sum(axis=1)


def example_kinds(num_examples: int, num_motif_pairs: int, mismatched_share: float,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per example: its kind, the index of its A motif and of its B motif (-1: none), shuffled."""
    num_positive = num_examples // 2
    num_negative = num_examples - num_positive
    num_mismatched = round(num_negative * mismatched_share) if num_motif_pairs >= 2 else 0
    others = [(A_ONLY, B_ONLY, NEITHER)[i % 3] for i in range(num_negative - num_mismatched)]
    kinds = np.array([POSITIVE] * num_positive + [MISMATCHED] * num_mismatched + others, dtype=np.int64)
    kinds = kinds[rng.permutation(num_examples)]
    a_index = rng.integers(0, num_motif_pairs, num_examples)
    shift = rng.integers(1, max(num_motif_pairs, 2), num_examples)  # a different pair, for mismatches
    b_index = np.where(kinds == MISMATCHED, (a_index + shift) % num_motif_pairs, a_index)
    a_index = np.where(np.isin(kinds, (POSITIVE, A_ONLY, MISMATCHED)), a_index, -1)
    b_index = np.where(np.isin(kinds, (POSITIVE, B_ONLY, MISMATCHED)), b_index, -1)
    return kinds, a_index, b_index


def presence_shortcut_accuracy(num_motif_pairs: int, mismatched_share: float) -> float:
    """Accuracy of "positive iff some A motif is first and some B motif last", pairs ignored: what
    two independent local detections reach; only pairing the two ends does better."""
    share = mismatched_share if num_motif_pairs >= 2 else 0.0
    return 0.5 + 0.5 * (1.0 - share)


def draw_rows(design: Design, a_index: np.ndarray, b_index: np.ndarray, seq_len: int, region_len: int,
              n_rate: float, rng: np.random.Generator) -> np.ndarray:
    """Token ids with the requested motifs planted and no other motif occurrence anywhere."""
    motifs = design.motifs_a + design.motifs_b
    width = len(motifs[0])
    tokens = np.empty((len(a_index), seq_len), dtype=np.int64)
    todo = np.arange(len(a_index))
    while len(todo):  # redraw the rows whose background produced an extra motif
        rows = markov_background(design.transitions, len(todo), seq_len, rng) + 1
        rows[rng.random(rows.shape) < n_rate] = N_ID
        a_start = rng.integers(0, region_len - width + 1, len(todo))
        b_start = rng.integers(seq_len - region_len, seq_len - width + 1, len(todo))
        for row, (a, b) in enumerate(zip(a_index[todo], b_index[todo])):
            if a >= 0:
                rows[row, a_start[row]:a_start[row] + width] = [ALPHABET.index(c) + 1 for c in design.motifs_a[a]]
            if b >= 0:
                rows[row, b_start[row]:b_start[row] + width] = [ALPHABET.index(c) + 1 for c in design.motifs_b[b]]
        planted = (a_index[todo] >= 0).astype(int) + (b_index[todo] >= 0)
        clean = count_occurrences(rows, motifs) == planted
        tokens[todo[clean]] = rows[clean]
        todo = todo[~clean]
    return tokens


def generate(design: Design, num_examples: int, seq_len: int, seed: int, region_fraction: float = 0.25,
             n_rate: float = 0.001, mismatched_share: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, labels)``: int64 (num_examples, seq_len) ids (A=1 .. N=5) and int64 0/1 labels."""
    rng = np.random.default_rng(seed)
    region_len = int(seq_len * region_fraction)
    kinds, a_index, b_index = example_kinds(num_examples, len(design.motifs_a), mismatched_share, rng)
    chunks = [draw_rows(design, a_index[s:s + ROWS_PER_CHUNK], b_index[s:s + ROWS_PER_CHUNK], seq_len, region_len,
                        n_rate, rng)
              for s in range(0, num_examples, ROWS_PER_CHUNK)]
    tokens = np.concatenate(chunks) if chunks else np.empty((0, seq_len), dtype=np.int64)
    return torch.from_numpy(tokens), torch.from_numpy((kinds == POSITIVE).astype(np.int64))


def fraction_option(config: Mapping, key: str, low: float, high: float) -> float:
    """``config[key]`` as a float in ``[low, high]``; a TaskError naming the key otherwise."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise TaskError(f"task.{key}={value!r}: expected a number in [{low}, {high}]")
    return float(value)


def load(config: Mapping, data_dir: Path) -> TaskData:
    """Generate (or read from ``<data_dir>/genomics/synthetic/<key>/``) the splits of ``config``."""
    choice_option(config, "source", ("generate",))
    seq_len = int_option(config, "seq_len", 16)
    num_motif_pairs = int_option(config, "num_motif_pairs")
    motif_len = int_option(config, "motif_len", 4)
    markov_order = int_option(config, "markov_order", 0)
    region_fraction = fraction_option(config, "region_fraction", 0.0, 0.5)
    n_rate = fraction_option(config, "n_rate", 0.0, 0.1)
    mismatched_share = fraction_option(config, "mismatched_share", 0.0, 1.0)
    data_seed = int_option(config, "data_seed", 0)
    if motif_len > 16 or markov_order > 8:
        raise TaskError(f"task.motif_len={motif_len}, task.markov_order={markov_order}: at most 16 and 8")
    region_len = int(seq_len * region_fraction)
    if region_len < motif_len:
        raise TaskError(f"task.region_fraction={region_fraction}: each end part ({region_len} bases of "
                        f"seq_len={seq_len}) must hold a motif of {motif_len} bases")
    if 4**motif_len < 2 * num_motif_pairs:
        raise TaskError(f"task.num_motif_pairs={num_motif_pairs}: there are only {4**motif_len} motifs of "
                        f"length {motif_len}")

    design = make_design(data_seed, markov_order, num_motif_pairs, motif_len)
    fields = {
        "task": "genomics_synthetic", "version": FORMAT_VERSION, "seq_len": seq_len, "num_motif_pairs": num_motif_pairs,
        "motif_len": motif_len, "markov_order": markov_order, "region_fraction": region_fraction, "n_rate": n_rate,
        "mismatched_share": mismatched_share, "data_seed": data_seed,
        **{f"num_{split}": size for split, size in split_sizes(config).items()},
    }
    splits = generated_splits(
        Path(data_dir) / "genomics" / "synthetic", fields,
        lambda num, seed: generate(design, num, seq_len, seed, region_fraction, n_rate, mismatched_share),
    )
    info = TaskInfo(
        name=config.get("name", "genomics"),
        family="genomics",
        seq_len=seq_len,
        vocab_size=VOCAB_SIZE,
        num_classes=2,
        extra={"synthetic": True, "motifs_a": list(design.motifs_a), "motifs_b": list(design.motifs_b),
               "region_length": region_len, "markov_order": markov_order,
               "presence_shortcut_accuracy": presence_shortcut_accuracy(num_motif_pairs, mismatched_share)},
    )
    return classification_task(info, splits, lambda split: SequenceClassification(split, seq_len))
