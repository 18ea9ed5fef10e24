"""Submissions of outside methods (issue 46): submission.json declares the exact distributions the
records' outside code came from; validate --submission refuses a record whose distribution is not
declared, cannot be installed by CI (a local folder), or is installed here at another version; a
declaration that is not exact is one line naming its field; the install step names the package
that cannot be installed; the workflow that runs the submitted code is on pull_request with a
read-only token and no secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from suite.submission import parse_packages
from suite.validate import main as validate
from tests.outside_methods import RELU

REPO = Path(__file__).resolve().parent.parent
COMMIT = "0123456789abcdef0123456789abcdef01234567"
MY_ATTN = {"name": "my-attn", "version": "0.3.1", "url": None, "commit": None, "dirty": None, "source": "index"}


@pytest.mark.parametrize("packages, line", [
    (["my-attn>=0.3"], "packages[0]: 'my-attn>=0.3' is not an exact distribution; expected an exact distribution: "
                       "name==version (an index release) or git+https://...@<40-hex commit>"),
    (["my-attn==0.3.1", "git+https://example.org/my-attn.git"],
     "packages[1]: 'git+https://example.org/my-attn.git' is a git URL not pinned to a commit; expected "
     "git+https://...@<40-hex commit>"),
    (["git+https://example.org/my-attn.git@main"], "packages[0]: 'git+https://example.org/my-attn.git@main' is a git "
                                                   "URL not pinned to a commit"),
    ("my-attn==0.3.1", "packages: 'my-attn==0.3.1'; expected a list"),
])
def test_a_declaration_that_is_not_exact_is_one_line_naming_its_field(packages, line):
    _, problems = parse_packages({"packages": packages})
    [(field, what, expected)] = problems
    assert f"{field}: {what}; expected {expected}".startswith(line)


def test_exact_declarations_parse():
    found, problems = parse_packages({"packages": ["my_attn==0.3.1", f"git+https://example.org/my-attn.git@{COMMIT}"]})
    assert problems == []
    assert [(p.name, p.version, p.url, p.commit) for p in found] == [
        ("my_attn", "0.3.1", None, None), (None, None, "https://example.org/my-attn.git", COMMIT)]


@pytest.fixture(scope="module")
def outside_record(tmp_path_factory, data_dir):
    """A real record of an outside method (the ReLU map, named by import path), as the suite wrote it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import methods
    from methods.registry import REGISTRY
    from suite.run import run

    results = tmp_path_factory.mktemp("outside-results")
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        config = OmegaConf.to_container(compose("config", overrides=[
            "method=linear", "task=mqar", "budget=smoke", f"results_dir={results}", f"data_dir={data_dir}",
            "cpu_threads=1"]), resolve=True)
    before = dict(REGISTRY)
    try:
        config["method"] = {"name": methods.resolve(RELU).name, "impl": "auto", "options": {"chunk_size": 64}}
        path, outcome = run(config)
        assert outcome.status == "ok"
        yield json.loads(path.read_text())
    finally:
        REGISTRY.clear()
        REGISTRY.update(before)


def submit(folder: Path, record: dict, distribution: dict, packages: list[str] | None) -> Path:
    """A submission folder holding ``record`` with its method's distribution as given."""
    from suite import records

    record = {**record, "method": {**record["method"], "distribution": distribution}}
    path = records.record_path(record, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    meta = {"submitter": "a contributor", "added": "2026-12-06"}
    (folder / "submission.json").write_text(json.dumps(meta if packages is None else {**meta, "packages": packages}))
    return path


def package_lines(capsys, folder: Path) -> list[str]:
    """validate --submission's lines about the distributions (a test's checkout may be dirty too)."""
    validate(["--submission", str(folder)])
    return [line for line in capsys.readouterr().out.splitlines()
            if line.split(": ")[1].split(".")[0].split("[")[0] in ("method", "task", "packages")]


def test_an_outside_method_s_record_needs_its_package_declared_exactly(outside_record, tmp_path, capsys):
    folder = tmp_path / "sub"
    path = submit(folder, outside_record, MY_ATTN, None)
    assert package_lines(capsys, folder) == [
        f"{path}: method.distribution: my-attn==0.3.1 is not among submission.json's packages (none); expected each "
        "outside distribution of the records declared there, exactly"]
    submit(folder, outside_record, MY_ATTN, ["my-attn==0.3.2"])
    assert "my-attn==0.3.1 is not among submission.json's packages (my-attn==0.3.2)" in package_lines(capsys, folder)[0]
    submit(folder, outside_record, MY_ATTN, ["My_Attn==0.3.1"])  # the index's name rules: the same distribution
    assert package_lines(capsys, folder) == []


def test_a_git_install_is_declared_by_its_url_at_its_commit(outside_record, tmp_path, capsys):
    folder = tmp_path / "sub"
    git = {**MY_ATTN, "source": "git", "url": "https://example.org/my-attn.git", "commit": COMMIT}
    submit(folder, outside_record, git, [f"git+https://example.org/my-attn.git@{COMMIT}"])
    assert package_lines(capsys, folder) == []
    submit(folder, outside_record, git, [f"git+https://example.org/my-attn.git@{'f' * 40}"])
    [line] = package_lines(capsys, folder)
    assert f"method.distribution: git+https://example.org/my-attn.git@{COMMIT} is not among" in line


def test_a_record_of_a_locally_installed_package_is_refused_with_why(outside_record, tmp_path, capsys):
    folder = tmp_path / "sub"
    path = submit(folder, outside_record, {**MY_ATTN, "source": "local"}, ["my-attn==0.3.1"])
    assert package_lines(capsys, folder) == [
        f"{path}: method.distribution: my-attn 0.3.1 was installed from a local folder or file, which CI cannot "
        "install; expected a release on the package index or a git URL at a commit, installed so and the records "
        "rerun"]


def test_a_distribution_installed_here_at_another_version_is_refused(outside_record, tmp_path, capsys):
    import importlib.metadata

    folder = tmp_path / "sub"
    installed = importlib.metadata.version("pyyaml")
    path = submit(folder, outside_record, {**MY_ATTN, "name": "PyYAML", "version": "0.0.1"}, ["PyYAML==0.0.1"])
    assert package_lines(capsys, folder) == [
        f"{path}: method.distribution.version: '0.0.1' while PyYAML {installed} is installed here; expected the "
        "version the record ran with"]


def test_a_package_that_does_not_exist_is_one_line_naming_it(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "submission.json").write_text(json.dumps({"submitter": "a", "added": "2026-12-06",
                                                        "packages": ["no-such-attention-package==9.9.9"]}))
    done = subprocess.run([sys.executable, "-m", "suite.submission", "install", str(folder)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PIP_NO_INDEX": "1",
                                                       "PIP_FIND_LINKS": str(tmp_path)})  # no index: an empty one
    assert done.returncode == 1
    [line] = done.stdout.splitlines()
    assert line.startswith(f"{folder / 'submission.json'}: packages[0]: 'no-such-attention-package==9.9.9' cannot be "
                           "installed (ERROR: ")
    assert line.endswith("; expected a release on the package index or a git URL at a commit that exists")


def test_the_install_step_installs_nothing_of_a_declaration_that_is_not_exact(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "submission.json").write_text(json.dumps({"submitter": "a", "added": "2026-12-06",
                                                        "packages": ["my-attn==0.3.1", "git+https://x.org/a.git"]}))
    done = subprocess.run([sys.executable, "-m", "suite.submission", "install", str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1 and "installed" not in done.stderr
    assert done.stdout == (f"{folder / 'submission.json'}: packages[1]: 'git+https://x.org/a.git' is a git URL not "
                           "pinned to a commit; expected git+https://...@<40-hex commit>\n")


@pytest.mark.parametrize("distribution, packages, why", [
    (None, None, "its distribution (None) is not a declared package"),
    (MY_ATTN, ["my-attn==0.3.1"], "module 'planted' is not installed by my-attn (installed by: no distribution)"),
])
def test_the_rerun_imports_no_method_but_a_declared_packages(outside_record, tmp_path, distribution, packages, why):
    """CI's rerun step runs code before validate does: it imports an outside method only where the
    record's distribution is declared and installs the module it names. A module planted beside the
    records (importable from the job's folder) is refused unimported."""
    folder = tmp_path / "sub"
    record = {**outside_record, "method": {**outside_record["method"], "import_path": "planted.attention:Method"}}
    path = submit(folder, record, distribution, packages)
    marker = tmp_path / "imported"
    (folder / "planted.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    done = subprocess.run([sys.executable, "-m", "suite.submission", "rerun", str(folder), "--results",
                           str(tmp_path / "rerun")], cwd=folder, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{folder}"})
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (f"{path}: method.import_path: 'planted.attention:Method' not imported: "
                                            f"{why}; expected a method of a package declared in submission.json")
    assert not marker.exists() and not (tmp_path / "rerun").exists()


def test_the_workflow_that_runs_submitted_code_has_no_secrets_and_a_read_only_token():
    text = (REPO / ".github" / "workflows" / "submissions.yml").read_text()
    workflow = yaml.safe_load(text)
    assert set(workflow[True]) == {"pull_request"}  # `on` reads as True; never pull_request_target
    assert "secrets." not in text and "GITHUB_TOKEN" not in text
    assert workflow["permissions"] == {"contents": "read"}
    steps = workflow["jobs"]["validate"]["steps"]
    assert steps[0]["with"]["persist-credentials"] is False
    script = (REPO / ".ci" / "validate-submissions").read_text()
    install, rerun, check = (script.rindex(s) for s in ("python -m suite.submission install",
                                                       "python -m suite.submission rerun",
                                                       "attention-suite validate --submission"))
    assert install < rerun < check
