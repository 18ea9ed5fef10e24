"""Tab-separated files in the dialect of LRA's releases and generators, written and read back."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from tasks.base import TaskError


def write_tsv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Write rows as LRA's generators did: ``csv.writer`` with a tab delimiter (CRLF line ends)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(header)
        writer.writerows(rows)


def read_tsv(path: Path, num_fields: int, header: Sequence[str] | None = None) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_number, fields)`` of a tab-separated file, checking the header and field count.

    ``header`` is the expected first row (``None`` for files without one). A malformed row raises
    TaskError naming the file and line. Accepts LF and CRLF line ends; skips blank lines.
    """
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t")
        try:
            if header is not None:
                first = next(reader, None)
                if first is None:
                    raise TaskError(f"{path}: empty file, expected the header {list(header)!r}")
                if first != list(header):
                    raise TaskError(f"{path}:1: header {first!r}, expected {list(header)!r}")
            for fields in reader:
                if not fields:
                    continue
                if len(fields) != num_fields:
                    raise TaskError(
                        f"{path}:{reader.line_num}: {len(fields)} tab-separated fields, expected {num_fields}"
                    )
                yield reader.line_num, fields
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TaskError(f"{path}:{reader.line_num}: unreadable TSV ({exc})") from exc
