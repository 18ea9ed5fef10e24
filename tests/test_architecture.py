"""The arrows between the parts (DESIGN.md): harness -> methods, harness -> tasks, site -> records
and its own data. Methods and tasks import neither the harness nor each other; the site imports
neither methods nor tasks (nor torch: it builds where only the records are); nothing of the harness
outside suite/site imports the site."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    """Absolute modules imported anywhere in ``path`` (top-level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def importers(folder: str, forbidden: tuple[str, ...], skip: str | None = None) -> list[str]:
    """Files under ``folder`` (not under ``skip``) that import a module in or under ``forbidden``."""
    bad = []
    for path in sorted((REPO / folder).rglob("*.py")):
        if skip and path.is_relative_to(REPO / skip):
            continue
        for module in imported_modules(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(REPO)} imports {module}")
    return bad


def test_the_site_loads_no_method_task_or_torch_module():
    code = ("import sys, suite.site.build, suite.site.__main__; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('methods', 'tasks', 'torch'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"the site loads: {done.stdout.strip()}"


def test_nothing_in_the_harness_outside_the_site_imports_the_site():
    assert importers("suite", ("suite.site",), skip="suite/site") == []


@pytest.mark.parametrize("folder, forbidden", [("methods", ("suite", "tasks")), ("tasks", ("suite", "methods"))])
def test_methods_and_tasks_import_neither_the_harness_nor_each_other(folder, forbidden):
    assert importers(folder, forbidden) == []
