"""The GitHub workflows are valid workflows, checked against SchemaStore's schema for them with
check-jsonschema (python-jsonschema's tool; it ships the schema, so no network is needed), and they
do what the project needs of them: hosted runners for CI, no GPU run for pull requests, the board's
records committed back.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def schema_problems(paths: list[Path]) -> str:
    """check-jsonschema's report on ``paths`` against the GitHub workflow schema; '' when valid."""
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                           *map(str, paths)], capture_output=True, text=True, timeout=120)
    return "" if done.returncode == 0 else done.stdout + done.stderr


def test_workflows_are_valid_github_workflows():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "board.yml"}
    assert schema_problems(WORKFLOWS) == ""


def test_gpu_workflow_never_runs_for_pull_requests():
    board = yaml.safe_load((REPO / ".github" / "workflows" / "board.yml").read_text())
    triggers = board[True]  # PyYAML reads the key `on` as True
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    assert board["jobs"]["gpu-runs"]["runs-on"] == ["self-hosted", "gpu"]


def steps_text(job: dict) -> str:
    return "\n".join(str(step.get("run", "")) + str(step.get("uses", "")) for step in job["steps"])


def test_ci_runs_on_hosted_runners_from_the_oldest_python_the_package_admits_with_pip_cached():
    ci = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    job = ci["jobs"]["test"]
    assert job["runs-on"] == "ubuntu-latest"
    oldest = re.search(r'^requires-python = ">=([\d.]+)"$', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    assert oldest in job["strategy"]["matrix"]["python-version"]
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
