"""The arrows between the parts (DESIGN.md): harness -> methods, harness -> tasks, site -> records
and its own data. Methods and tasks import neither the harness nor each other; the site imports
neither methods nor tasks (nor torch: it builds where only the records are); nothing of the harness
outside suite/site imports the site. Inside the harness the arrows run one way too: no import circle;
a mode's job imports the job contract (suite/job.py), never the dispatcher that loads it (suite/run.py);
no mode imports another mode's modules (the training loop is the library suite/training.py); the
metrics' vocabulary (suite/metrics.py) imports no mode, nor does the generic vocabulary (config,
schema, records) import the modes' registry; a run's config is checked once and hashed once."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import tasks

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
    """Files under ``folder`` (or the file ``folder``; not under ``skip``) that import a module in or
    under ``forbidden``."""
    bad = []
    where = REPO / folder
    for path in [where] if where.is_file() else sorted(where.rglob("*.py")):
        if skip and path.is_relative_to(REPO / skip):
            continue
        for module in imported_modules(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(REPO)} imports {module}")
    return bad


def test_the_site_loads_no_method_or_torch_module_and_of_tasks_only_their_declarations():
    """The site reads the tasks' declarations (the families' packages: the closed-form baselines it
    checks records against), never a task's loader, a method or torch."""
    code = ("import sys, suite.site.build, suite.site.__main__; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('methods', 'tasks', 'torch'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    declarations = {"tasks", "tasks.base", *tasks.FAMILIES}
    assert loaded - declarations == set(), f"the site loads: {sorted(loaded - declarations)}"
    assert "tasks" in loaded  # the test above sees the modules it names


def test_nothing_in_the_harness_outside_the_site_imports_the_site():
    assert importers("suite", ("suite.site",), skip="suite/site") == []


@pytest.mark.parametrize("folder, forbidden", [("methods", ("suite", "tasks")), ("tasks", ("suite", "methods"))])
def test_methods_and_tasks_import_neither_the_harness_nor_each_other(folder, forbidden):
    assert importers(folder, forbidden) == []


@pytest.mark.parametrize("module_level_only, with_registries", [(False, False), (True, False), (False, True)],
                         ids=["all imports", "module-level imports", "with the registries' loads"])
def test_no_import_circle_among_the_projects_modules(module_level_only, with_registries):
    """The import graph of suite, methods and tasks has no circle: counting the imports inside
    functions too (a late import hides a circle, it does not remove it), those run on load, and the
    registries' imports by name (the modes' registry loads each mode's job, config and schema: what
    these import may not import the registry back)."""
    assert import_circles(import_graph(module_level_only, with_registries)) == []


def test_the_circle_finder_finds_a_circle():
    """The test above can fail: a circle of two modules and one of three are both found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c", "a"}, "f": {"a"}}
    assert import_circles(graph) == [["a", "b"], ["c", "d", "e"]]


def test_no_job_imports_the_dispatcher_that_loads_it():
    """A mode's modules import the job contract (suite/job.py: Outcome, JobResult, is_out_of_memory),
    never the run, the protocol or the command line that dispatch to them."""
    assert importers("suite/modes", ("suite.run", "suite.protocol", "suite.__main__", "suite.sweep")) == []


@pytest.mark.parametrize("mode", sorted(p.name for p in (REPO / "suite/modes").iterdir()
                                        if (p / "__init__.py").is_file()))
def test_no_mode_imports_another_modes_modules(mode):
    """What two modes share is a library (the training loop: suite/training.py; the state size:
    suite/model.py; grids and tables: suite/modes/common.py), not one mode's job imported by another."""
    others = tuple(f"suite.modes.{p.name}" for p in (REPO / "suite/modes").iterdir()
                   if (p / "__init__.py").is_file() and p.name != mode)
    assert importers(f"suite/modes/{mode}", others) == []


def test_the_metrics_vocabulary_imports_no_mode():
    """suite/metrics.py declares what a metric is; the modes' registry (suite.modes.declared) gathers
    the modes' declarations, so the vocabulary the modes import imports none of them."""
    assert importers("suite/metrics.py", ("suite.modes",)) == []


# The modules of suite/modes that the generic vocabulary may import: what a mode declares of itself
# (Mode, Section), apart from the registry (suite/modes/__init__.py) that finds the modes and loads
# their parts.
DECLARATIONS = ("suite.modes.declare",)


@pytest.mark.parametrize("vocabulary", ["config", "schema", "records", "metrics"])
def test_the_generic_vocabulary_imports_no_mode_registry(vocabulary):
    """The config's, the record's and the metrics' vocabulary is what the modes build on (their
    config.py, schema.py, declarations and jobs import it); the registry composes it with each mode's
    parts (suite.modes.run_schemas, record_model, declared; suite/record_store.py checks records of
    the modes' kinds), so the vocabulary imports neither the registry nor any mode."""
    found = [line for line in importers(f"suite/{vocabulary}.py", ("suite.modes",))
             if line.rpartition(" imports ")[2] not in DECLARATIONS]
    assert found == []


def test_a_run_checks_its_config_once_and_hashes_it_once(make_config, monkeypatch):
    """Through the protocol to the written record (and the training loop's checkpoints), one run's
    config is checked once (suite.config.validate) and hashed once (suite.records.config_hash)."""
    import suite.protocol
    import suite.run
    from suite import records

    calls = {"validate": 0, "config_hash": 0}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return wrapper

    for module in (suite.protocol, suite.run):
        monkeypatch.setattr(module, "validate", counted("validate", module.validate))
    monkeypatch.setattr(records, "config_hash", counted("config_hash", records.config_hash))
    config = make_config("method=linear", "task=mqar", "task.vocab_size=128", "budget.max_steps=2",
                         "budget.eval_every=1", "budget.checkpoint_every=1")
    assert suite.protocol.run_protocol(config, resume=True).status == "ok"
    assert calls == {"validate": 1, "config_hash": 1}
