"""Real DNA classification benchmarks, read from local files or the Hugging Face Hub:

- Genomic Benchmarks (Grešová et al. 2023, BMC Genomic Data): e.g. ``human_nontata_promoters``,
  ``human_enhancers_cohn``, ``demo_human_or_worm``. Hub copies: ``katarinagresova/
  Genomic_Benchmarks_<dataset>`` (columns ``seq``, ``label``). The paper reports accuracy.
- Nucleotide Transformer downstream tasks (Dalla-Torre et al. 2024, Nature Methods): e.g.
  ``promoter_all``, ``H3K4me3``, ``splice_sites_all``. The release is
  ``InstaDeepAI/nucleotide_transformer_downstream_tasks``: ``<task>/train.fna`` and
  ``<task>/test.fna`` with ``>name|label`` headers (columns ``sequence``, ``name``, ``label`` once
  loaded). The paper scores histone and enhancer tasks by MCC, promoter and splice-site tasks by
  F1, and the three-class splice task by accuracy.

Both ship train and test only; validation is a seeded ``val_fraction`` of train. Local data is
looked for first (``task.path``, then ``<data_dir>/<benchmark>/<dataset>``, then the
``genomic-benchmarks`` package's own ``~/.genomic_benchmarks/<dataset>``) in any layout of
``tasks.genomics.formats``; then, unless ``source=local``, the Hub, never running a repository's
code: the Nucleotide Transformer release's folder for the dataset with ``huggingface_hub``'s
``snapshot_download`` (its repository is a loading script that ``datasets`` 4 and later refuse; the
files beside it are read as local files), Genomic Benchmarks through ``datasets``. Both are cached
under ``<data_dir>/huggingface``. Offline (``HF_HUB_OFFLINE=1``) the Hub attempt fails at once
unless the files are cached.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import datasets
import huggingface_hub
import numpy as np

from tasks.base import TaskData, TaskError, TaskInfo
from tasks.genomics.formats import Examples, read_class_folders, read_csv, read_fasta, read_hf_split
from tasks.genomics.nucleotides import VOCAB_SIZE
from tasks.options import choice_option, int_option
from tasks.splits import SequenceClassification, majority_baseline

RELEASE_SPLITS = ("train", "test")
SOURCES = ("auto", "local", "hub")
FASTA_SUFFIXES = (".fna", ".fasta", ".fa")
LAYOUTS = ("a `datasets` save_to_disk folder (dataset_dict.json)", "train.csv + test.csv",
           "train.fna + test.fna (>name|label headers)", "train/<class>/*.txt + test/<class>/*.txt")

# The Nucleotide Transformer paper's metric per task (its tables; HyenaDNA and Caduceus reuse it).
NT_PAPER_METRICS = {
    **dict.fromkeys(("H3", "H3K14ac", "H3K36me3", "H3K4me1", "H3K4me2", "H3K4me3", "H3K79me3", "H3K9ac", "H4",
                     "H4ac", "enhancers", "enhancers_types"), "mcc"),
    **dict.fromkeys(("promoter_all", "promoter_no_tata", "promoter_tata", "splice_sites_acceptors",
                     "splice_sites_donors"), "f1"),
    "splice_sites_all": "accuracy",
}


@dataclass(frozen=True)
class Benchmark:
    """Where one benchmark's data lives and how to get it."""

    folder: str  # under data_dir
    hub_id: str  # default Hub repository, formatted with the dataset name
    # True: the Hub repository holds the release's files, a folder per dataset (``task.hub_config``
    # names another folder); False: ``datasets`` loads the repository (``task.hub_config``: its config).
    hub_folder_per_dataset: bool
    package_cache: str | None  # another folder its own tooling fills, formatted with the dataset
    how_to_get: str  # formatted with dataset, root, parent and hub_id
    paper_metrics: Mapping[str, str]  # the metric its paper reports, per dataset
    default_metric: str  # for datasets not in ``paper_metrics``


GENOMIC_BENCHMARKS = Benchmark(
    folder="genomic_benchmarks",
    hub_id="katarinagresova/Genomic_Benchmarks_{dataset}",
    hub_folder_per_dataset=False,
    package_cache="~/.genomic_benchmarks/{dataset}",
    how_to_get=("`pip install genomic-benchmarks` then `python -c \"from genomic_benchmarks.loc2seq import "
                "download_dataset; download_dataset('{dataset}', dest_path='{parent}')\"`, or run once online "
                "to fetch {hub_id} from the Hub"),
    paper_metrics={},
    default_metric="accuracy",
)
NUCLEOTIDE_TRANSFORMER = Benchmark(
    folder="nucleotide_transformer",
    hub_id="InstaDeepAI/nucleotide_transformer_downstream_tasks",
    hub_folder_per_dataset=True,
    package_cache=None,
    how_to_get=("`hf download InstaDeepAI/nucleotide_transformer_downstream_tasks --repo-type dataset "
                "--include '{dataset}/*' --local-dir {parent}` (writes {root}/train.fna and test.fna)"),
    paper_metrics=NT_PAPER_METRICS,
    default_metric="mcc",
)


class HubUnavailable(Exception):
    """The Hub copy could not be loaded (offline, unknown repository, unsupported format)."""


def read_local(root: Path, dataset: str) -> dict[str, Examples] | None:
    """The train and test examples under ``root`` in the first layout found; None if ``root`` is absent."""
    if not root.is_dir():
        return None
    if (root / "dataset_dict.json").is_file():
        return read_dataset_dict(datasets.load_from_disk(str(root)), str(root), dataset)
    if all((root / f"{split}.csv").is_file() for split in RELEASE_SPLITS):
        return {split: read_csv(root / f"{split}.csv") for split in RELEASE_SPLITS}
    for suffix in FASTA_SUFFIXES:
        if all((root / f"{split}{suffix}").is_file() for split in RELEASE_SPLITS):
            return {split: read_fasta(root / f"{split}{suffix}") for split in RELEASE_SPLITS}
    if all((root / split).is_dir() for split in RELEASE_SPLITS):
        (train, train_classes), (test, test_classes) = (read_class_folders(root / split) for split in RELEASE_SPLITS)
        if train_classes != test_classes:
            raise TaskError(f"{root}: train classes {train_classes} differ from test classes {test_classes}")
        return {"train": train, "test": test}
    raise TaskError(f"{root}: none of the known layouts: {'; '.join(LAYOUTS)}")


def read_dataset_dict(splits: datasets.DatasetDict, where: str, dataset: str) -> dict[str, Examples]:
    """Train and test of a ``datasets`` DatasetDict; keeps only ``dataset``'s rows when a ``task``
    column holds several tasks (the revised Nucleotide Transformer release)."""
    missing = [split for split in RELEASE_SPLITS if split not in splits]
    if missing:
        raise TaskError(f"{where}: splits {list(splits)} lack {missing}")
    examples = {}
    for split in RELEASE_SPLITS:
        part = splits[split]
        if "task" in part.column_names:
            part = part.filter(lambda task: task == dataset, input_columns="task")
        examples[split] = read_hf_split(part, f"{where} split {split}")
    return examples


def read_hub(hub_id: str, config_name: str | None, cache_dir: Path, dataset: str) -> dict[str, Examples]:
    """Train and test from the Hub through ``datasets`` (cached under ``cache_dir``)."""
    try:
        splits = datasets.load_dataset(hub_id, config_name, cache_dir=str(cache_dir))
    except (OSError, ValueError, RuntimeError) as exc:  # offline, unknown repository or config, script-only repo
        raise HubUnavailable(f"{type(exc).__name__}: {exc}".splitlines()[0]) from None
    return read_dataset_dict(splits, hub_id, dataset)


def read_hub_folder(hub_id: str, folder: str, cache_dir: Path, dataset: str) -> dict[str, Examples]:
    """Train and test from one folder of a Hub repository holding the release's files: only that
    folder is downloaded (cached under ``cache_dir``), then read as a local folder."""
    try:
        snapshot = huggingface_hub.snapshot_download(hub_id, repo_type="dataset", allow_patterns=[f"{folder}/*"],
                                                     cache_dir=str(cache_dir))
    except (OSError, ValueError) as exc:  # offline and not cached, unknown repository, Hub unreachable
        raise HubUnavailable(f"{type(exc).__name__}: {exc}".splitlines()[0]) from None
    found = read_local(Path(snapshot) / folder, dataset)
    if found is None:
        raise HubUnavailable(f"no folder {folder!r} in the repository")
    return found


def optional_cap(config: Mapping, key: str) -> int | None:
    """A split size: a positive int, or None for all of it."""
    return None if config.get(key) is None else int_option(config, key)


def find_examples(config: Mapping, data_dir: Path, benchmark: Benchmark,
                  dataset: str) -> tuple[dict[str, Examples], str]:
    """The release's train and test examples and where they came from; a TaskError saying where
    it looked and how to get the data when there are none."""
    source = choice_option(config, "source", SOURCES)
    root = data_dir / benchmark.folder / dataset
    roots = [Path(config["path"]).expanduser()] if config.get("path") else []
    roots.append(root)
    if benchmark.package_cache:
        roots.append(Path(benchmark.package_cache.format(dataset=dataset)).expanduser())
    hub_id = config.get("hub_id") or benchmark.hub_id.format(dataset=dataset)
    tried = []
    if source in ("auto", "local"):
        for candidate in roots:
            tried.append(f"{candidate} (absent)" if not candidate.is_dir() else str(candidate))
            found = read_local(candidate, dataset)
            if found is not None:
                return found, str(candidate)
    if source in ("auto", "hub"):
        try:
            cache_dir = data_dir / "huggingface"
            if benchmark.hub_folder_per_dataset:
                folder = config.get("hub_config") or dataset
                return read_hub_folder(hub_id, folder, cache_dir, dataset), f"{hub_id}/{folder}"
            return read_hub(hub_id, config.get("hub_config"), cache_dir, dataset), hub_id
        except HubUnavailable as exc:
            tried.append(f"Hub dataset {hub_id} ({exc})")
    how = benchmark.how_to_get.format(dataset=dataset, root=root, parent=root.parent, hub_id=hub_id)
    raise TaskError(f"task {config.get('name')!r}: no data for dataset {dataset!r}. Tried: {'; '.join(tried)}. "
                    f"To get it: {how}")


def load_real(config: Mapping, data_dir: Path, benchmark: Benchmark) -> TaskData:
    """Train (less a seeded validation share), val and test of one dataset of ``benchmark``."""
    dataset = config.get("dataset")
    if not isinstance(dataset, str) or not dataset:
        raise TaskError(f"task.dataset={dataset!r}: name a dataset of the benchmark, e.g. "
                        f"{'human_nontata_promoters' if benchmark is GENOMIC_BENCHMARKS else 'promoter_all'}")
    seq_len = int_option(config, "seq_len")
    val_fraction = config.get("val_fraction")
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) or not 0 < val_fraction < 1:
        raise TaskError(f"task.val_fraction={val_fraction!r}: expected a number in (0, 1)")
    caps = {split: optional_cap(config, f"num_{split}") for split in ("train", "val", "test")}
    rng = np.random.default_rng(int_option(config, "data_seed", 0))
    release, origin = find_examples(config, Path(data_dir), benchmark, dataset)

    # Shuffled before capping, so a budget's first examples are a random sample, not one class.
    (train_seqs, train_labels), (test_seqs, test_labels) = release["train"], release["test"]
    order = rng.permutation(len(train_seqs))
    num_val = max(1, round(len(order) * val_fraction))
    picks = {"val": order[:num_val], "train": order[num_val:]}
    splits = {split: ([train_seqs[i] for i in index], [train_labels[i] for i in index])
              for split, index in picks.items()}
    test_order = rng.permutation(len(test_seqs))
    splits["test"] = ([test_seqs[i] for i in test_order], [test_labels[i] for i in test_order])
    splits = {split: (seqs[: caps[split]], labels[: caps[split]]) for split, (seqs, labels) in splits.items()}

    all_labels = train_labels + test_labels
    if len(set(all_labels)) < 2 or not splits["train"][0] or not splits["test"][0]:
        raise TaskError(f"{origin}: dataset {dataset!r} needs two classes or more and non-empty train and test splits")
    tables = {split: datasets.Dataset.from_dict({"input_ids": seqs, "label": labels})
              for split, (seqs, labels) in splits.items()}
    paper_metric = benchmark.paper_metrics.get(dataset, benchmark.default_metric)
    info = TaskInfo(
        name=config.get("name", benchmark.folder),
        family="genomics",
        seq_len=seq_len,
        vocab_size=VOCAB_SIZE,
        num_classes=max(all_labels) + 1,
        extra={"dataset": dataset, "origin": origin, "paper_metric": paper_metric,
               "metrics": sorted({"accuracy", paper_metric}),
               "longest_sequence": max(len(s) for s in train_seqs + test_seqs)},
    )
    return TaskData(
        info=info,
        train=SequenceClassification(tables["train"], seq_len),
        val=SequenceClassification(tables["val"], seq_len),
        test=SequenceClassification(tables["test"], seq_len),
        baseline=majority_baseline(splits["train"][1], splits["test"][1]),
    )


def load_genomic_benchmarks(config: Mapping, data_dir: Path) -> TaskData:
    """One Genomic Benchmarks dataset (``task.dataset``)."""
    return load_real(config, data_dir, GENOMIC_BENCHMARKS)


def load_nucleotide_transformer(config: Mapping, data_dir: Path) -> TaskData:
    """One Nucleotide Transformer downstream task (``task.dataset``)."""
    return load_real(config, data_dir, NUCLEOTIDE_TRANSFORMER)
