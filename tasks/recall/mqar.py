"""Multi-query associative recall (MQAR) from Zoology (Arora, Eyuboglu et al. 2023, "Zoology:
Measuring and improving recall in efficient language models"), in the layout of Zoology's
``multiquery_ar`` with ``random_non_queries=False`` (the setting of Zoology's Figure 2).

An example of ``seq_len`` tokens holds ``P = num_kv_pairs`` key/value pairs first
(``k1 v1 k2 v2 ... kP vP``), then a query region of ``seq_len - 2P`` blank tokens in which every
key appears once more, key ``i`` at offset ``2 * g_i``. The label at a key's query position is the
value bound to that key (the token that should come next); every other label is -100. The slots
``g_i`` are drawn without replacement from ``0 .. (seq_len - 2P) / 2 - 1`` with probability
proportional to ``(g + 1) ** (power_a - 1)``, Zoology's power law (``power_a = 0.01``): a query
is far likelier to come soon after the pairs than late, as repeated bigrams do in text.

Keys come from the lower half of Zoology's vocabulary ``[1, V/2)`` and values from the upper half
``[V/2, V)``, distinct within an example. Zoology's blank is id 0; here every id is shifted up by
one so that 0 stays padding: blank = 1, keys in ``[2, V/2 + 1)``, values in ``[V/2 + 1, V + 1)``,
and the model's vocabulary has ``V + 1`` ids. The metric is accuracy over answer positions only;
the baseline is one over the number of pairs: what a model scores that answers with any value of
the context, without binding a key to its value (chance over the values, 1 / (V/2), is far lower).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from tasks.base import IGNORE_LABEL, LengthTest, TaskData, TaskError, TaskInfo
from tasks.cache import generated_splits, split_seed
from tasks.options import choice_option, int_option, split_sizes
from tasks.recall import mqar_baseline
from tasks.recall.sampling import distinct_uniform, sample_without_replacement
from tasks.splits import TokenTargets

BLANK = 1  # Zoology's 0, shifted
ID_SHIFT = 1  # added to every Zoology id so that 0 is free for padding
FORMAT_VERSION = 1  # part of the cache key: bump when the generated data changes


def check(seq_len: int, num_kv_pairs: int, vocab_size: int) -> None:
    """Raise TaskError unless Zoology's generator accepts these sizes."""
    if seq_len % 2:
        raise TaskError(f"task.seq_len={seq_len}: MQAR needs an even length (queries sit on even offsets)")
    if 4 * num_kv_pairs > seq_len:
        raise TaskError(f"task.num_kv_pairs={num_kv_pairs}: at most seq_len / 4 = {seq_len // 4} pairs fit "
                        f"in seq_len={seq_len} (pairs, then a query slot per pair)")
    if vocab_size <= seq_len:
        raise TaskError(f"task.vocab_size={vocab_size}: Zoology requires a vocabulary larger than seq_len={seq_len}")
    if num_kv_pairs > vocab_size // 2 - 1:
        raise TaskError(f"task.num_kv_pairs={num_kv_pairs}: vocab_size={vocab_size} has only "
                        f"{vocab_size // 2 - 1} distinct keys")


def power_law(space: int, power_a: float) -> np.ndarray:
    """Zoology's query-slot probabilities ``a * x**(a - 1)`` for x = 1..space, normalised."""
    weights = power_a * np.arange(1, space + 1, dtype=np.float64) ** (power_a - 1)
    return weights / weights.sum()


def make(num_examples: int, seq_len: int, num_kv_pairs: int, vocab_size: int, seed: int,
         power_a: float = 0.01) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, labels)``, int64 of shape (num_examples, seq_len), in Zoology's MQAR layout
    with ids shifted up by one (see the module docstring)."""
    check(seq_len, num_kv_pairs, vocab_size)
    rng = np.random.default_rng(seed)
    context = 2 * num_kv_pairs
    half = vocab_size // 2
    keys = 1 + distinct_uniform(rng, half - 1, num_examples, num_kv_pairs)
    values = half + distinct_uniform(rng, vocab_size - half, num_examples, num_kv_pairs)
    slots = sample_without_replacement(rng, power_law((seq_len - context) // 2, power_a), num_examples, num_kv_pairs)

    inputs = np.zeros((num_examples, seq_len), dtype=np.int64)
    inputs[:, 0:context:2] = keys
    inputs[:, 1:context:2] = values
    query_positions = context + 2 * slots
    np.put_along_axis(inputs, query_positions, keys, axis=1)
    labels = np.full((num_examples, seq_len), IGNORE_LABEL, dtype=np.int64)
    np.put_along_axis(labels, query_positions, values + ID_SHIFT, axis=1)
    return torch.from_numpy(inputs + ID_SHIFT), torch.from_numpy(labels)


def make_mixed(num_examples: int, seq_len: int, mix: list[tuple[int, int]], vocab_size: int, seed: int,
               power_a: float = 0.01) -> tuple[torch.Tensor, torch.Tensor]:
    """A training split drawn from several (length, pairs) settings, as Zoology and Based train their
    recall models (their configs mix 64-256 tokens and 4-64 pairs): the short, sparse examples break
    the long plateau at chance that a large vocabulary holds a model on at the long setting. Equal
    shares of ``num_examples`` per setting, each right-padded to ``seq_len`` (padding id 0, labels
    ignored: a causal model's predictions before the padding do not see it), in one seeded order."""
    parts = []
    for i, (length, pairs) in enumerate(mix):
        share = num_examples // len(mix) + (i < num_examples % len(mix))
        part_seed = int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
        inputs, labels = make(share, length, pairs, vocab_size, part_seed, power_a)
        pad = seq_len - length
        parts.append((torch.nn.functional.pad(inputs, (0, pad), value=0),
                       torch.nn.functional.pad(labels, (0, pad), value=IGNORE_LABEL)))
    order = torch.from_numpy(np.random.default_rng(seed).permutation(num_examples))
    return torch.cat([p[0] for p in parts])[order], torch.cat([p[1] for p in parts])[order]


def train_mix(config: Mapping, seq_len: int, vocab_size: int) -> list[tuple[int, int]]:
    """``task.train_mix``: the (length, pairs) settings the training split mixes (none: the task's
    own), each checked as Zoology's generator checks its sizes and no longer than ``seq_len``."""
    mix = config.get("train_mix") or []
    shape = isinstance(mix, list) and all(
        isinstance(item, list) and len(item) == 2 and all(isinstance(n, int) and not isinstance(n, bool) for n in item)
        for item in mix)
    if not shape or any(not 0 < length <= seq_len for length, _ in mix):
        raise TaskError(f"task.train_mix={mix!r}: expected a list of [length, pairs], each length in "
                        f"(0, seq_len={seq_len}], e.g. [[64, 4], [256, 64]]")
    for length, pairs in mix:
        check(length, pairs, vocab_size)
    return [(length, pairs) for length, pairs in mix]


def load(config: Mapping, data_dir: Path) -> TaskData:
    """Generate (or read from ``<data_dir>/recall/mqar/<key>/``) the MQAR splits of ``config``."""
    choice_option(config, "source", ("generate",))  # nothing to read: these tasks are defined by their generator
    seq_len = int_option(config, "seq_len", 4)
    num_kv_pairs = int_option(config, "num_kv_pairs")
    vocab_size = int_option(config, "vocab_size", 4)
    power_a = config.get("power_a", 0.01)
    if isinstance(power_a, bool) or not isinstance(power_a, (int, float)) or not 0 < power_a <= 1:
        raise TaskError(f"task.power_a={power_a!r}: expected a number in (0, 1] (1 = uniform slots)")
    check(seq_len, num_kv_pairs, vocab_size)
    fields = {
        "task": "mqar", "version": FORMAT_VERSION, "seq_len": seq_len, "num_kv_pairs": num_kv_pairs,
        "vocab_size": vocab_size, "power_a": float(power_a), "data_seed": int_option(config, "data_seed", 0),
        **{f"num_{split}": size for split, size in split_sizes(config).items()},
    }
    mix = train_mix(config, seq_len, vocab_size)
    if mix:  # only then a field: the data (and cache) of a task without a mix stay as they were
        fields["train_mix"] = [list(item) for item in mix]
    train_seed = split_seed(fields["data_seed"], "train")

    def make_split(num: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        if mix and seed == train_seed:
            return make_mixed(num, seq_len, mix, vocab_size, seed, float(power_a))
        return make(num, seq_len, num_kv_pairs, vocab_size, seed, float(power_a))

    splits = generated_splits(Path(data_dir) / "recall" / "mqar", fields, make_split)
    num_values = vocab_size - vocab_size // 2
    length_tests = [length_test(fields, length, data_dir) for length in test_lengths(config, seq_len, num_kv_pairs,
                                                                                      vocab_size)]
    info = TaskInfo(
        name=config.get("name", "mqar"),
        family="recall",
        seq_len=seq_len,
        vocab_size=vocab_size + ID_SHIFT,
        num_classes=vocab_size + ID_SHIFT,  # a prediction is a token id
        target="token",
        metric="accuracy",
        baseline_name="a value from the context at random: 1 / key-value pairs",
        extra={"num_kv_pairs": num_kv_pairs, "num_values": num_values, "power_a": float(power_a)},
    )
    return TaskData(info=info, train=TokenTargets(splits["train"]), val=TokenTargets(splits["val"]),
                    test=TokenTargets(splits["test"]), baseline=mqar_baseline({"num_kv_pairs": num_kv_pairs}),
                    length_tests=length_tests)


def test_lengths(config: Mapping, seq_len: int, num_kv_pairs: int, vocab_size: int) -> list[int]:
    """``task.test_lengths``: longer lengths to test at, each checked as Zoology's generator checks
    its sizes (the pairs grow with the length, see ``length_test``)."""
    lengths = config.get("test_lengths") or []
    if not isinstance(lengths, list) or any(isinstance(n, bool) or not isinstance(n, int) or n <= seq_len
                                            for n in lengths):
        raise TaskError(f"task.test_lengths={lengths!r}: expected a list of lengths longer than seq_len={seq_len}")
    for n in lengths:
        check(n, n * num_kv_pairs // seq_len, vocab_size)
    return lengths


def length_test(fields: Mapping, length: int, data_dir: Path) -> LengthTest:
    """A test split of ``length`` tokens with as many pairs per token as the task's (Based's test
    points keep that density: 4 pairs in 64 tokens, 256 in 1,024), so a longer test binds more
    pairs than training did. Its examples are drawn from the test seed at that size."""
    pairs = length * fields["num_kv_pairs"] // fields["seq_len"]
    sized = {key: value for key, value in fields.items() if key not in ("num_train", "num_val", "train_mix")}
    sized.update(seq_len=length, num_kv_pairs=pairs)
    split = generated_splits(
        Path(data_dir) / "recall" / "mqar", sized,
        lambda num, seed: make(num, length, pairs, fields["vocab_size"], seed, fields["power_a"]), names=("test",),
    )["test"]
    return LengthTest(seq_len=length, split=TokenTargets(split), baseline=mqar_baseline({"num_kv_pairs": pairs}),
                      extra={"num_kv_pairs": pairs})
