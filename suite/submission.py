"""The packages a submission needs (docs/SUBMITTING.md): records of a method or task from outside the
suite are verified with that code installed, as the submitter installed it.

``submission.json`` declares them under ``packages``, each an exact distribution: an index release
``name==version``, or a git URL pinned to a commit ``git+https://...@<40 hex digits>``. Nothing
looser (a range, a branch, a folder) names one piece of code.

- ``problems(root, records)``: what ``validate --submission`` adds for this (suite/validate.py): the
  declaration well formed, every outside distribution a record names declared, installable that
  way (not a local folder), and, where it is installed here, at the record's version.
- ``python -m suite.submission install FOLDER``: pip installs the declared packages into the
  running environment (CI's throwaway one), one line naming the package that cannot be installed.
- ``python -m suite.submission rerun FOLDER --results DIR``: for each outside method the records
  name, ``check-method`` and a smoke run of it on one of its records' tasks.

All three read submission.json and the records as data; only ``install`` and ``rerun`` run the
submitted code, and only in the job that installed it (.github/workflows/submissions.yml).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from suite.env import SUITE_DISTRIBUTION
from suite.records import MAX_FILE_BYTES, RefusedFile, read_untrusted

RELEASE = re.compile(r"(?P<name>[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)==(?P<version>[0-9][A-Za-z0-9.+!_-]*)")
GIT = re.compile(r"git\+(?P<url>https://[^\s@#?]+)@(?P<commit>[0-9a-f]{40})")
EXACT = "an exact distribution: name==version (an index release) or git+https://...@<40-hex commit>"
EXIT_PROBLEMS, EXIT_USER_ERROR = 1, 2


@dataclass(frozen=True)
class Package:
    """One declared distribution: ``spec`` as written, and what it pins."""

    spec: str
    name: str | None = None  # an index release
    version: str | None = None
    url: str | None = None  # a git URL at a commit
    commit: str | None = None


def normalized(name: str) -> str:
    """A distribution name as the index compares it (PEP 503): my_attn, My.Attn and my-attn are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_packages(data: dict) -> tuple[list[Package], list[tuple[str, str, str]]]:
    """(packages, problems as (field, what, expected)) of submission.json's ``packages`` (none: [])."""
    value = data.get("packages", [])
    if not isinstance(value, list):
        return [], [("packages", f"{value!r}", f"a list, each item {EXACT}")]
    found, problems = [], []
    for i, spec in enumerate(value):
        field = f"packages[{i}]"
        release = GIT.fullmatch(spec) if isinstance(spec, str) and spec.startswith("git+") else None
        if isinstance(spec, str) and release:
            found.append(Package(spec, url=release["url"], commit=release["commit"]))
        elif isinstance(spec, str) and spec.startswith("git+"):
            problems.append((field, f"{spec!r} is a git URL not pinned to a commit", "git+https://...@<40-hex commit>"))
        elif isinstance(spec, str) and (pinned := RELEASE.fullmatch(spec)):
            found.append(Package(spec, name=pinned["name"], version=pinned["version"]))
        else:
            problems.append((field, f"{spec!r} is not an exact distribution", EXACT))
    return found, problems


def outside_distributions(record: dict) -> list[tuple[str, dict]]:
    """(field, distribution) of the record's method and task where their code is not the suite's."""
    found = []
    for part in ("method", "task"):
        block = record.get(part) or {}
        dist = block.get("distribution") or {}
        outside_path = (block.get("import_path") or block.get("loader") or "").split(".")[0] not in ("", "methods",
                                                                                                      "tasks")
        if dist.get("name") not in (None, SUITE_DISTRIBUTION) or (outside_path and dist.get("name") is None):
            found.append((f"{part}.distribution", dist))
    return found


def declared(dist: dict, packages: Iterable[Package]) -> bool:
    """Whether a record's distribution is one of the declared packages, installed the way it names
    (pip records a git install's URL without its git+ prefix)."""
    for package in packages:
        if package.commit is not None:
            if dist.get("source") == "git" and (dist.get("url"), dist.get("commit")) == (package.url, package.commit):
                return True
        elif normalized(package.name) == normalized(dist.get("name") or "") and package.version == dist.get("version"):
            return dist.get("source") in (None, "index")
    return False


def record_problems(record: dict, packages: list[Package]) -> list[tuple[str, str, str]]:
    """(field, what, expected) for each outside distribution of ``record`` that CI cannot install as
    the record ran it, or that is installed here at another version."""
    found = []
    listed = ", ".join(p.spec for p in packages) or "none"
    for field, dist in outside_distributions(record):
        name, version, source = dist.get("name"), dist.get("version"), dist.get("source")
        if name is None:
            found.append((field, "the code ran from a folder on the Python path, not an installed package",
                          "an installed distribution, declared in submission.json's packages"))
        elif source == "local":
            found.append((field, f"{name} {version} was installed from a local folder or file, which CI cannot "
                          "install", "a release on the package index or a git URL at a commit, installed so and "
                          "the records rerun"))
        elif not declared(dist, packages):
            what = f"git+{dist.get('url')}@{dist.get('commit')}" if source == "git" else f"{name}=={version}"
            found.append((field, f"{what} is not among submission.json's packages ({listed})",
                          "each outside distribution of the records declared there, exactly"))
        else:
            try:
                installed = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue  # not installed here: CI installs the declared packages before it validates
            if installed != version:
                found.append((f"{field}.version", f"{version!r} while {name} {installed} is installed here",
                              "the version the record ran with"))
    return found


def problems(root: Path, records: list[tuple[Path, dict]]) -> list[tuple[Path, str, str, str]]:
    """(file, field, what, expected): submission.json's packages, then each record's distributions."""
    path = root / "submission.json"
    try:  # the safe reader: a link, a FIFO or /dev/zero is refused unread, not followed, blocked on or read forever
        data = json.loads(read_untrusted(path))
    except (RefusedFile, ValueError, RecursionError):
        return []  # validate says what is wrong with the file itself
    if not isinstance(data, dict):
        return []
    packages, found = parse_packages(data)
    found = [(path, *problem) for problem in found]
    for record_path, record in records:
        found += [(record_path, *problem) for problem in record_problems(record, packages)]
    return found


# -- CI: install the declared packages, then rerun what the records claim -----------------------------

def read_packages(folder: Path) -> tuple[list[Package], list[str]]:
    """The packages a submission folder declares, and a line per problem (validate says the rest)."""
    path = folder / "submission.json"
    try:
        data = json.loads(read_untrusted(path)) if path.exists() or path.is_symlink() else {}
    except RefusedFile as exc:
        return [], [f"{path}: file: {exc.reason}; expected a regular file of at most {MAX_FILE_BYTES:,} bytes"]
    except (ValueError, RecursionError) as exc:
        return [], [f"{path}: file: not readable JSON ({exc}); expected a JSON object"]
    packages, found = parse_packages(data if isinstance(data, dict) else {})
    return packages, [f"{path}: {field}: {what}; expected {expected}" for field, what, expected in found]


def install(folder: Path) -> int:
    """pip install each declared package; one line naming the one that cannot be installed."""
    packages, lines = read_packages(folder)
    for line in lines:
        print(line)
    if lines:
        return EXIT_PROBLEMS
    for i, package in enumerate(packages):
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", package.spec],
                              capture_output=True, text=True)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or done.stderr.splitlines()
            print(f"{folder / 'submission.json'}: packages[{i}]: {package.spec!r} cannot be installed "
                  f"({errors[-1] if errors else 'pip failed'}); expected a release on the package index or a git URL "
                  "at a commit that exists")
            return EXIT_PROBLEMS
        print(f"installed {package.spec}", file=sys.stderr)
    return 0


def top_module(import_path: str) -> str:
    """The top-level module an import path names: 'my_attn' of 'my_attn.relu:ReluFM'."""
    return re.split(r"[.:]", import_path)[0]


def not_of_declared_code(record: dict, packages: list[Package]) -> str | None:
    """Why the outside method a record names may not be imported here, or None: its distribution is
    not among the declared packages, or its import path's top-level module is not installed by that
    distribution (a module beside the records, or another package's, would run code nobody declared)."""
    method = record.get("method") or {}
    spec, dist = str(method.get("import_path") or ""), method.get("distribution") or {}
    if not isinstance(dist, dict) or not declared(dist, packages):
        return f"its distribution ({dist.get('name') if isinstance(dist, dict) else dist!r}) is not a declared package"
    top = top_module(spec)
    owners = importlib.metadata.packages_distributions().get(top, [])
    if normalized(str(dist.get("name") or "")) not in {normalized(owner) for owner in owners}:
        return (f"module {top!r} is not installed by {dist.get('name')} "
                f"(installed by: {', '.join(owners) or 'no distribution'})")
    return None


def rerun(folder: Path, results: Path) -> int:
    """check-method and a smoke run of each outside method the records name (on its first record's
    task, or mqar for the modes with a task of their own), imported only where its code is a declared
    package's: any other import path is refused unimported, one line each."""
    from suite.record_store import iter_records

    packages, _ = read_packages(folder)  # install has said what is wrong with the declaration
    tasks_of: dict[str, str] = {}
    refused: set[str] = set()
    for path, record in iter_records(folder):
        spec = str((record.get("method") or {}).get("import_path") or "")
        if not spec or top_module(spec) == "methods" or spec in tasks_of or spec in refused:
            continue
        why = not_of_declared_code(record, packages)
        if why:
            print(f"{path}: method.import_path: {spec!r} not imported: {why}; expected a method of a package "
                  "declared in submission.json", file=sys.stderr)
            refused.add(spec)
            continue
        tasks_of[spec] = record["task"]["name"] if record.get("kind") == "train" else "mqar"
    failed = len(refused)
    for spec, task in sorted(tasks_of.items()):
        for args in (["check-method", spec],
                     [f"method={spec}", f"task={task}", "budget=smoke", f"results_dir={results}"]):
            done = subprocess.run([sys.executable, "-m", "suite", *args], text=True)
            if done.returncode != 0:
                print(f"{folder}: {' '.join(args)}: exit {done.returncode}", file=sys.stderr)
                failed += 1
    return EXIT_PROBLEMS if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.submission", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="pip install the packages submission.json declares").add_argument(
        "folder", type=Path)
    again = commands.add_parser("rerun", help="check-method and a smoke run of each outside method")
    again.add_argument("folder", type=Path)
    again.add_argument("--results", type=Path, required=True, help="where the smoke runs write their records")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a submission folder", file=sys.stderr)
        return EXIT_USER_ERROR
    return install(args.folder) if args.command == "install" else rerun(args.folder, args.results)


if __name__ == "__main__":
    sys.exit(main())
