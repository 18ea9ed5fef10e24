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


PACKAGES = ("suite", "methods", "tasks")


def project_modules() -> dict[str, Path]:
    """The project's own modules (``suite``, ``methods``, ``tasks``), dotted name -> file."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph(module_level_only: bool = False, with_registries: bool = False) -> dict[str, set[str]]:
    """Module -> the project's modules it imports. ``from a.b import c`` is an edge to ``a.b.c`` where
    that is a module, else to ``a.b``; a package imported for a submodule is not an edge of its own
    (a package's ``__init__`` importing its children is not a circle). ``module_level_only`` keeps
    the imports that run when the module is loaded (not those inside a function), the ones that can
    make an import fail; ``with_registries`` adds the registries' imports by name."""
    modules = project_modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        if module_level_only:
            nodes, todo = [], list(tree.body)
            while todo:  # statements that run on import: the body, and the bodies of if/try/with/class
                node = todo.pop()
                nodes.append(node)
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    todo += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
        else:
            nodes = list(ast.walk(tree))
        edges = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules
                           else node.module for alias in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    if with_registries:
        for name, loads in registry_loads(modules).items():
            graph[name] |= loads
    return graph


def registry_loads(modules: dict[str, Path]) -> dict[str, set[str]]:
    """The imports by name that ast does not see: ``methods`` and ``tasks`` import their sub-packages
    (the built-in methods, the task families), ``suite.modes`` imports each mode's package and, on
    use (``Mode.part``), its ``job``, ``config`` and ``schema``."""
    loads: dict[str, set[str]] = {}
    for registry in ("methods", "tasks", "suite.modes"):
        children = {m for m in modules if m.rpartition(".")[0] == registry and modules[m].name == "__init__.py"
                    and not m.rpartition(".")[2].startswith("_")}
        parts = {f"{c}.{part}" for c in children for part in ("job", "config", "schema")} & modules.keys()
        loads[registry] = children | (parts if registry == "suite.modes" else set())
    return loads


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


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
