"""Readers for labelled DNA in the layouts real benchmarks ship, each returning token ids and
labels, and each naming the file and line (or row) of anything malformed.

- CSV with a header holding a sequence column (``sequence`` or ``seq``) and ``label``.
- FASTA as in the Nucleotide Transformer release (``train.fna``): ``>name|label`` headers.
- Class folders as the ``genomic-benchmarks`` package writes them: ``<split>/<class>/<id>.txt``,
  one sequence per file, classes numbered in sorted order.
- A Hugging Face ``datasets`` split (a hub download or a ``save_to_disk`` folder).
"""

from __future__ import annotations

import csv
from pathlib import Path

import datasets
import numpy as np

from tasks.base import TaskError
from tasks.genomics.nucleotides import encode

SEQUENCE_COLUMNS = ("sequence", "seq")  # Nucleotide Transformer's name, then Genomic Benchmarks'
Examples = tuple[list[np.ndarray], list[int]]


def parse_label(text: str, where: str) -> int:
    """A class label: a non-negative integer."""
    try:
        label = int(text.strip())
    except ValueError:
        label = -1
    if label < 0:
        raise TaskError(f"{where}: label {text.strip()!r} is not a non-negative integer")
    return label


def parse_sequence(text: str, where: str) -> np.ndarray:
    """Token ids of a nucleotide string; empty or foreign characters are a TaskError at ``where``."""
    if not text:
        raise TaskError(f"{where}: empty sequence")
    try:
        return encode(text)
    except ValueError as exc:
        raise TaskError(f"{where}: {exc}") from None


def read_csv(path: Path) -> Examples:
    """Sequences and labels of a CSV file with a header."""
    sequences, labels = [], []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        sequence_column = next((c for c in SEQUENCE_COLUMNS if c in columns), None)
        if sequence_column is None or "label" not in columns:
            raise TaskError(f"{path}:1: header {columns!r} lacks a sequence column ({' or '.join(SEQUENCE_COLUMNS)}) "
                            f"and a label column")
        try:
            for row in reader:
                where = f"{path}:{reader.line_num}"
                if None in row or row[sequence_column] is None or row["label"] is None:
                    raise TaskError(f"{where}: {len(columns)} comma-separated fields expected")
                sequences.append(parse_sequence(row[sequence_column].strip(), where))
                labels.append(parse_label(row["label"], where))
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TaskError(f"{path}:{reader.line_num}: unreadable CSV ({exc})") from None
    return sequences, labels


def read_fasta(path: Path) -> Examples:
    """Sequences and labels of a FASTA file whose headers end in ``|label`` (sequences may wrap)."""
    sequences, labels = [], []
    header_where, parts = None, []

    def finish() -> None:
        if header_where is not None:
            sequences.append(parse_sequence("".join(parts), header_where))

    with open(path, encoding="utf-8") as f:
        try:
            for number, line in enumerate(f, start=1):
                line = line.strip()
                where = f"{path}:{number}"
                if line.startswith(">"):
                    finish()
                    name, bar, label = line[1:].rpartition("|")
                    if not bar:
                        raise TaskError(f"{where}: header {line!r} does not end in '|<label>' (e.g. '>chr1:100-400|1')")
                    labels.append(parse_label(label, where))
                    header_where, parts = where, []
                elif line:
                    if header_where is None:
                        raise TaskError(f"{where}: sequence before the first '>' header")
                    parse_sequence(line, where)  # report a bad base on its own line
                    parts.append(line)
        except UnicodeDecodeError as exc:
            raise TaskError(f"{path}: not UTF-8 text ({exc})") from None
    finish()
    return sequences, labels


def read_class_folders(split_dir: Path) -> tuple[Examples, list[str]]:
    """Sequences and labels of ``split_dir/<class>/*.txt``, and the class names (label order)."""
    classes = sorted(p.name for p in split_dir.iterdir() if p.is_dir())
    if not classes:
        raise TaskError(f"{split_dir}: no class folders (expected {split_dir}/<class>/<id>.txt)")
    sequences, labels = [], []
    for label, name in enumerate(classes):
        for file in sorted((split_dir / name).glob("*.txt")):
            try:
                text = file.read_text(encoding="utf-8").strip()
            except UnicodeDecodeError as exc:
                raise TaskError(f"{file}: not UTF-8 text ({exc})") from None
            if "\n" in text:
                raise TaskError(f"{file}:2: one sequence per file expected, found more than one line")
            sequences.append(parse_sequence(text, f"{file}:1"))
            labels.append(label)
    return (sequences, labels), classes


def read_hf_split(split: datasets.Dataset, where: str) -> Examples:
    """Sequences and labels of a ``datasets`` split; ``where`` names it in errors (rows count from 0)."""
    sequence_column = next((c for c in SEQUENCE_COLUMNS if c in split.column_names), None)
    if sequence_column is None or "label" not in split.column_names:
        raise TaskError(f"{where}: columns {split.column_names} lack a sequence column "
                        f"({' or '.join(SEQUENCE_COLUMNS)}) and a label column")
    sequences, labels = [], []
    for row, (text, label) in enumerate(zip(split[sequence_column], split["label"])):
        sequences.append(parse_sequence(text or "", f"{where} row {row}"))
        labels.append(parse_label(str(label), f"{where} row {row}"))
    return sequences, labels
