"""A method from outside the project, with no file of the project edited (issue 35): named by its
import path on the command line, declared by an installed distribution's entry point, or given a
config of its own through ``hydra.searchpath``; its record names where its code came from, and the
run page says what to install before the command. Task families come through entry points too."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

import methods
import tasks
from methods.base import MethodError
from methods.registry import REGISTRY
from suite import env, record_store, records
from suite.__main__ import check_group_choices, group_choices, import_paths, main
from suite.groups import store, store_spec
from suite.site.runs import install_lines, load_runs, reproduce_command
from tasks.base import TaskError

REPO = Path(__file__).resolve().parents[1]
SIGMOID = '''"""An outside method on the public base: phi(x) = sigmoid(x), naive path only."""

import torch

from methods import FeatureMapAttention


class SigmoidAttention(FeatureMapAttention):
    name = "sigmoid_fm"
    impls = ("naive",)
    cpu_default = "naive"
    time_in_length = "N^2"  # its one path is the quadratic definition (check-method measures it so)

    @property
    def num_features(self):
        return self.head_dim

    def feature_map(self, x, kind):
        self.check_kind(kind)
        return torch.sigmoid(x.float())
'''
SPEC = "sigpkg.attn:SigmoidAttention"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def write_package(folder: Path, package: str) -> None:
    (folder / package).mkdir(parents=True)
    (folder / package / "__init__.py").write_text("")
    (folder / package / "attn.py").write_text(SIGMOID)


def write_distribution(folder: Path, name: str, entry_points: str, top_level: str, direct_url: dict | None = None):
    """An installed distribution as importlib.metadata reads it: a ``*.dist-info`` folder on sys.path."""
    info = folder / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    (info / "top_level.txt").write_text(top_level + "\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))


@pytest.fixture
def outside(tmp_path, monkeypatch):
    """A folder on sys.path holding the package ``sigpkg``; afterwards the registries, the
    ConfigStore and the imported modules are as they were."""
    folder = tmp_path / "outside"
    write_package(folder, "sigpkg")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(tasks, "LOADERS", dict(tasks.LOADERS))
    monkeypatch.setattr(tasks, "CONFIGS", dict(tasks.CONFIGS))
    registered, repo = dict(REGISTRY), ConfigStore.instance().repo
    stored = {group: dict(repo[group]) for group in ("method", "task") if group in repo}
    yield folder
    REGISTRY.clear()
    REGISTRY.update(registered)
    for group in ("method", "task"):
        repo.pop(group, None)
        if group in stored:
            repo[group] = stored[group]
    for name in [m for m in sys.modules if m.split(".")[0] in ("sigpkg", "fakepkg", "fakefam")]:
        del sys.modules[name]


@pytest.fixture
def cli(monkeypatch, capsys, tmp_path, data_dir):
    """``python -m suite *args`` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setenv("SUITE_HYDRA_DIR", str(tmp_path / "hydra"))
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)

    def call(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["suite", *args, f"data_dir={data_dir}",
                                          f"results_dir={tmp_path / 'results'}"])
        GlobalHydra.instance().clear()
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as exit_info:
            code = exit_info.code
        out = capsys.readouterr()
        return code, out.out, out.err

    return call


def composed(overrides: list[str]) -> dict:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return OmegaConf.to_container(compose("config", overrides=overrides), resolve=True)


def test_a_method_by_import_path_trains_and_its_record_names_its_code(outside, cli, tmp_path):
    code, _, err = cli(f"method={SPEC}", "task=mqar", "budget=smoke")
    assert code == 0, err
    [path] = (tmp_path / "results").rglob("*.json")
    record = record_store.read_record(path)
    assert record["status"] == "ok" and path.parent.name == "sigmoid_fm"
    assert record["config"]["method"] == {"name": "sigmoid_fm", "impl": "auto", "options": {"chunk_size": 64},
                                          "version": 1}
    method = record["method"]
    assert method["import_path"] == SPEC  # what method= takes
    # No distribution ships it and its folder is no git checkout: nothing more is known, and said so.
    assert method["distribution"] == {"name": None, "version": None, "url": None, "commit": None, "dirty": None,
                                      "source": None}

    [run] = load_runs(tmp_path / "results")[0]
    command = reproduce_command(run)
    assert f" method={SPEC} " in command
    assert install_lines(run)[1:] == ["# sigpkg.attn ran from a folder on the Python path, not an installed package: "
                                  "put it on PYTHONPATH"]
    config = composed([*shlex.split(command)[3:], f"results_dir={tmp_path}"])  # the stored spec composes again
    config = {**config, "method": {**config["method"], "version": 1}}
    assert records.config_hash(config, "cpu") == records.record_config_hash(record)


def test_a_repository_that_holds_the_method_s_folder_but_not_its_code_names_no_commit(outside):
    """Right or absent: a commit is recorded only from a checkout that tracks the method's code, not
    from one that merely contains the folder it was imported from."""
    git = ["git", "-c", "user.name=a user", "-c", "user.email=user@example.org"]
    (outside / "notes.txt").write_text("unrelated\n")
    for args in (["init", "-q"], ["add", "notes.txt"], ["commit", "-q", "-m", "notes only"]):
        subprocess.run([*git, *args], cwd=outside, check=True, capture_output=True)
    cls = methods.resolve(SPEC)
    assert env.distribution_of(cls)["commit"] is None
    for args in (["add", "sigpkg"], ["commit", "-q", "-m", "the method"]):
        subprocess.run([*git, *args], cwd=outside, check=True, capture_output=True)
    head = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=outside, text=True).strip()
    assert (env.distribution_of(cls)["commit"], env.distribution_of(cls)["dirty"]) == (head, False)


def readme_snippet(marker: str) -> str:
    """The README's Python block that starts with ``marker`` (a comment naming its file)."""
    import re

    [block] = [b for b in re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
               if b.startswith(marker)]
    return block


def test_the_readme_s_own_method_passes_check_method(tmp_path):
    """The README's SigmoidAttention, as a reader would copy it into my_pkg/attn.py, passes the whole
    contract kit through the console command run from that folder (issue 46)."""
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "attn.py").write_text(readme_snippet("# my_pkg/attn.py"))
    done = subprocess.run([sys.executable, "-m", "suite", "check-method", "my_pkg.attn:SigmoidAttention"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout == ""
    assert done.stderr.strip().splitlines()[-1].startswith(
        "check-method sigmoid_fm (capabilities: flops, recurrent, weights): all ")


def test_a_sweep_names_a_method_by_import_path_among_built_in_ones(outside):
    argv = ["-m", f"method=linear,{SPEC}", "task=mqar"]
    assert check_group_choices(argv) is None  # a sweep's choices as typed, not as Hydra escapes them (\:)
    assert import_paths(argv) == [SPEC]
    assert composed([f"method={SPEC}"])["method"]["name"] == "sigmoid_fm"


@pytest.mark.slow
def test_a_joblib_sweep_runs_a_method_by_import_path_in_its_workers(outside, tmp_path, data_dir):
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "suite", "-m", "hydra/launcher=joblib_local", "hydra.launcher.n_jobs=2",
         f"method=linear,{SPEC}", "task=mqar", "budget=smoke", f"results_dir={results}"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(outside), str(REPO)]), "SUITE_DATA_DIR": str(data_dir),
             "SUITE_HYDRA_DIR": str(tmp_path / "hydra")},
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.parent.name for p in results.rglob("*.json")) == ["linear", "sigmoid_fm"]


@pytest.mark.parametrize("spec, says", [
    ("nopkg.attn:SigmoidAttention", "cannot import method 'nopkg.attn:SigmoidAttention' (expected 'module:Class'): "
                                     "No module named 'nopkg'"),
    ("sigpkg.attn:Missing", "cannot import method 'sigpkg.attn:Missing' (expected 'module:Class'): "),
    ("os:path", "'os:path' is <module"),
    ("sigpkg.attn:torch", "not a subclass of methods.AttentionMethod"),
])
def test_a_bad_import_path_is_one_line(outside, cli, tmp_path, spec, says):
    code, _, err = cli(f"method={spec}", "budget=smoke")
    assert code == 2 and err.startswith("error: ") and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "results").exists()


def test_an_unknown_method_names_the_valid_ones_and_the_import_path_form(outside):
    message = check_group_choices(["method=sigmoid"])
    assert message == (f"unknown method 'sigmoid'; valid methods: {', '.join(sorted(methods.available()))}; "
                       "or a class by its import path, method=my_pkg.attn:MyAttention")


def test_a_method_of_an_installed_distribution_is_registered_by_its_entry_point(outside, tmp_path, monkeypatch):
    site = tmp_path / "site"
    write_package(site, "fakepkg")
    write_distribution(site, "fakedist", "[attention_suite.methods]\nsigmoid = fakepkg.attn:SigmoidAttention\n",
                       "fakepkg", {"url": "https://example.org/fakedist.git",
                                   "vcs_info": {"vcs": "git", "commit_id": COMMIT}})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(methods, "_discovered", False)
    assert "sigmoid_fm" in methods.available()
    cls = methods.get("sigmoid_fm")
    assert cls.__module__ == "fakepkg.attn"
    assert env.distribution_of(cls) == {"name": "fakedist", "version": "1.0", "url": "https://example.org/fakedist.git",
                                        "commit": COMMIT, "dirty": None, "source": "git"}
    assert check_group_choices(["method=sigmoid_fm"]) is None and "sigmoid_fm" in group_choices("method")
    assert composed(["method=sigmoid_fm"])["method"] == {"name": "sigmoid_fm", "impl": "auto",
                                                         "options": {"chunk_size": 64}}
    run = SimpleNamespace(record={"method": {"import_path": "fakepkg.attn:SigmoidAttention",
                                             "distribution": env.distribution_of(cls)},
                                  "env": {"git_commit": None, "suite_version": "0.1.0"}})
    # The suite at its release (no commit recorded), then the package as it was installed.
    assert install_lines(run) == ["pip install attention-suite==0.1.0",
                                  f"pip install git+https://example.org/fakedist.git@{COMMIT}"]
    run.record["method"]["distribution"] = {"name": "fakedist", "version": "1.0", "source": "index"}
    assert install_lines(run)[1:] == ["pip install fakedist==1.0"]
    # Never a guessed index name: a local folder (or a record that does not say) is said in words.
    run.record["method"]["distribution"] = {"name": "fakedist", "version": "1.0", "source": "local"}
    assert install_lines(run)[1:] == [
        "# fakedist 1.0 was installed from a local folder or file: not reproducible from here"]
    run.record["method"]["distribution"] = {"name": "fakedist", "version": "1.0"}
    assert install_lines(run)[1:] == [
        "# fakedist 1.0: how it was installed was not recorded: not reproducible from here"]
    run.record["env"]["git_commit"] = COMMIT
    assert install_lines(run)[0] == f"git checkout {COMMIT}"


@pytest.mark.parametrize("value, says", [
    ("nopkg.attn:SigmoidAttention", "ModuleNotFoundError: No module named 'nopkg'"),
    ("os:sep", "names '/', neither a module nor a subclass of methods.AttentionMethod"),
])
def test_a_broken_entry_point_is_one_error_naming_its_distribution(outside, tmp_path, monkeypatch, value, says):
    site = tmp_path / "site"
    write_distribution(site, "brokendist", f"[attention_suite.methods]\nbad = {value}\n", "nopkg")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(methods, "_discovered", False)
    where = f"entry point bad = {value!r} of brokendist (group attention_suite.methods)"
    with pytest.raises(MethodError, match="the " + where.replace("(", r"\(").replace(")", r"\)")):
        methods.available()
    message = check_group_choices(["method=softmax"])  # the command line says it in one line
    assert where in message and says in message and "\n" not in message


def test_a_task_family_of_an_installed_distribution_is_registered_with_its_configs(outside, tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "fakefam").mkdir(parents=True)
    config = {**composed(["task=mqar"])["task"], "name": "fake_mqar"}
    (site / "fakefam" / "__init__.py").write_text(
        f"LOADERS = {{'fake_mqar': 'tasks.recall.mqar:load'}}\nCONFIGS = {{'fake_mqar': {config!r}}}\n")
    write_distribution(site, "fakefamily", "[attention_suite.tasks]\nfake = fakefam\n", "fakefam")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(tasks, "_discovered", False)
    assert "fake_mqar" in tasks.available() and tasks.loader("fake_mqar").__module__ == "tasks.recall.mqar"
    store()
    assert "fake_mqar" in group_choices("task")
    assert composed(["task=fake_mqar"])["task"] == config


def test_an_outside_task_s_record_names_its_package_and_the_run_page_installs_it(outside, cli, tmp_path,
                                                                                  monkeypatch):
    """Issue 46: a task from an installed family gets the provenance a method gets (its load function,
    its distribution and how that was installed), and the reproduce block installs it."""
    site = tmp_path / "site"
    (site / "fakefam").mkdir(parents=True)
    config = {**composed(["task=mqar"])["task"], "name": "fake_mqar"}
    (site / "fakefam" / "__init__.py").write_text(
        f"LOADERS = {{'fake_mqar': 'fakefam.loader:load'}}\nCONFIGS = {{'fake_mqar': {config!r}}}\n")
    (site / "fakefam" / "loader.py").write_text("from tasks.recall.mqar import load  # noqa: F401\n")
    write_distribution(site, "fakefamily", "[attention_suite.tasks]\nfake = fakefam\n", "fakefam")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(tasks, "_discovered", False)
    # the folder stands for site-packages: a distribution there with no direct URL came from an index
    monkeypatch.setattr(env, "installed_copy", lambda folder: folder.is_relative_to(site.resolve()))
    store()
    code, _, err = cli("method=linear", "task=fake_mqar", "budget=smoke")
    assert code == 0, err
    [path] = (tmp_path / "results").rglob("*.json")
    task = record_store.read_record(path)["task"]
    assert task["loader"] == "fakefam.loader:load"
    assert task["distribution"] == {"name": "fakefamily", "version": "1.0", "url": None, "commit": None,
                                    "dirty": None, "source": "index"}
    [run] = load_runs(tmp_path / "results")[0]
    assert install_lines(run)[1:] == ["pip install fakefamily==1.0"]


def test_a_new_release_of_a_method_s_package_is_another_run(outside, tmp_path, monkeypatch):
    """Issue 46: the config hash sees the distribution's version (method.package), not only the
    class's ``version``: after an upgrade a sweep reruns instead of citing the old record. The
    suite's own methods carry no package, so their hashes are as before."""
    from suite.run import with_method_version

    site = tmp_path / "site"
    write_package(site, "fakepkg")
    write_distribution(site, "fakedist", "[attention_suite.methods]\nsigmoid = fakepkg.attn:SigmoidAttention\n",
                       "fakepkg")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(methods, "_discovered", False)
    cls = methods.get("sigmoid_fm")
    store()
    config = composed(["method=sigmoid_fm", "task=mqar"])
    before = with_method_version(config, cls)
    assert before["method"]["package"] == "fakedist==1.0"
    metadata = site / "fakedist-1.0.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 1.0", "Version: 1.1"))
    after = with_method_version(config, cls)
    assert after["method"]["package"] == "fakedist==1.1"
    assert records.config_hash(before, "cpu") != records.config_hash(after, "cpu")
    builtin = composed(["method=linear", "task=mqar"])
    assert "package" not in with_method_version(builtin, methods.get("linear"))["method"]


def test_a_broken_task_entry_point_is_one_error_naming_its_distribution(outside, tmp_path, monkeypatch):
    site = tmp_path / "site"
    write_distribution(site, "brokentasks", "[attention_suite.tasks]\nbad = nopkg_tasks\n", "nopkg_tasks")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(tasks, "_discovered", False)
    with pytest.raises(TaskError, match=r"cannot load the entry point bad = 'nopkg_tasks' of brokentasks \(group "
                                        r"attention_suite.tasks\): ModuleNotFoundError"):
        tasks.available()


@pytest.mark.parametrize("name, package", [("../../outside", "oddfam_path"), ("<script>", "oddfam_markup"),
                                           ("Fake", "oddfam_upper")])
def test_an_outside_task_whose_name_is_not_an_identifier_is_one_error_at_discovery(name, package, outside, tmp_path,
                                                                                  monkeypatch):
    """Issue 47: a task's name becomes a results folder and a site row, so an entry point that declares
    one that is not an identifier is refused when it is discovered, naming the distribution."""
    site = tmp_path / "site"
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(f"LOADERS = {{{name!r}: 'tasks.recall.mqar:load'}}\n")
    write_distribution(site, "oddfamily", f"[attention_suite.tasks]\nodd = {package}\n", package)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(tasks, "_discovered", False)
    with pytest.raises(TaskError) as raised:
        tasks.available()
    assert str(raised.value) == (f"the entry point odd = {package!r} of oddfamily (group attention_suite.tasks) "
                                 f"declares task name(s) {name!r}, which are not names: {tasks.NAME_RULE}")
    assert name not in tasks.LOADERS


def test_a_config_from_hydra_searchpath_is_a_valid_choice(outside, cli, tmp_path):
    folder = tmp_path / "configs"
    (folder / "method").mkdir(parents=True)
    (folder / "method" / "mine.yaml").write_text("name: softmax\nimpl: naive\noptions: {}\n")
    searchpath = f"hydra.searchpath=[file://{folder}]"
    assert check_group_choices(["method=mine", searchpath]) is None
    assert check_group_choices(["method=mine"]).startswith("unknown method 'mine'")
    code, out, err = cli("--cfg", "job", "method=mine", searchpath)  # Hydra's flags first
    assert code == 0, err
    assert OmegaConf.create(out).method == {"name": "softmax", "impl": "naive", "options": {}}


def test_store_spec_refuses_a_second_class_of_the_same_name(outside, tmp_path, monkeypatch):
    store_spec(SPEC)
    other = tmp_path / "other"
    write_package(other, "fakepkg")
    monkeypatch.syspath_prepend(str(other))
    with pytest.raises(MethodError, match="method 'sigmoid_fm' registered twice: sigpkg.attn:SigmoidAttention and "
                                          "fakepkg.attn:SigmoidAttention"):
        store_spec("fakepkg.attn:SigmoidAttention")
