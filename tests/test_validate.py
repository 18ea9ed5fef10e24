"""`attention-suite validate`: records from elsewhere checked as untrusted input. Each broken record
below sits in an otherwise valid submission (tests/fake_submission.py) and is caught by one line
naming its file, the field and what was expected; the valid records beside it give no line; the
committed results/ validate clean; nothing is written."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from suite import records
from suite.records import MAX_FILE_BYTES
from suite.validate import main
from tests.fake_submission import BOARD, REPO, committed_cell, gpu_record, make_submission, write

REPORT = os.environ.get("VALIDATE_REPORT")  # a file to append each case's lines to (the report)


def run_validate(capsys, *args: str) -> tuple[int, list[str]]:
    code = main(list(args))
    return code, capsys.readouterr().out.splitlines()


def edited(record: dict, edit) -> dict:
    new = copy.deepcopy(record)
    edit(new)
    return new


def set_at(path: tuple, value):
    def edit(record: dict) -> None:
        node = record
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit


def delete_at(path: tuple):
    def edit(record: dict) -> None:
        node = record
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return edit


def with_text(record: dict, change) -> bytes:
    return change(json.dumps(record, indent=1)).encode()


OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def unknown_method(record: dict) -> None:
    record["method"]["name"] = record["config"]["method"]["name"] = "mystery"
    record["config_hash"] = records.record_config_hash(record)
    record["run_id"] = record["run_id"][:-8] + "mystery0"


# name: (how the broken file is made from a valid record, a fragment of the line that catches it).
# A case returns a record (written at its own path), or (relative path, bytes) for a file as given.
CASES = {
    "truncated JSON": (lambda r: ("train/x/y/truncated.json", json.dumps(r).encode()[:400]),
                       "not valid JSON"),
    "wrong kind": (lambda r: ("train/listops_short/softmax/kind.json",
                              json.dumps(edited(r, set_at(("kind",), "kernel"))).encode()),
                   "field 'kind' is 'kernel' but 'config.mode.name' is 'train'"),
    "unknown kind": (lambda r: ("train/x/y/unknown-kind.json",
                                json.dumps(edited(r, set_at(("kind",), "training"))).encode()),
                     "unknown kind 'training'"),
    "config hash mismatch": (lambda r: edited(r, set_at(("config", "budget", "lr"), 0.02)),
                             "does not recompute from the stored config"),
    "state bytes not recomputing": (lambda r: edited(r, set_at(("metrics", "state_bytes"),
                                                                 r["metrics"]["state_bytes"] + 8)),
                                    "metrics.state_bytes"),
    "cell mixing commits": (lambda r: edited(r, set_at(("env", "git_commit"), OTHER_COMMIT)), "one commit per cell"),
    "path traversal run id": (lambda r: ("train/listops_short/softmax/evil.json",
                                         json.dumps(edited(r, set_at(("run_id",), "../../../../tmp/evil"))).encode()),
                              "run_id: '../../../../tmp/evil' names a folder or file but is not a plain name"),
    "script in method name": (lambda r: ("train/listops_short/softmax/script.json", json.dumps(
        edited(edited(r, set_at(("method", "name"), "<script>alert(1)</script>")),
               set_at(("config", "method", "name"), "<script>alert(1)</script>"))).encode()),
                              "method.name: holds markup"),
    "script in error text": (lambda r: edited(r, lambda x: x.update(status="error", error="<script>alert(1)</script>")),
                             "error: holds markup '<script>aler'"),
    "missing provenance (suite version)": (lambda r: edited(r, delete_at(("env", "suite_version"))),
                                           "env.suite_version: missing; expected the suite's version"),
    "missing provenance (commit, development version)": (
        lambda r: edited(edited(r, delete_at(("env", "git_commit"))), set_at(("env", "suite_version"), "0.1.1.dev3")),
        "env.git_commit: missing; expected the suite's commit"),
    "missing provenance (commit, no version)": (
        lambda r: edited(edited(r, set_at(("env", "git_commit"), None)), delete_at(("env", "suite_version"))),
        "env.git_commit: null; expected the suite's commit"),
    "missing hardware key": (lambda r: edited(r, delete_at(("env", "hardware", "fla"))), "env.hardware.fla: missing"),
    "dirty tree": (lambda r: edited(r, set_at(("env", "git_dirty"), True)), "env.git_dirty: true"),
    "NaN metric": (lambda r: (str(records.record_path(r, ".")), with_text(
        r, lambda t: t.replace(f'"test_accuracy": {r["metrics"]["test_accuracy"]}', '"test_accuracy": NaN'))),
                   "metrics.test_accuracy: nan is not a number JSON allows"),
    "wrong type": (lambda r: edited(r, set_at(("metrics", "steps"), "6000")), "metrics.steps"),
    "repeated key": (lambda r: (str(records.record_path(r, ".")), with_text(
        r, lambda t: t.replace('"status": "ok"', '"status": "ok", "status": "ok"'))), "key 'status' appears 2 times"),
    "oversized file": (lambda r: (str(records.record_path(r, ".")), json.dumps(r).encode() + b" " * MAX_FILE_BYTES),
                       f"bytes, above the cap of {MAX_FILE_BYTES:,} bytes; expected a regular file"),
    "unknown method": (lambda r: edited(r, unknown_method), "unknown method 'mystery'"),
    "bad commit": (lambda r: edited(r, set_at(("env", "git_commit"), "HEAD")),
                   "field 'env.git_commit': String should match pattern"),
}


@pytest.mark.parametrize("case", CASES)
def test_validate_catches_each_broken_record_with_its_own_line(case, tmp_path, capsys):
    folder = tmp_path / "submission"
    paths = make_submission(folder)
    victim = json.loads(paths[0].read_text())
    make, fragment = CASES[case]
    made = make(victim)
    if isinstance(made, dict):
        paths[0].unlink()
        broken = write(folder, made)
    else:
        relative, data = made
        paths[0].unlink()
        broken = folder / relative
        broken.parent.mkdir(parents=True, exist_ok=True)
        broken.write_bytes(data)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    code, lines = run_validate(capsys, "--submission", str(folder))
    assert code == 1
    assert lines and all(line.startswith(f"{broken}: ") for line in lines), lines  # the valid records give none
    assert any(fragment in line for line in lines), lines
    assert all("; expected " in line for line in lines)
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before  # records untouched
    if REPORT:
        with open(REPORT, "a") as report:
            report.write(f"## {case}\n" + "\n".join(lines) + "\n")


def test_a_record_from_a_wheel_names_a_released_version_in_place_of_a_commit(tmp_path, capsys):
    """A wheel of the suite records its version and no commit (suite/env.py, suite_git_state): a released
    version is provenance enough, a development build's is not."""
    folder = tmp_path / "submission"
    paths = make_submission(folder)
    for path in paths:
        path.write_text(json.dumps(edited(json.loads(path.read_text()), lambda r: r["env"].update(
            git_commit=None, git_dirty=None, suite_version="0.1.0"))))
    assert run_validate(capsys, "--submission", str(folder)) == (0, [])
    victim = json.loads(paths[0].read_text())
    paths[0].write_text(json.dumps(edited(victim, set_at(("env", "suite_version"), "0.1.0+local.edit"))))
    code, lines = run_validate(capsys, "--submission", str(folder))
    # a development build names no commit here: refused, as is its version beside the cell's release
    assert code == 1 and {line.split(": ")[1] for line in lines} == {"env.git_commit", "env.git_dirty",
                                                                     "env.suite_version"}, lines


def test_a_duplicate_run_and_a_link_leaving_the_folder_are_refused(tmp_path, capsys):
    folder = tmp_path / "submission"
    paths = make_submission(folder)
    copied = paths[0].with_name("copy.json")
    shutil.copyfile(paths[0], copied)
    (folder / "train" / "link.json").symlink_to("/etc/hostname")
    code, lines = run_validate(capsys, "--submission", str(folder))
    assert code == 1
    assert f"{folder / 'train' / 'link.json'}: file: a symbolic link; expected a plain file inside the folder" in lines
    assert any(line.startswith(f"{copied}: run_id: ") and f"is also the run id of {paths[0]}" in line
               for line in lines), lines
    if REPORT:
        with open(REPORT, "a") as report:
            report.write("## duplicate run and a link\n" + "\n".join(lines) + "\n")


def test_kernel_flops_that_do_not_recompute_are_caught(tmp_path, capsys):
    [source] = sorted((REPO / "results" / "kernel").rglob("*.json"))[:1]
    record = json.loads(source.read_text())
    point = next(i for i, p in enumerate(record["metrics"]["points"]) if p["source"] == "method" and "fwd_flops" in p)
    record["metrics"]["points"][point]["fwd_flops"] *= 2
    path = write(tmp_path, record)
    code, lines = run_validate(capsys, str(tmp_path))
    assert code == 1 and len(lines) == 1
    assert lines[0].startswith(f"{path}: metrics.points[{point}].fwd_flops: ") and "does not recompute" in lines[0]


def test_a_valid_submission_and_the_committed_results_validate_clean(tmp_path, capsys):
    make_submission(tmp_path / "submission")
    assert run_validate(capsys, "--submission", str(tmp_path / "submission")) == (0, [])
    # The records committed under results/ (not a run someone just made there, as README's first command does).
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "results"], capture_output=True, text=True,
                             check=True).stdout.split()
    committed = tmp_path / "results"
    for name in tracked:
        (committed / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, committed / name)
    assert tracked and run_validate(capsys, str(committed / "results")) == (0, [])


@pytest.mark.parametrize("run_threads, problem", [(1, False), (2, True)])
def test_a_cells_device_is_named_with_the_threads_its_run_used(tmp_path, capsys, run_threads, problem):
    # A record before a3321d7 named the launching process's threads in env.device_name: one run of a
    # one-thread cell started from a 2-thread process says "(2 threads)" while its own are in
    # metrics.cpu_threads. It is the cell's device as the site reads it (records.hardware_class), so
    # only a run that did use another thread count is named.
    cell = sorted((BOARD / "train" / "listops_short" / "softmax").glob("*.json"))
    runs = [json.loads(path.read_text()) for path in cell]
    assert len(runs) >= 3 and {r["env"]["device_name"] for r in runs} == {"AMD EPYC (1 threads)"}
    runs[0]["env"]["device_name"] = "AMD EPYC (2 threads)"
    runs[0]["metrics"]["cpu_threads"] = run_threads
    written = [write(tmp_path / "results", run) for run in runs]
    code, lines = run_validate(capsys, str(tmp_path / "results"))
    if problem:
        assert code == 1 and lines == [f'{written[0]}: env.device_name: "AMD EPYC (2 threads)" while {len(runs) - 1} '
                                       f'of the {len(runs) - 1} other runs of its board cell have "AMD EPYC (1 '
                                       'threads)"; expected one device per cell']
    else:
        assert (code, lines) == (0, [])


def test_a_board_pinned_at_one_commit_refuses_records_of_another(tmp_path, capsys):
    shutil.copytree(BOARD / "train" / "listops_short", tmp_path / "train" / "listops_short")
    (tmp_path / "train" / "BOARD_COMMIT").write_text(OTHER_COMMIT + "\n")
    code, lines = run_validate(capsys, str(tmp_path))
    pinned = [line for line in lines if "under a board pinned at" in line]  # (Taylor's also say: version 1)
    assert code == 1 and len(pinned) == len(list(tmp_path.rglob("*.json")))
    assert all(f"env.git_commit: d846858003a3 under a board pinned at {OTHER_COMMIT[:12]}" in line for line in pinned)


def test_old_records_lack_a_submissions_provenance_and_are_told_so(tmp_path, capsys):
    """The committed records predate the hardware block: valid as the project's, not as a submission."""
    record = committed_cell()[0]
    write(tmp_path / "old", record)
    code, lines = run_validate(capsys, "--submission", str(tmp_path / "old"))
    assert code == 1
    assert any("env.hardware.device_model: missing" in line for line in lines)
    assert any("submission.json: file: missing" in line for line in lines)


@pytest.mark.slow
def test_console_command_and_module_form(tmp_path):
    make_submission(tmp_path / "ok")
    broken = edited(gpu_record(committed_cell()[0], 1), set_at(("env", "git_commit"), OTHER_COMMIT))
    write(tmp_path / "ok", broken)
    script = Path(sys.executable).with_name("attention-suite")
    for command in ([str(script), "validate"], [sys.executable, "-m", "suite.validate"]):
        done = subprocess.run([*command, "--submission", str(tmp_path / "ok")], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 1, done.stderr
        assert "env.git_commit" in done.stdout and "one commit per cell" in done.stdout
        assert "validate: 1 problem(s) in 1 file(s) of 3 checked" in done.stderr
    done = subprocess.run([str(script), "validate", str(tmp_path / "nothing")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and "no such file or folder" in done.stderr


def workflow_command() -> str:
    """The run line of the submissions workflow's validate step."""
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "submissions.yml").read_text())
    assert set(workflow[True]["pull_request"]["paths"]) == {"submissions/**", "results/**"}  # `on` reads as True
    [step] = [s for s in workflow["jobs"]["validate"]["steps"] if "validate-submissions" in s.get("run", "")]
    return step["run"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def pull_request(tmp_path: Path, change) -> subprocess.CompletedProcess:
    """The workflow's command in a repository whose last commit is a pull request made by ``change``."""
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "validate-submissions", repo / ".ci")
    (repo / "results").mkdir()
    (repo / "results" / "README").write_text("the project's records\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    change(repo)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "submission")
    command = workflow_command().replace('"origin/${{ github.base_ref }}"', base)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def test_the_workflow_command_fails_a_broken_submission_with_validates_lines(tmp_path):
    def broken(repo: Path) -> None:
        paths = make_submission(repo / "submissions" / "ada-h100")
        record = json.loads(paths[0].read_text())
        record["metrics"]["test_accuracy"] = 0.99  # an edited result: the hash still holds, the commit not
        record["env"]["git_commit"] = OTHER_COMMIT
        paths[0].write_text(json.dumps(record))

    done = pull_request(tmp_path, broken)
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith("submissions/ada-h100/train/listops_short/softmax/") and "one commit per cell" in line
    assert "validate: 1 problem(s) in 1 file(s) of 3 checked" in done.stderr


@pytest.mark.slow
def test_the_workflow_command_passes_a_valid_submission_and_refuses_edits_to_results(tmp_path):
    done = pull_request(tmp_path / "ok", lambda repo: make_submission(repo / "submissions" / "ada-h100"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "validate: 3 record(s), all valid" in done.stderr

    def edits_results(repo: Path) -> None:
        make_submission(repo / "submissions" / "ada-h100")
        (repo / "results" / "README").write_text("changed\n")

    done = pull_request(tmp_path / "results", edits_results)
    assert done.returncode == 1 and "may not change results/" in done.stderr and "results/README" in done.stderr


def test_a_run_of_this_suite_writes_the_provenance_a_submission_needs(make_config, capsys):
    """A record from the real writer: its hardware block has every key of the schema's, it names
    the suite's version and the method's distribution, and it validates; as a submission the only
    thing that may be missing is a clean tree (a test runs in whatever checkout it is given)."""
    import torch

    from suite import env, schema
    from suite.run import run

    config = make_config("method=favor", "task=mqar", "task.vocab_size=128", "cpu_threads=1")
    path, outcome = run(config)
    assert outcome.status == "ok"
    capsys.readouterr()  # the run's own output
    record = json.loads(path.read_text())
    hardware = record["env"]["hardware"]
    assert set(hardware) == set(schema.Hardware.model_fields)
    assert hardware["device_model"] == env.cpu_model() and hardware["device_memory_bytes"] > 0
    assert hardware["torch"] == torch.__version__ and hardware["driver"] is None  # no GPU here
    assert record["env"]["suite_version"] == env.suite_version() is not None
    # The suite's own method: its distribution is the suite, its commit the suite's checkout's.
    assert record["method"]["distribution"] == {"name": "attention-suite", "version": env.suite_version(), "url": None,
                                                "commit": record["env"]["git_commit"],
                                                "dirty": record["env"]["git_dirty"],
                                                "source": "local"}  # an editable install of this checkout
    assert record["method"]["import_path"] == "methods.favor.module:FavorAttention"
    results = Path(config["results_dir"])
    assert run_validate(capsys, str(results)) == (0, [])
    (results / "submission.json").write_text(json.dumps({"submitter": "a test", "added": "2026-12-03"}))
    code, lines = run_validate(capsys, "--submission", str(results))
    assert lines == ([] if record["env"]["git_dirty"] is False else [
        f"{path}: env.git_dirty: true: the checkout had uncommitted changes; expected false (a submission runs "
        "from a clean checkout of a suite commit)"])
