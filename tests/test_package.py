"""The suite as a real package: a wheel built from the sources, installed in a fresh virtual
environment, runs the main job and builds the site from a folder outside the repository, through
its console commands (the configs, templates, assets and data travel as package data)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("suite", "methods", "tasks", "pyproject.toml", "README.md", "LICENSE")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The suite's wheel, built from a copy of its sources."""
    root = tmp_path_factory.mktemp("package")
    source = root / "source"
    source.mkdir()
    for part in SOURCES:  # a copy, so that building leaves no build/ or egg-info in the repository
        if (REPO / part).is_dir():
            shutil.copytree(REPO / part, source / part, ignore=shutil.ignore_patterns("__pycache__", "_build"))
        else:
            shutil.copy(REPO / part, source / part)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(root / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    [built_wheel] = (root / "dist").glob("attention_suite-*.whl")
    return built_wheel


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    return install_wheel(wheel, tmp_path_factory.mktemp("installed") / "venv")


def install_wheel(wheel: Path, environment: Path) -> Path:
    """A venv holding only the built wheel; the dependencies are this interpreter's, on a path entry
    (so no index is needed), after the venv's own site-packages where the wheel lies."""
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    site_packages = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site_packages / "dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--ignore-installed", "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return environment


@pytest.mark.slow
def test_a_wheel_installed_inside_another_repository_records_its_version_and_no_commit(wheel, tmp_path, data_dir):
    """Provenance right or absent (issue 46): a user's own git repository holding the virtual
    environment (and the folder the command runs in) is not the suite's checkout, so its commit
    must not enter the record as the suite's. The record names the wheel's version alone, and
    validate takes that released version as the suite's provenance."""
    project = tmp_path / "my-project"
    project.mkdir()
    (project / "notes.txt").write_text("a user's own project\n")
    git = ["git", "-c", "user.name=a user", "-c", "user.email=user@example.org"]
    for args in (["init", "-q"], ["add", "notes.txt"], ["commit", "-q", "-m", "mine"]):
        subprocess.run([*git, *args], cwd=project, check=True, capture_output=True)
    theirs = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=project, text=True).strip()
    environment = install_wheel(wheel, project / ".venv")
    env, results = clean_env(environment, tmp_path), project / "results"
    ran = subprocess.run([str(environment / "bin" / "attention-suite"), "method=softmax", "task=listops",
                          "budget=smoke", f"results_dir={results}", f"data_dir={data_dir}"],
                         cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    [path] = results.rglob("*.json")
    record = json.loads(path.read_text())
    assert theirs not in path.read_text()
    assert (record["env"]["git_commit"], record["env"]["git_dirty"], record["env"]["suite_version"]) == (
        None, None, "0.1.0")
    assert record["method"]["distribution"] == {"name": "attention-suite", "version": "0.1.0", "url": None,
                                                "commit": None, "dirty": None, "source": "local"}
    (results / "submission.json").write_text(json.dumps({"submitter": "a user", "added": "2026-12-06"}))
    checked = subprocess.run([str(environment / "bin" / "attention-suite"), "validate", "--submission", str(results)],
                             cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stdout[-3000:]


def clean_env(installed: Path, home: Path) -> dict[str, str]:
    """A user's environment: the venv's commands on PATH, no PYTHONPATH into a checkout."""
    return {"PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(home), "SUITE_HYDRA_DIR": str(home / "hydra")}


@pytest.mark.slow
def test_the_installed_wheel_runs_the_main_job_and_builds_the_site_outside_the_repository(installed, tmp_path,
                                                                                            data_dir):
    bin_dir = installed / "bin"
    env = clean_env(installed, tmp_path)
    where = subprocess.check_output([str(bin_dir / "python"), "-c", "import suite; print(suite.__file__)"],
                                    cwd=tmp_path, env=env, text=True).strip()
    assert Path(where).is_relative_to(installed), where  # the wheel's copy, not the repository's
    results, out = tmp_path / "results", tmp_path / "out"
    ran = subprocess.run([str(bin_dir / "attention-suite"), "method=softmax", "task=listops", "budget=smoke",
                          f"results_dir={results}", f"data_dir={data_dir}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    [path] = results.rglob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["task"]["name"] == "listops"
    built = subprocess.run([str(bin_dir / "attention-suite-site"), "--results", str(results), "--out", str(out)],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "1 records" in built.stdout
    page = (out / "index.html").read_text()
    assert "listops" in page and (out / "assets" / "board.css").exists()


def test_the_console_command_refuses_a_typo_with_the_valid_choices(installed, tmp_path):
    done = subprocess.run([str(installed / "bin" / "attention-suite"), "method=favour"], cwd=tmp_path,
                          env=clean_env(installed, tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: unknown method 'favour'; did you mean 'favor'?")


def test_the_console_command_checks_the_readme_s_method_from_the_current_folder(installed, tmp_path):
    """The README's SigmoidAttention in my_pkg/attn.py of the folder the console command runs in:
    found there as `python -m suite` finds it (issue 46), and it passes the whole contract kit."""
    from tests.test_outside import readme_snippet

    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "attn.py").write_text(readme_snippet("# my_pkg/attn.py"))
    done = subprocess.run([str(installed / "bin" / "attention-suite"), "check-method", "my_pkg.attn:SigmoidAttention"],
                          cwd=tmp_path, env=clean_env(installed, tmp_path), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].startswith("check-method sigmoid_fm (capabilities: flops, recurrent, "
                                                           "weights): all ")


PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "{version}"

[project.entry-points."attention_suite.methods"]
{entry_points}

[tool.setuptools]
packages = ["{package}"]
"""


def install_outside(installed: Path, folder: Path, name: str, version: str, package: str,
                    modules: dict[str, str], entry_points: dict[str, str]) -> None:
    """Write a package of one's own (``modules``: file name -> source, ``entry_points``: method name ->
    ``module:Class``), build its wheel and install it into the ``installed`` venv beside the suite's."""
    source = folder / name
    (source / package).mkdir(parents=True)
    (source / package / "__init__.py").write_text("")
    for file, text in modules.items():
        (source / package / file).write_text(text)
    points = "\n".join(f'{method} = "{target}"' for method, target in entry_points.items())
    (source / "pyproject.toml").write_text(PYPROJECT.format(name=name, version=version, package=package,
                                                            entry_points=points))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(folder / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (folder / "dist").glob(f"{name.replace('-', '_')}-*.whl")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(installed / "bin" / "python"), "install",
                           "--no-deps", "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_an_installed_package_s_method_trains_and_its_run_page_says_what_to_install(installed, tmp_path, data_dir):
    """An outside package, built and installed beside the suite's wheel, declares its method by an
    entry point: the console command trains it by name, its record names the package and its
    version, and the run page installs that version before the command (issue 35)."""
    from tests.test_outside import SIGMOID

    install_outside(installed, tmp_path, "sigmoid-attention", "0.1.0", "sigpkg", {"attn.py": SIGMOID},
                    {"sigmoid_fm": "sigpkg.attn:SigmoidAttention"})
    env, results, out = clean_env(installed, tmp_path), tmp_path / "results", tmp_path / "out"
    ran = subprocess.run([str(installed / "bin" / "attention-suite"), "method=sigmoid_fm", "task=mqar", "budget=smoke",
                          f"results_dir={results}", f"data_dir={data_dir}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    [path] = results.rglob("*.json")
    method = json.loads(path.read_text())["method"]
    assert method["import_path"] == "sigpkg.attn:SigmoidAttention"
    assert method["distribution"] == {"name": "sigmoid-attention", "version": "0.1.0", "url": None, "commit": None,
                                      "dirty": None, "source": "local"}
    built = subprocess.run([str(installed / "bin" / "attention-suite-site"), "--results", str(results), "--out",
                            str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    # installed from a wheel on this machine: said in words, never guessed as an index name
    local = "# sigmoid-attention 0.1.0 was installed from a local folder or file: not reproducible from here"
    [page] = [p for p in out.rglob("*.html") if local in p.read_text()]
    assert "pip install sigmoid-attention" not in page.read_text()
    assert " method=sigpkg.attn:SigmoidAttention " in page.read_text()  # by import path: works installed or not


SMALL_BOARD = {"points": ["mqar"], "state_point": "mqar", "point_group": "task", "budget": "smoke",
               "protocol": {"name": "single", "seeds": [0]},
               "state_axes": {"stateless_softmax": {"model.d_model": [16]}}}


def reproduce_command(page: str) -> list[str]:
    """The last line of a run page's reproduce block (the suite's command), as arguments."""
    import html
    import re
    import shlex

    [block] = re.findall(r'<pre class="command">(.*?)</pre>', page, re.S)
    return shlex.split(html.unescape(block).strip().splitlines()[-1])


@pytest.mark.slow
def test_an_outside_package_joins_the_command_line_the_contract_the_board_and_the_site(wheel, tmp_path, data_dir):
    """Issue 35's must-show: a package of one's own (a sigmoid feature map on the public base, and a
    method with no recurrent form), built and installed beside the suite's wheel; with no file of the
    project edited, its methods train from the command line, pass ``check-method``, join a board
    file that names no method, and appear on the site with their provenance and a reproduce command
    that reruns the same config. The stateless one trains (no state size), and its decode record
    and the state axis say not applicable."""
    import yaml

    from tests.test_outside import SIGMOID

    # a venv of its own: the module's shared one may hold another package's sigmoid_fm already
    installed = install_wheel(wheel, tmp_path / "venv")
    stateless = (REPO / "tests" / "outside_methods.py").read_text()  # imports only methods
    install_outside(installed, tmp_path, "outside-attention", "0.2.0", "outpkg",
                    {"attn.py": SIGMOID, "stateless.py": stateless},
                    {"sigmoid_fm": "outpkg.attn:SigmoidAttention",
                     "stateless_softmax": "outpkg.stateless:StatelessSoftmax"})
    env, results, out = clean_env(installed, tmp_path), tmp_path / "results", tmp_path / "out"
    env["SUITE_DATA_DIR"] = str(data_dir)
    bin_dir = installed / "bin"

    def suite(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess:
        return subprocess.run([str(bin_dir / "attention-suite"), *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=900)

    # The command line: each method by its entry point's name.
    for name in ("sigmoid_fm", "stateless_softmax"):
        ran = suite(f"method={name}", "task=mqar", "budget=smoke", f"results_dir={results}", f"data_dir={data_dir}")
        assert ran.returncode == 0, ran.stderr[-3000:]
    trained = {r["method"]["name"]: r for r in map(json.loads, map(Path.read_text, results.rglob("*.json")))}
    assert {n: r["status"] for n, r in trained.items()} == {"sigmoid_fm": "ok", "stateless_softmax": "ok"}
    assert trained["sigmoid_fm"]["metrics"]["state_bytes"] > 0
    assert trained["stateless_softmax"]["metrics"]["state_bytes"] is None
    assert trained["stateless_softmax"]["method"]["capabilities"] == ["flops"]
    for name, record in trained.items():
        assert record["method"]["distribution"]["name"] == "outside-attention", name
        assert record["method"]["distribution"]["version"] == "0.2.0", name

    # Decode needs a recurrent form: the stateless method's record says not applicable, and why.
    decoded = suite("method=stateless_softmax", "mode=decode", "budget=smoke", f"results_dir={results}")
    assert decoded.returncode == 0, decoded.stderr[-3000:]
    [decode] = [json.loads(p.read_text()) for p in (results / "decode").rglob("*.json")]
    assert decode["status"] == "not_applicable" and "recurrent" in decode["error"]

    # The contract kit, on each by name and by import path.
    for spec in ("sigmoid_fm", "outpkg.stateless:StatelessSoftmax"):
        checked = suite("check-method", spec)
        assert checked.returncode == 0, (spec, checked.stdout[-3000:], checked.stderr[-3000:])

    # A board file that names no method runs every registered one, the outside two included (the two
    # trained above are skipped: the same configs), and the stateless one's state axis too.
    board_file = tmp_path / "small.yaml"
    board_file.write_text(yaml.safe_dump(SMALL_BOARD))
    boarded = suite("board", str(board_file), "--results", str(results))
    assert boarded.returncode == 0, boarded.stderr[-3000:]
    train = [json.loads(p.read_text()) for p in (results / "train").rglob("*.json")]
    names = {r["method"]["name"] for r in train}
    assert {"sigmoid_fm", "stateless_softmax", "softmax", "linear", "taylor"} <= names
    assert all(r["status"] == "ok" for r in train)
    widths = sorted(r["config"]["model"]["d_model"] for r in train if r["method"]["name"] == "stateless_softmax")
    assert widths == [16, 32]  # the smoke model's width, and the state axis's

    # The site: the methods with their provenance, and a reproduce command that reruns the same config.
    site = subprocess.run([str(bin_dir / "attention-suite-site"), "--results", str(results), "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert site.returncode == 0, site.stderr[-3000:]
    runs = (out / "runs.html").read_text()  # smoke runs are listed there, not on the board's tables
    assert "sigmoid_fm" in runs and "stateless_softmax" in runs and "not_applicable" in runs
    pages = [p.read_text() for p in out.rglob("*.html")]
    local = "# outside-attention 0.2.0 was installed from a local folder or file: not reproducible from here"
    [page] = [p for p in pages if local in p and "outpkg.attn:SigmoidAttention" in p]
    command = reproduce_command(page)
    assert "method=outpkg.attn:SigmoidAttention" in command
    again = tmp_path / "again"
    rerun = subprocess.run([*command, f"results_dir={again}", f"data_dir={data_dir}"], cwd=tmp_path,
                           env={**env, "PATH": f"{bin_dir}:{env['PATH']}"}, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    [repeated] = [json.loads(p.read_text()) for p in again.rglob("*.json")]
    assert repeated["config_hash"] == trained["sigmoid_fm"]["config_hash"]
    assert repeated["metrics"]["test_accuracy"] == trained["sigmoid_fm"]["metrics"]["test_accuracy"]


@pytest.mark.slow
def test_the_example_package_goes_from_a_wheel_to_a_validated_submission(wheel, tmp_path, data_dir):
    """Issue 46, the outside contributor's path end to end: the suite's wheel and examples/my-attn,
    each built and installed in a fresh venv (my-attn by name from a local package index, as from
    PyPI); both its methods pass check-method, train at the smoke budget and decode (not applicable
    to the top-k one); the records, with a submission.json that declares my-attn==0.3.1, go through
    what the submissions workflow runs: install the declared packages into a second fresh venv,
    rerun check-method and a smoke run of each method, validate --submission."""
    index = tmp_path / "index"
    source = tmp_path / "my-attn"
    shutil.copytree(REPO / "examples" / "my-attn", source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(index), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]

    def fresh(name: str) -> tuple[Path, dict]:
        environment = install_wheel(wheel, tmp_path / name)
        env = {**clean_env(environment, tmp_path), "SUITE_DATA_DIR": str(data_dir), "PIP_NO_INDEX": "1",
               "PIP_FIND_LINKS": str(index)}
        return environment, env

    def pip_install(environment: Path, spec: str) -> None:  # by name from the local index: no direct URL
        done = subprocess.run([sys.executable, "-m", "pip", "--python", str(environment / "bin" / "python"), "install",
                               "--no-deps", "--no-index", "--find-links", str(index), "-q", spec],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]

    contributor, env = fresh("contributor-venv")
    pip_install(contributor, "my-attn==0.3.1")
    work, submission = tmp_path / "work", tmp_path / "submissions" / "me-cpu"
    work.mkdir()

    def suite(environment: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(environment / "bin" / "attention-suite"), *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=900)

    for name in ("relu_fm", "topk_softmax"):
        checked = suite(contributor, env, "check-method", name)
        assert checked.returncode == 0, (name, checked.stdout[-3000:], checked.stderr[-3000:])
        assert f"check-method {name} " in checked.stderr and "checks passed" in checked.stderr
        for mode in ("train", "decode"):
            ran = suite(contributor, env, f"method={name}", "task=mqar", "budget=smoke", f"mode={mode}",
                        f"results_dir={submission}")
            assert ran.returncode == 0, (name, mode, ran.stderr[-3000:])
    found = [json.loads(p.read_text()) for p in submission.rglob("*.json")]
    assert sorted((r["kind"], r["method"]["name"], r["status"]) for r in found) == [
        ("decode", "relu_fm", "ok"), ("decode", "topk_softmax", "not_applicable"),
        ("train", "relu_fm", "ok"), ("train", "topk_softmax", "ok")]
    for record in found:
        assert record["method"]["distribution"] == {"name": "my-attn", "version": "0.3.1", "url": None,
                                                    "commit": None, "dirty": None, "source": "index"}
        assert record["config"]["method"]["package"] == "my-attn==0.3.1"
        assert (record["env"]["git_commit"], record["env"]["suite_version"]) == (None, "0.1.0")
    (submission / "submission.json").write_text(json.dumps({"submitter": "a contributor", "added": "2026-12-06",
                                                            "packages": ["my-attn==0.3.1"]}))

    # CI, in a venv of its own: the declared packages, the reruns, then validate.
    ci, ci_env = fresh("ci-venv")
    python = str(ci / "bin" / "python")
    installed = subprocess.run([python, "-m", "suite.submission", "install", str(submission)], cwd=work, env=ci_env,
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    rerun = subprocess.run([python, "-m", "suite.submission", "rerun", str(submission), "--results",
                            str(tmp_path / "rerun")], cwd=work, env=ci_env, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert sorted(p.parent.name for p in (tmp_path / "rerun").rglob("*.json")) == ["relu_fm", "topk_softmax"]
    checked = suite(ci, ci_env, "validate", "--submission", str(submission))
    assert checked.returncode == 0, checked.stdout[-3000:]
