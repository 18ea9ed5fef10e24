"""How to cite the suite and where its source lives, read from CITATION.cff at the root of the
checkout the site is built from (absent when the site builds from an installed package)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

CITATION_FILE = Path(__file__).resolve().parents[2] / "CITATION.cff"


@dataclass(frozen=True)
class Citation:
    text: str  # how to cite, in words
    url: str | None  # the repository's address, when CITATION.cff names one


def author_name(author: dict) -> str:
    return author.get("name") or " ".join(filter(None, (author.get("given-names"), author.get("family-names"))))


def citation(path: Path = CITATION_FILE) -> Citation | None:
    """CITATION.cff's title, version, date, authors and repository address (repository-code, else url)."""
    if not path.is_file():
        return None
    data = yaml.safe_load(path.read_text()) or {}
    authors = ", ".join(filter(None, map(author_name, data.get("authors") or [])))
    version = f", version {data['version']}" if data.get("version") else ""
    released = f" ({data['date-released']})" if data.get("date-released") else ""
    url = data.get("repository-code") or data.get("url")
    where = "the root of the repository at" if url else "the repository's root, which names no public address yet."
    return Citation(f"Cite: {authors}, \u201c{data.get('title', 'attention-suite')}\u201d{version}{released}; the "
                    f"entry is CITATION.cff at {where}", url)
