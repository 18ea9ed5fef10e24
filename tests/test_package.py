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
def installed(tmp_path_factory) -> Path:
    """A venv holding only the built wheel; the dependencies are this interpreter's, on a path entry
    (so no index is needed), after the venv's own site-packages where the wheel lies."""
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
    [wheel] = (root / "dist").glob("attention_suite-*.whl")
    environment = root / "venv"
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


def clean_env(installed: Path, home: Path) -> dict[str, str]:
    """A user's environment: the venv's commands on PATH, no PYTHONPATH into a checkout."""
    return {"PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(home), "SUITE_HYDRA_DIR": str(home / "hydra")}


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


OUTSIDE_PYPROJECT = '''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "sigmoid-attention"
version = "0.1.0"

[project.entry-points."attention_suite.methods"]
sigmoid_fm = "sigpkg.attn:SigmoidAttention"

[tool.setuptools]
packages = ["sigpkg"]
'''


def test_an_installed_package_s_method_trains_and_its_run_page_says_what_to_install(installed, tmp_path, data_dir):
    """An outside package, built and installed beside the suite's wheel, declares its method by an
    entry point: the console command trains it by name, its record names the package and its
    version, and the run page installs that version before the command (issue 35)."""
    from tests.test_outside import SIGMOID

    source = tmp_path / "sigmoid-attention"
    (source / "sigpkg").mkdir(parents=True)
    (source / "sigpkg" / "__init__.py").write_text("")
    (source / "sigpkg" / "attn.py").write_text(SIGMOID)
    (source / "pyproject.toml").write_text(OUTSIDE_PYPROJECT)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (tmp_path / "dist").glob("sigmoid_attention-*.whl")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(installed / "bin" / "python"), "install",
                           "--no-deps", "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    env, results, out = clean_env(installed, tmp_path), tmp_path / "results", tmp_path / "out"
    ran = subprocess.run([str(installed / "bin" / "attention-suite"), "method=sigmoid_fm", "task=mqar", "budget=smoke",
                          f"results_dir={results}", f"data_dir={data_dir}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    [path] = results.rglob("*.json")
    method = json.loads(path.read_text())["method"]
    assert method["import_path"] == "sigpkg.attn:SigmoidAttention"
    assert method["distribution"] == {"name": "sigmoid-attention", "version": "0.1.0", "url": None, "commit": None,
                                      "dirty": None}
    built = subprocess.run([str(installed / "bin" / "attention-suite-site"), "--results", str(results), "--out",
                            str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    [page] = [p for p in out.rglob("*.html") if "pip install sigmoid-attention==0.1.0" in p.read_text()]
    assert " method=sigpkg.attn:SigmoidAttention " in page.read_text()  # by import path: works installed or not
