"""Adding a mode is its package plus its config file: a copy of the decode mode under another name,
written into a copy of the project (suite/modes/decode2/ and conf/mode/decode2.yaml, nothing else),
runs, writes a record of its own kind that validates, and the site draws it. So no central file
may list the modes (DESIGN.md, "Adding things"): the config check, the record schema and the site
find a mode's own through the registry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# A tiny grid: two context lengths at one batch size, the softmax reference beside them.
GRID = ("mode.grids.smoke.context_lengths=[1,7]", "mode.grids.smoke.batch_sizes=[1]")
# Run in the copy: its registry knows decode2, this process's does not.
CHECK = """
import sys
from pathlib import Path
from suite import record_store
from suite.site.figures import sweep_figures
from suite.site.runs import load_runs

[path] = Path(sys.argv[1]).rglob("*.json")
record = record_store.read_record(path)  # validated against its kind's schema
runs, skipped = load_runs(Path(sys.argv[1]))
print(record["kind"], record["status"], len(record["metrics"]["crossovers"]), len(skipped),
      len(sweep_figures(runs, "decode2", "context length")))
"""


def copy_decode_as_decode2(project: Path) -> None:
    """suite/modes/decode2/, the decode package with its own names, and conf/mode/decode2.yaml."""
    modes = project / "suite" / "modes"
    shutil.copytree(modes / "decode", modes / "decode2", ignore=shutil.ignore_patterns("__pycache__"))
    for path in (modes / "decode2").glob("*.py"):
        path.write_text(path.read_text().replace("suite.modes.decode", "suite.modes.decode2"))
    declaration = modes / "decode2" / "__init__.py"
    declaration.write_text(declaration.read_text().replace('name="decode"', 'name="decode2"'))
    conf = project / "suite" / "conf" / "mode"
    (conf / "decode2.yaml").write_text((conf / "decode.yaml").read_text().replace("name: decode\n", "name: decode2\n"))


def test_a_new_mode_runs_and_writes_a_record_of_its_own_kind(tmp_path, data_dir):
    project = tmp_path / "project"
    for part in ("suite", "methods", "tasks"):  # suite/ holds conf/ and the site's files
        shutil.copytree(REPO / part, project / part, ignore=shutil.ignore_patterns("__pycache__", "_build"))
    copy_decode_as_decode2(project)
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(project), "SUITE_DATA_DIR": str(data_dir),
           "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}

    def python(*args: str) -> str:
        done = subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    python("-m", "suite", "mode=decode2", "method=linear", "budget=smoke", "device=cpu", *GRID,
           f"results_dir={results}")
    kind, status, crossovers, skipped, figures = python("-c", CHECK, str(results)).split()
    assert (kind, status) == ("decode2", "ok")
    assert (crossovers, skipped) == ("1", "0")  # one batch size against the reference; the record loads
    assert int(figures) > 0  # the site draws the new mode's section
