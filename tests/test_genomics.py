"""Genomics tasks: the synthetic generator's labels checked by scanning the sequences, and the real
loaders fed small files in every release format (CSV, FASTA, class folders, a `datasets` folder)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import datasets
import huggingface_hub.constants
import numpy as np
import pytest
import torch

import tasks
from tasks.base import TaskError
from tasks.genomics import benchmarks, synthetic
from tasks.genomics.nucleotides import decode, encode

# Synthetic ---------------------------------------------------------------------------------------


def synthetic_config(**overrides) -> dict:
    config = {"name": "genomics", "source": "generate", "seq_len": 256, "num_train": 80, "num_val": 10,
              "num_test": 40, "data_seed": 0, "num_motif_pairs": 3, "motif_len": 6, "region_fraction": 0.25,
              "markov_order": 2, "n_rate": 0.01, "mismatched_share": 0.5}
    return {**config, **overrides}


def occurrences(text: str, motif: str) -> list[int]:
    """Every start of ``motif`` in ``text``, overlapping ones included."""
    return [m.start() for m in re.finditer(f"(?={motif})", text)]


def scanned_label(text: str, motifs_a: list[str], motifs_b: list[str], region: int) -> int:
    """The task's rule, read off the sequence: some A_i in the first part and its B_i in the last."""
    first, last = text[:region], text[-region:]
    return int(any(a in first and b in last for a, b in zip(motifs_a, motifs_b)))


def test_synthetic_labels_are_decided_by_the_planted_motifs(tmp_path):
    data = tasks.load("genomics", synthetic_config(), tmp_path)
    info = data.info
    motifs_a, motifs_b, region = info.extra["motifs_a"], info.extra["motifs_b"], info.extra["region_length"]
    assert region == 64 and len(motifs_a) == len(motifs_b) == 3
    kinds, shortcut_hits, total = set(), 0, 0
    for split in (data.train, data.val, data.test):
        for index in range(len(split)):
            item = split[index]
            text = decode(item["input_ids"].numpy())
            assert len(text) == 256 and set(text) <= set("ACGTN")
            assert int(item["label"]) == scanned_label(text, motifs_a, motifs_b, region)
            found_a = [(i, p) for i, m in enumerate(motifs_a) for p in occurrences(text, m)]
            found_b = [(i, p) for i, m in enumerate(motifs_b) for p in occurrences(text, m)]
            # at most one of each, and only inside its own end part: nothing else to go by
            assert len(found_a) <= 1 and len(found_b) <= 1
            assert all(p + 6 <= region for _, p in found_a) and all(p >= 256 - region for _, p in found_b)
            a, b = (found_a[0][0] if found_a else None), (found_b[0][0] if found_b else None)
            shortcut_hits += int(None not in (a, b)) == int(item["label"])
            total += 1
            kinds.add("positive" if a is not None and a == b else "mismatched" if None not in (a, b)
                      else "a only" if a is not None else "b only" if b is not None else "neither")
    assert kinds == {"positive", "mismatched", "a only", "b only", "neither"}
    # "some A first and some B last" without pairing: right on all but the mismatched negatives
    assert info.extra["presence_shortcut_accuracy"] == 0.75
    assert abs(shortcut_hits / total - 0.75) < 0.02


def test_synthetic_classes_are_balanced_and_seeds_decide(tmp_path):
    design = synthetic.make_design(0, 3, 4, 8)
    tokens, labels = synthetic.generate(design, 400, 512, seed=1)
    assert tokens.dtype == labels.dtype == torch.int64 and tokens.shape == (400, 512)
    assert int(labels.sum()) == 200
    again = synthetic.generate(design, 400, 512, seed=1)
    assert torch.equal(tokens, again[0]) and torch.equal(labels, again[1])
    other = synthetic.generate(design, 400, 512, seed=2)
    assert (tokens != other[0]).any(dim=1).all()
    assert synthetic.make_design(1, 3, 4, 8).motifs_a != design.motifs_a
    # background: Markov statistics, mostly A/C/G/T with a few N
    counts = np.bincount(tokens.flatten().numpy(), minlength=6)
    assert counts[0] == 0 and counts[5] < 0.01 * tokens.numel() and (counts[1:5] > 0.1 * tokens.numel()).all()


def test_synthetic_loader_caches_and_describes(tmp_path):
    data = tasks.load("genomics", synthetic_config(), tmp_path)
    assert (data.info.family, data.info.vocab_size, data.info.num_classes) == ("genomics", 6, 2)
    assert data.info.extra["synthetic"] is True
    assert data.baseline == pytest.approx(0.5)
    assert [len(data.train), len(data.val), len(data.test)] == [80, 10, 40]
    again = tasks.load("genomics", synthetic_config(), tmp_path)
    assert torch.equal(again.test[5]["input_ids"], data.test[5]["input_ids"])
    assert len(list((tmp_path / "genomics" / "synthetic").iterdir())) == 1


def test_one_motif_pair_means_both_or_not(tmp_path):
    data = tasks.load("genomics", synthetic_config(num_motif_pairs=1, data_seed=3), tmp_path)
    (a,), (b,) = data.info.extra["motifs_a"], data.info.extra["motifs_b"]
    for index in range(len(data.train)):
        text = decode(data.train[index]["input_ids"].numpy())
        assert int(data.train[index]["label"]) == int(a in text and b in text)


@pytest.mark.parametrize("key,value", [("region_fraction", 0.01), ("motif_len", 20), ("num_motif_pairs", 0),
                                       ("source", "local"), ("n_rate", 0.5)])
def test_synthetic_rejects_bad_settings(tmp_path, key, value):
    with pytest.raises(TaskError, match=f"task.{key}="):
        tasks.load("genomics", synthetic_config(**{key: value}), tmp_path)


# Real benchmarks ---------------------------------------------------------------------------------

TRAIN = [("ACGTACGTAA", 0), ("ccgtNNacgt", 1), ("TTTTGGGGCC", 0), ("ACGRYACGTA", 1), ("GGGGAAAACC", 1),
         ("CATCATCATC", 0), ("GATTACAGAT", 1), ("ACACACACAC", 0), ("TGTGTGTGTG", 1), ("AAAACCCCGG", 0)]
TEST = [("CCCCAAAATT", 1), ("GTGTACACGT", 0), ("AATTAATTCC", 0)]


def real_config(name: str, **overrides) -> dict:
    config = {"name": name, "dataset": "toy", "seq_len": 8, "source": "local", "path": None, "hub_id": None,
              "hub_config": None, "val_fraction": 0.2, "num_train": None, "num_val": None, "num_test": None,
              "data_seed": 0}
    return {**config, **overrides}


def all_examples(data) -> dict[str, list[tuple[str, int]]]:
    return {name: [(decode(split[i]["input_ids"].numpy()), int(split[i]["label"])) for i in range(len(split))]
            for name, split in (("train", data.train), ("val", data.val), ("test", data.test))}


def expected(pairs, seq_len=8):
    """What a loader should give back: canonical bases (ambiguity codes read as N), truncated."""
    return sorted((decode(encode(seq))[:seq_len], label) for seq, label in pairs)


def write_csv(root: Path, column: str = "sequence") -> None:
    root.mkdir(parents=True)
    for split, pairs in (("train", TRAIN), ("test", TEST)):
        lines = [f"{column},label,name"] + [f"{seq},{label},chr1:{i}" for i, (seq, label) in enumerate(pairs)]
        (root / f"{split}.csv").write_text("\n".join(lines) + "\n")


def write_fasta(root: Path) -> None:
    root.mkdir(parents=True)
    for split, pairs in (("train", TRAIN), ("test", TEST)):
        # wrapped at 6 bases, as FASTA files often are
        text = "".join(f">chr2:{100 * i}-{100 * i + 10}|{label}\n{seq[:6]}\n{seq[6:]}\n"
                       for i, (seq, label) in enumerate(pairs))
        (root / f"{split}.fna").write_text(text)


def write_class_folders(root: Path) -> None:
    for split, pairs in (("train", TRAIN), ("test", TEST)):
        for i, (seq, label) in enumerate(pairs):
            folder = root / split / ("negative", "positive")[label]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i}.txt").write_text(seq)


def write_arrow(root: Path, with_task_column: bool = False) -> None:
    def split(pairs):
        columns = {"seq": [s for s, _ in pairs], "label": [label for _, label in pairs]}
        if with_task_column:  # the revised NT release: every task in one table
            columns = {"sequence": columns["seq"] + ["ACGT"], "label": columns["label"] + [7],
                       "task": ["toy"] * len(pairs) + ["other"]}
        return datasets.Dataset.from_dict(columns)

    datasets.DatasetDict({"train": split(TRAIN), "test": split(TEST)}).save_to_disk(str(root))


@pytest.mark.parametrize("task,folder,writer", [
    ("nucleotide_transformer", "nucleotide_transformer", write_csv),
    ("genomic_benchmarks", "genomic_benchmarks", lambda root: write_csv(root, column="seq")),
    ("nucleotide_transformer", "nucleotide_transformer", write_fasta),
    ("genomic_benchmarks", "genomic_benchmarks", write_class_folders),
    ("genomic_benchmarks", "genomic_benchmarks", write_arrow),
    ("nucleotide_transformer", "nucleotide_transformer", lambda root: write_arrow(root, with_task_column=True)),
])
def test_real_loader_reads_every_release_format(tmp_path, task, folder, writer):
    writer(tmp_path / folder / "toy")
    data = tasks.load(task, real_config(task), tmp_path)
    got = all_examples(data)
    assert sorted(got["train"] + got["val"]) == expected(TRAIN)
    assert sorted(got["test"]) == expected(TEST)
    assert (len(got["train"]), len(got["val"])) == (8, 2)
    assert (data.info.family, data.info.vocab_size, data.info.num_classes) == ("genomics", 6, 2)
    assert data.info.extra["longest_sequence"] == 10 and data.info.extra["dataset"] == "toy"
    assert data.baseline == pytest.approx(2 / 3)  # train majority is 0 (4 of 8) or a tie broken to 0


def test_split_is_seeded_and_capped_after_shuffling(tmp_path):
    write_class_folders(tmp_path / "genomic_benchmarks" / "toy")
    config = real_config("genomic_benchmarks", num_train=4, num_val=1, num_test=2)
    first = all_examples(tasks.load("genomic_benchmarks", config, tmp_path))
    assert [len(first[s]) for s in ("train", "val", "test")] == [4, 1, 2]
    assert first == all_examples(tasks.load("genomic_benchmarks", config, tmp_path))
    other = all_examples(tasks.load("genomic_benchmarks", {**config, "data_seed": 5}, tmp_path))
    assert other != first
    # the class folders are read negatives first; a capped split is a sample, not the first files
    first_files = expected([pair for pair in TRAIN if pair[1] == 0][:4])
    assert sorted(first["train"]) != first_files and {label for _, label in first["train"]} == {0, 1}


def test_explicit_path_and_paper_metric(tmp_path):
    write_fasta(tmp_path / "elsewhere")
    data = tasks.load("nucleotide_transformer", real_config("nucleotide_transformer", dataset="H3K4me3",
                                                            path=str(tmp_path / "elsewhere")), tmp_path)
    assert data.info.extra["paper_metric"] == "mcc" and data.info.extra["metrics"] == ["accuracy", "mcc"]
    assert data.info.metric == "accuracy"
    write_fasta(tmp_path / "nucleotide_transformer" / "promoter_all")
    data = tasks.load("nucleotide_transformer", real_config("nucleotide_transformer", dataset="promoter_all"), tmp_path)
    assert data.info.extra["paper_metric"] == "f1"


@pytest.mark.parametrize("filename,content,where", [
    ("train.csv", "sequence,label\nACGT,0\nACXT,1\n", "train.csv:3: character 'X'"),
    ("train.csv", "sequence,label\nACGT,0\nACGT,one\n", "train.csv:3: label 'one'"),
    ("train.csv", "sequence,label\nACGT,0,extra\n", "train.csv:2: 2 comma-separated fields"),
    ("train.csv", "dna,label\nACGT,0\n", "train.csv:1: header"),
    ("train.fna", ">a|0\nACGT\n>b|1\nAC\nGT-A\n", "train.fna:5: character '-'"),
    ("train.fna", ">a|0\nACGT\n>b\nACGT\n", "train.fna:3: header '>b'"),
    ("train.fna", "ACGT\n>a|0\nACGT\n", "train.fna:1: sequence before"),
])
def test_malformed_file_names_file_and_line(tmp_path, filename, content, where):
    root = tmp_path / "nucleotide_transformer" / "toy"
    root.mkdir(parents=True)
    suffix = Path(filename).suffix
    (root / filename).write_text(content)
    (root / f"test{suffix}").write_text("sequence,label\nACGT,0\n" if suffix == ".csv" else ">a|0\nACGT\n")
    with pytest.raises(TaskError, match=re.escape(where)):
        tasks.load("nucleotide_transformer", real_config("nucleotide_transformer"), tmp_path)


def test_malformed_class_folder_file_is_named(tmp_path):
    root = tmp_path / "genomic_benchmarks" / "toy"
    write_class_folders(root)
    (root / "test" / "positive" / "bad.txt").write_text("ACGT ACGT")
    with pytest.raises(TaskError, match=r"bad\.txt:1: character ' '"):
        tasks.load("genomic_benchmarks", real_config("genomic_benchmarks"), tmp_path)


def test_unknown_layout_is_named(tmp_path):
    (tmp_path / "genomic_benchmarks" / "toy").mkdir(parents=True)
    (tmp_path / "genomic_benchmarks" / "toy" / "notes.txt").write_text("hello")
    with pytest.raises(TaskError, match="none of the known layouts"):
        tasks.load("genomic_benchmarks", real_config("genomic_benchmarks"), tmp_path)


def test_absent_local_data_says_where_it_looked_and_how_to_get_it(tmp_path):
    with pytest.raises(TaskError) as error:
        tasks.load("genomic_benchmarks", real_config("genomic_benchmarks"), tmp_path)
    message = str(error.value)
    assert "'genomic_benchmarks'" in message and "'toy'" in message
    assert str(tmp_path / "genomic_benchmarks" / "toy") in message
    assert "download_dataset('toy'" in message and "Hub" not in message.split("To get it")[0]


def test_absent_data_offline_tries_the_hub_and_fails_fast(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    started = time.perf_counter()
    with pytest.raises(TaskError) as error:
        tasks.load("nucleotide_transformer", real_config("nucleotide_transformer", source="auto"), tmp_path)
    assert time.perf_counter() - started < 15
    message = str(error.value)
    assert "Hub dataset InstaDeepAI/nucleotide_transformer_downstream_tasks" in message
    assert str(tmp_path / "nucleotide_transformer" / "toy") in message and "hf download" in message


@pytest.mark.parametrize("key,value", [("source", "web"), ("dataset", ""), ("val_fraction", 1.0), ("num_train", 0)])
def test_real_loader_names_a_bad_config_value(tmp_path, key, value):
    write_csv(tmp_path / "nucleotide_transformer" / "toy")
    with pytest.raises(TaskError, match=f"task.{key}="):
        tasks.load("nucleotide_transformer", real_config("nucleotide_transformer", **{key: value}), tmp_path)


# The Nucleotide Transformer release on the Hub: files, no loading script --------------------------

NT_HUB_ID = "InstaDeepAI/nucleotide_transformer_downstream_tasks"


def cached_hub_snapshot(data_dir: Path, folders: dict[str, Callable[[Path], None]]) -> None:
    """A Hub repository as ``snapshot_download`` leaves it in its cache (``<data_dir>/huggingface``):
    ``refs/main`` names a commit whose snapshot holds one folder per dataset, written by its writer."""
    repo = data_dir / "huggingface" / f"datasets--{NT_HUB_ID.replace('/', '--')}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    for folder, writer in folders.items():
        writer(repo / "snapshots" / commit / folder)


@pytest.fixture
def hub_offline(monkeypatch):
    """HF_HUB_OFFLINE=1 as huggingface_hub reads it: only cached files, never the network."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)


def test_nucleotide_transformer_reads_the_dataset_folder_of_a_hub_snapshot(tmp_path, hub_offline, monkeypatch):
    cached_hub_snapshot(tmp_path, {"toy": write_fasta, "other": write_csv})
    calls = []

    def spy(*args, **kwargs):  # the real snapshot_download, its arguments kept
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    real = huggingface_hub.snapshot_download
    monkeypatch.setattr(benchmarks.huggingface_hub, "snapshot_download", spy)
    data = tasks.load("nucleotide_transformer", real_config("nucleotide_transformer", source="hub"), tmp_path)
    got = all_examples(data)
    assert sorted(got["train"] + got["val"]) == expected(TRAIN) and sorted(got["test"]) == expected(TEST)
    assert data.info.extra["origin"] == f"{NT_HUB_ID}/toy"
    [(args, kwargs)] = calls  # only the dataset's folder is asked for, from the dataset repository
    assert args == (NT_HUB_ID,) and kwargs["repo_type"] == "dataset" and kwargs["allow_patterns"] == ["toy/*"]
    assert kwargs["cache_dir"] == str(tmp_path / "huggingface")


def test_nucleotide_transformer_hub_without_the_dataset_folder_says_so(tmp_path, hub_offline):
    cached_hub_snapshot(tmp_path, {"other": write_fasta})
    with pytest.raises(TaskError) as error:
        tasks.load("nucleotide_transformer", real_config("nucleotide_transformer", source="hub"), tmp_path)
    message = str(error.value)
    assert f"Hub dataset {NT_HUB_ID} (no folder 'toy' in the repository)" in message and "hf download" in message
