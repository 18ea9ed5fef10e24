"""ListOps (Long Range Arena): nested MAX / MIN / MED / SM (sum mod 10) expressions over digits;
predict the value, 0-9.

The generator follows LRA's ``lra_benchmarks/data/listops.py``: a node at depth < 10 is an
operation with probability 0.25 (else a digit), an operation takes 2-10 arguments, the root is at
depth 1, and an expression is kept when its length (operators, ``]`` and digits; not the
parentheses) is strictly between 500 and 2000. It prints LRA's nested-pair form, where
``[SM 2 6 5]`` reads ``( ( ( ( [SM 2 ) 6 ) 5 ) ] )``, and writes LRA's TSV files.

As in LRA, which collected expressions in a set, an expression appears at most once across the
three splits; unlike LRA, whose set order (so its splits) varied from run to run, the files are
byte-identical for a seed: train takes the first unique draws, then val, then test.

Tokens: LRA's input pipeline split on non-alphanumerics, so ``[``, ``]``, ``(`` and ``)`` were
all dropped and the nesting was lost (google-research/long-range-arena issues #6, #14, #20). Here
the operators keep their ``[`` and ``]`` has its own id, the token set LRA's authors named as
intended. The parentheses are dropped because the operators and ``]`` imply them (``decode``
restores them exactly) and keeping them would triple the length: 3 * length - 2 tokens, up to
5998, most of which a 2000-token model would never see.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import datasets
import numpy as np
from tqdm import tqdm

from tasks.base import SPLITS, TaskData, TaskError, TaskInfo
from tasks.cache import cached_splits, files_fingerprint
from tasks.options import choice_option, int_option, split_sizes
from tasks.splits import SequenceClassification, classification_split, majority_baseline
from tasks.tsv import read_tsv, write_tsv

# The LRA generator's parameters.
OPERATORS = ("[MAX", "[MIN", "[MED", "[SM")
END = "]"
OPERATION_P = 0.25  # chance that a node above the depth limit is an operation
MAX_DEPTH = 10  # the root is at depth 1; nodes at depth 10 are digits
MAX_ARGS = 10  # an operation takes 2..MAX_ARGS arguments
MIN_LENGTH, MAX_LENGTH = 500, 2000  # kept lengths lie strictly between these

HEADER = ("Source", "Target")
NUM_CLASSES = 10
FORMAT_VERSION = 1  # part of the cache key: bump when the files or the token ids change
SOURCES = ("generate", "local")
RELEASE_DIR = Path("lra_release") / "listops-1000"
RELEASE_URL = "https://storage.googleapis.com/long-range-arena/lra_release.gz"

DIGITS = tuple(str(value) for value in range(10))
VOCAB = ("<pad>", *OPERATORS, END, *DIGITS)  # id 0 is padding
TOKEN_IDS = {token: index for index, token in enumerate(VOCAB)}
IMPLIED = ("(", ")")  # format tokens that the operators and END imply; not fed to the model
_DROP_IMPLIED = str.maketrans("", "", "".join(IMPLIED))
PROGRESS_DELAY_S = 2.0  # progress bars appear only for work that takes longer than this


def split_file(directory: Path, split: str) -> Path:
    """The path of a split's TSV file, named as in the LRA release."""
    return directory / f"basic_{split}.tsv"


def apply_operator(operator: str, values: list[int]) -> int:
    """The value of ``operator`` over its arguments (MED of an even count: the floor of the mean
    of the middle two, as LRA's ``int(np.median(...))``)."""
    if operator == "[MAX":
        return max(values)
    if operator == "[MIN":
        return min(values)
    if operator == "[SM":
        return sum(values) % 10
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) // 2


def format_operation(operator: str, args: list[str]) -> str:
    """LRA's printed form of an operation: a left-nested pair per argument, then ``]``."""
    return "( " * (len(args) + 1) + operator + " " + " ) ".join(args) + " ) ] )"


class _TooLong(Exception):
    """Raised inside the sampler once an expression is sure to reach MAX_LENGTH."""


def sample_expression(
    rng: random.Random, min_length: int = MIN_LENGTH, max_length: int = MAX_LENGTH
) -> tuple[str, int]:
    """Draw expressions until one has a length in (min_length, max_length); return it and its value.

    Abandoning an expression as soon as it reaches max_length saves building what would be dropped
    and leaves the distribution of the kept ones unchanged.
    """
    rand = rng.random
    length = 0

    def operation(depth: int) -> tuple[str, int]:
        nonlocal length
        num_args = 2 + int(rand() * (MAX_ARGS - 1))
        length += 2 + num_args  # operator, END and, for now, one token per argument
        if length >= max_length:
            raise _TooLong
        args, values = [], []
        may_nest = depth + 1 < MAX_DEPTH
        for _ in range(num_args):
            if may_nest and rand() < OPERATION_P:
                length -= 1  # the nested operation counts its own tokens
                text, value = operation(depth + 1)
            else:
                value = int(rand() * 10)
                text = DIGITS[value]
            args.append(text)
            values.append(value)
        operator = OPERATORS[int(rand() * len(OPERATORS))]
        return format_operation(operator, args), apply_operator(operator, values)

    while True:
        if rand() >= OPERATION_P:
            continue  # a lone digit: length 1, never kept
        length = 0
        try:
            text, value = operation(1)
        except _TooLong:
            continue
        if length > min_length:
            return text, value


def generate(
    out_dir: str | Path, num_train: int = 96_000, num_val: int = 2_000, num_test: int = 2_000, seed: int = 0,
    min_length: int = MIN_LENGTH, max_length: int = MAX_LENGTH,
) -> None:
    """Write ``basic_{train,val,test}.tsv`` (columns Source, Target) to ``out_dir`` as in the LRA
    release; the same arguments give byte-identical files. ``min_length`` and ``max_length`` bound
    the kept lengths (LRA's 500 and 2000 by default; shorter for the CPU variant ``listops_short``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = {"train": num_train, "val": num_val, "test": num_test}
    total = sum(sizes.values())
    rng = random.Random(seed)
    seen: set[bytes] = set()  # digests, not texts: 96k texts would hold ~600 MB
    with tqdm(total=total, desc="generating ListOps", unit="ex", delay=PROGRESS_DELAY_S) as bar:

        def unique_rows(count: int) -> Iterator[tuple[str, int]]:
            while count > 0:
                text, value = sample_expression(rng, min_length, max_length)
                digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
                if digest not in seen:
                    seen.add(digest)
                    count -= 1
                    bar.update()
                    yield text, value

        for split in SPLITS:
            write_tsv(split_file(out_dir, split), HEADER, unique_rows(sizes[split]))


def encode(source: str, where: str = "input") -> np.ndarray:
    """Token ids (uint8) of a printed expression, without the implied parentheses; ``where``
    names the source (file and line) in the error for an unknown token."""
    tokens = source.translate(_DROP_IMPLIED).split()
    try:
        return np.fromiter(map(TOKEN_IDS.__getitem__, tokens), dtype=np.uint8, count=len(tokens))
    except KeyError as exc:
        valid = " ".join((*VOCAB[1:], *IMPLIED))
        raise TaskError(f"{where}: unknown ListOps token {exc.args[0]!r}; valid tokens: {valid}") from None


def decode(ids: Iterable[int]) -> str:
    """The printed expression of token ids (padding ignored), parentheses restored as LRA prints
    them; ``decode(encode(source)) == source`` for every well-formed expression."""
    frames: list[list[str]] = [[]]  # one frame per open operation: its operator, then its arguments
    for index in ids:
        token = VOCAB[int(index)]
        if token in OPERATORS:
            frames.append([token])
        elif token == END:
            operator, *args = frames.pop()
            frames[-1].append(format_operation(operator, args))
        elif token != "<pad>":
            frames[-1].append(token)
    return " ".join(frames[0])


def read_split(path: Path) -> datasets.Dataset:
    """One split read from a release-format TSV file: ``input_ids`` (uint8 token ids) and ``label``."""
    input_ids, labels = [], []
    rows = read_tsv(path, num_fields=len(HEADER), header=HEADER)
    for line, (source, target) in tqdm(rows, desc=f"reading {path.name}", unit="ex", delay=PROGRESS_DELAY_S):
        if target not in DIGITS:
            raise TaskError(f"{path}:{line}: Target {target!r} is not a digit 0-9")
        input_ids.append(encode(source, where=f"{path}:{line}"))
        labels.append(int(target))
    return classification_split(input_ids, labels)


def read_splits(directory: Path) -> datasets.DatasetDict:
    """The three splits of a directory laid out as ``lra_release/listops-1000/``."""
    return datasets.DatasetDict({split: read_split(split_file(directory, split)) for split in SPLITS})


def _local_release(data_dir: Path) -> Path:
    """The unpacked LRA release's ListOps folder; a TaskError saying how to get it otherwise."""
    release = data_dir / RELEASE_DIR
    missing = [str(split_file(release, split)) for split in SPLITS if not split_file(release, split).is_file()]
    if missing:
        raise TaskError(
            f"task.source=local: missing {', '.join(missing)}; download the LRA release {RELEASE_URL} "
            f"(linked from the google-research/long-range-arena README) and unpack it under {data_dir}, "
            "or set task.source=generate"
        )
    return release


def load(config: Mapping, data_dir: Path) -> TaskData:
    """Build (or read from ``<data_dir>/listops/<key>/``) the splits described by ``config``."""
    source = choice_option(config, "source", SOURCES)
    seq_len = int_option(config, "seq_len")
    min_length = int_option(config, "min_length", minimum=0) if "min_length" in config else MIN_LENGTH
    max_length = int_option(config, "max_length") if "max_length" in config else MAX_LENGTH
    if max_length - min_length < 2 or max_length > MAX_LENGTH:
        raise TaskError(f"task.min_length={min_length}, task.max_length={max_length}: kept lengths lie strictly "
                        f"between them, so max_length - min_length must be >= 2, and max_length <= {MAX_LENGTH}")
    if seq_len > max_length:  # the record would claim a length that no example reaches
        raise TaskError(f"task.seq_len={seq_len}: ListOps expressions are shorter than {max_length} tokens "
                        f"(task.max_length; LRA's is {MAX_LENGTH}); use task.seq_len <= {max_length}")
    sizes = split_sizes(config)
    data_dir = Path(data_dir)

    if source == "generate":
        seed = int_option(config, "data_seed", minimum=0)
        key = f"generate-train{sizes['train']}-val{sizes['val']}-test{sizes['test']}-seed{seed}-v{FORMAT_VERSION}"
        if (min_length, max_length) != (MIN_LENGTH, MAX_LENGTH):  # LRA's lengths add no suffix: built caches stay valid
            key += f"-len{min_length}-{max_length}"

        def build(work_dir: Path) -> datasets.DatasetDict:
            generate(work_dir, sizes["train"], sizes["val"], sizes["test"], seed, min_length, max_length)
            return read_splits(work_dir)

    else:
        release = _local_release(data_dir)
        files = [split_file(release, split) for split in SPLITS]
        key = f"local-{files_fingerprint(files)}-v{FORMAT_VERSION}"

        def build(work_dir: Path) -> datasets.DatasetDict:
            return read_splits(release)

    splits = cached_splits(data_dir / "listops" / key, build)
    for split, size in sizes.items():
        if size > len(splits[split]):
            raise TaskError(f"task.num_{split}={size}: the {source} data has only {len(splits[split])} examples")
        splits[split] = splits[split].select(range(size))  # the release's splits may be longer

    info = TaskInfo(
        name=config.get("name", "listops"),
        family="lra",
        seq_len=seq_len,
        vocab_size=len(VOCAB),
        num_classes=NUM_CLASSES,
        baseline_name="majority class",
        extra={"source": source, "cache_key": key, "min_length": min_length, "max_length": max_length,
               **{f"num_{split}": size for split, size in sizes.items()}},
    )
    train, val, test = (SequenceClassification(splits[split], seq_len) for split in SPLITS)
    return TaskData(info, train, val, test, baseline=majority_baseline(train.labels, test.labels))
