"""How to cite the suite and where its source lives. How to cite: CITATION.cff at the root of the
checkout the site is built from (absent when the site builds from an installed package). Where the
source lives is set in one place, ``[project.urls] Repository`` in pyproject.toml (read from the
installed distribution's metadata, so an installed package has it too; CITATION.cff's
repository-code repeats it, tests/test_metadata.py checks the two agree), except in a GitHub workflow,
where the site names the repository the workflow runs in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, metadata
from pathlib import Path

import yaml

CITATION_FILE = Path(__file__).resolve().parents[2] / "CITATION.cff"
DISTRIBUTION = "attention-suite"
URL_LABEL = "repository"  # the [project.urls] key (Project-URL label) of the source's address


def repository_url(environ: Mapping[str, str] = os.environ) -> str | None:
    """The repository's address: in a GitHub workflow, the repository it runs in (GITHUB_SERVER_URL /
    GITHUB_REPOSITORY, so a fork's site names the fork); else pyproject.toml's [project.urls]
    Repository; None where neither is set."""
    if environ.get("GITHUB_REPOSITORY"):
        server = environ.get("GITHUB_SERVER_URL") or "https://github.com"
        return f"{server.rstrip('/')}/{environ['GITHUB_REPOSITORY']}"
    try:
        urls = metadata(DISTRIBUTION).get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == URL_LABEL and url.strip():
            return url.strip()
    return None


@dataclass(frozen=True)
class Citation:
    text: str  # how to cite, in words; the pages link repository_url() beside it


def author_name(author: dict) -> str:
    return author.get("name") or " ".join(filter(None, (author.get("given-names"), author.get("family-names"))))


def citation(path: Path = CITATION_FILE) -> Citation | None:
    """CITATION.cff's title, version, date and authors, with the repository's address (repository_url)."""
    if not path.is_file():
        return None
    data = yaml.safe_load(path.read_text()) or {}
    authors = ", ".join(filter(None, map(author_name, data.get("authors") or [])))
    version = f", version {data['version']}" if data.get("version") else ""
    released = f" ({data['date-released']})" if data.get("date-released") else ""
    where = ("the root of the repository at" if repository_url() else
             "the repository's root, which names no public address yet.")
    return Citation(f"Cite: {authors}, \u201c{data.get('title', 'attention-suite')}\u201d{version}{released}; the "
                    f"entry is CITATION.cff at {where}")
