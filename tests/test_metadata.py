"""What a user installing or citing the package relies on: a CITATION.cff that citation tools read
and that agrees with pyproject.toml, and every imported library declared in pyproject.toml (CI
installs only what it declares, so a library installed by hand here would break there)."""

from __future__ import annotations

import ast
import datetime as dt
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
LOCAL_MODULES = {"suite", "methods", "tasks", "tests", "benchmarks", "scripts", "conftest"}


def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_citation_file_has_the_keys_cff_requires_and_matches_pyproject():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    for key in ("cff-version", "message", "title", "authors"):  # required by the CFF 1.2.0 schema
        assert citation.get(key), f"CITATION.cff lacks {key}"
    assert citation["cff-version"] == "1.2.0" and citation["type"] == "software"
    assert all(author.get("name") or author.get("family-names") for author in citation["authors"])
    project = pyproject()
    assert citation["version"] == project["version"] and citation["license"] == project["license"]["text"]
    dt.date.fromisoformat(citation["date-released"])  # a string in YYYY-MM-DD, as the schema wants
    # The repository's address is set once, in pyproject.toml; CITATION.cff repeats it, or neither has one.
    assert citation.get("repository-code") == (project.get("urls") or {}).get("Repository")


def third_party_imports(folder: str) -> dict[str, str]:
    """Top-level modules imported under ``folder`` that are neither standard nor ours, each with a file."""
    found = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in (name.split(".")[0] for name in names):
                if top not in sys.stdlib_module_names and top not in LOCAL_MODULES:
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(*groups: str) -> set[str]:
    """Distribution names in pyproject's dependencies and in the named extras ("*": every extra)."""
    project = pyproject()
    extras = project["optional-dependencies"]
    requirements = [*project["dependencies"], *(r for g in (extras if groups == ("*",) else groups) for r in extras[g])]
    return {normalised(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r).group()) for r in requirements}


@pytest.mark.parametrize("folders, groups", [(("suite", "methods", "tasks"), ("*",)),
                                             (("tests", "benchmarks"), ("test",))])
def test_every_imported_library_is_declared(folders, groups):
    distributions = packages_distributions()
    allowed = declared(*groups)
    missing = []
    for folder in folders:
        for module, where in third_party_imports(folder).items():
            names = {normalised(d) for d in distributions.get(module, [module])}
            if not names & allowed:
                missing.append(f"{module} (imported in {where}; distribution {', '.join(sorted(names))})")
    assert not missing, f"not declared in pyproject.toml ({' or '.join(groups)}): " + "; ".join(missing)
