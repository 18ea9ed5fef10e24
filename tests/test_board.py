"""A board declared in one file (suite/boards/): what it expands to, that its cells are the configs of
the board it replaced (so a board in progress resumes: the same config hashes, the same runs
skipped), the methods it picks up, and the command's refusals."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

import methods
from suite import board, record_store, records
from suite.protocol import with_lr_and_seed
from suite.recipe import SUITE
from suite.run import with_method_version

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "suite" / "conf"
PIN = REPO / "results" / board.PIN_FILE
# The presets the CPU board file replaced, as scripts/board_cpu.sh ran them: each a multirun.
OLD_CPU_PRESETS = ("experiment=leaderboard_cpu", "experiment=recall_state_cpu")


def compose(conf: Path, overrides: list[str], hydra: bool = False) -> dict:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = hydra_compose("config", overrides=["data_dir=/nowhere", *overrides], return_hydra_config=hydra)
    if hydra:
        params = cfg.hydra.sweeper.params
        return OmegaConf.to_container(params, resolve=False) if params else {}
    return OmegaConf.to_container(cfg, resolve=True)


def preset_jobs(conf: Path, preset: str) -> list[list[str]]:
    """The jobs of an experiment preset's own sweep (hydra.sweeper.params)."""
    swept = compose(conf, [preset], hydra=True)
    return [[preset, *job] for job in board.jobs([f"{k}={v}" for k, v in swept.items()])]


def without_nulls(value):
    """``value`` without its null keys, at any depth: a key added to conf/ since the presets, at null
    ("off"), computes what its absence did, and is never hashed (suite/records.py)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return value


def canonical(config: dict) -> str:
    # The presets predate recipes: they ran the suite's, whose block the config hash reads as none.
    return json.dumps(without_nulls({k: v for k, v in config.items()
                                     if k != "data_dir" and not (k == "recipe" and v == SUITE)}), sort_keys=True)


@cache
def pinned_conf(tmp: Path) -> Path | None:
    """suite/conf as the CPU board's pinned commit has it (its presets, before the board file), or
    None where this clone lacks that commit (a shallow clone: fetch-depth 0 has it)."""
    commit = PIN.read_text().strip()
    found = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    if found.returncode != 0:
        return None
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "suite/conf"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    return tmp / "suite" / "conf"


@cache
def cpu_board_cells(conf: Path) -> list[dict]:
    """Every cell of the CPU board file, composed by ``conf`` (every method the suite registers)."""
    runs = board.stages(board.load("cpu"), methods.available())
    return [compose(conf, job) for multirun in runs for job in board.jobs(multirun)]


# -- the CPU board is the board it replaced ---------------------------------------------------------------

@pytest.mark.slow  # 12-19 s: .ci/run runs it
def test_the_cpu_board_file_composes_the_cells_of_the_presets_it_replaced(tmp_path_factory):
    """Every cell of the CPU board file composes the config (so the config hash and the cell key) that
    the pinned board's presets composed: a board in progress goes on from its records, rerunning none.
    Checked under the pinned commit's configs, which the board's runs compose, and today's."""
    old_conf = pinned_conf(tmp_path_factory.mktemp("pinned"))
    if old_conf is None:
        pytest.skip(f"this clone lacks the board's pinned commit {PIN.read_text().strip()} (a shallow clone)")
    old = [compose(old_conf, job) for preset in OLD_CPU_PRESETS for job in preset_jobs(old_conf, preset)]
    old_cells = {canonical(c) for c in old}
    assert len(old_cells) == 7 * 4 + 15  # every method at four points; 15 smaller states
    for conf in (old_conf, CONF):
        new = copy.deepcopy(cpu_board_cells(conf))
        assert len(new) == len({canonical(c) for c in new}), "a cell runs once"
        assert {canonical(c) for c in new} == old_cells
        assert ({records.config_hash(c, "cpu") for c in new} == {records.config_hash(c, "cpu") for c in old})
        assert {records.cell_key(c) for c in new} == {records.cell_key(c) for c in old}


@pytest.mark.slow  # 10-19 s (every cell composed): .ci/run runs it
def test_every_record_of_the_pinned_board_is_a_cell_of_the_board_file():
    """Each committed record of the CPU board is one of the file's cells at its rate and seed: the
    board command finds it by its config hash and skips it. (Needs no history: the records carry
    their configs.)"""
    pinned = PIN.read_text().strip()
    versioned = [with_method_version(copy.deepcopy(c), methods.get(c["method"]["name"]))
                 for c in cpu_board_cells(CONF)]
    cells = {records.cell_key(c): c for c in versioned}  # as suite.run hashes them: with the method's version
    checked = 0
    for path, record in record_store.iter_records(REPO / "results" / "train"):
        if record["env"].get("git_commit") != pinned:
            continue
        config = record["config"]
        cell = cells.get(records.cell_key(config))
        assert cell is not None, f"{path}: not a cell of suite/boards/cpu.yaml"
        ran = with_lr_and_seed(cell, config["budget"]["lr"], config["seed"])
        assert records.config_hash(ran, record["env"].get("device", "cpu")) == records.record_config_hash(record), path
        checked += 1
    assert checked >= 80


def test_the_long_boards_cost_runs_measure_its_cells_one_at_a_time():
    """--cost runs each cell of the board once (no rates, no seeds), one job at a time, in mode=cost,
    and each composes the configuration of the board's own records (the site joins them by
    records.measured_key)."""
    spec = board.load("long")
    runs = board.cost_stages(spec, methods.available())
    assert len(runs) == len(board.stages(spec, methods.available()))
    assert all(run[0] == "hydra/launcher=basic" and run[-1] == "mode=cost" for run in runs)
    assert not [o for run in runs for o in run if o.startswith(("protocol", "seed=", "hydra/launcher=joblib"))]
    costed = {records.measured_key(with_method_version(c, methods.get(c["method"]["name"])))
              for c in (compose(CONF, job) for run in runs for job in board.jobs(run))}
    assert len(costed) == len(methods.available()) * len(spec.points)
    trained = {records.measured_key(r["config"]) for _, r in record_store.iter_records(REPO / "results" / "long")
               if r["kind"] == "train"}
    assert trained and trained <= costed  # every cell the board has trained so far has its cost run


class Child:
    """A multirun that a Ctrl-C reaches ``interrupts`` times while the board waits for it."""

    def __init__(self, interrupts: int):
        self.interrupts, self.waits, self.killed = interrupts, 0, False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def wait(self):
        self.waits += 1
        if self.waits <= self.interrupts:
            raise KeyboardInterrupt
        return -9 if self.killed else 130

    def kill(self):
        self.killed = True


@pytest.mark.parametrize("interrupts", [1, 2])
def test_ctrl_c_lets_the_multirun_record_itself_and_ends_the_board_without_a_traceback(monkeypatch, interrupts):
    child = Child(interrupts)
    monkeypatch.setattr(board.subprocess, "Popen", lambda *args, **kwargs: child)
    assert board.run_stage(["x"], None, {}) == board.EXIT_INTERRUPTED
    assert child.waits == interrupts + 1  # waited for the multirun to write its interrupted records
    assert child.killed == (interrupts > 1)  # a second Ctrl-C kills it


# -- what a board file expands to --------------------------------------------------------------------------

def write_board(tmp_path: Path, **keys) -> Path:
    base = {"points": ["p1", "p2"], "state_point": "p1", "budget": "cpu",
            "protocol": {"name": "lr_sweep", "lrs": [1.0e-3, 3.0e-3], "seeds": [0, 1], "bracket": 0}}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({**base, **keys}))
    return path


def test_a_board_runs_every_registered_method_by_default_an_outside_one_too(tmp_path):
    spec = board.load(write_board(tmp_path, first=["b"], state_axes={"a": {"method.options.k": [1, 2]}}))
    runs = board.stages(spec, ("a", "b", "outside"))
    assert runs[0][-2:] == ["point=p1", "method=b,a,outside"]  # `first` ahead, then the registry's order
    assert runs[1][-3:] == ["point=p1", "method=a", "method.options.k=1,2"]  # a state axis at the state point
    assert runs[2][-2:] == ["point=p2", "method=b,a,outside"]  # then the other points
    assert len(runs) == 3  # a method without a state axis runs at its default state only
    assert "protocol.lrs=[0.001,0.003]" in runs[0] and "protocol.seeds=[0,1]" in runs[0]


def test_a_board_may_list_or_exclude_methods(tmp_path):
    listed = board.load(write_board(tmp_path, methods=["b", "a"]))
    assert board.stages(listed, ("a", "b", "c"))[0][-1] == "method=b,a"
    excluded = board.load(write_board(tmp_path, exclude=["b"]))
    assert board.stages(excluded, ("a", "b", "c"))[0][-1] == "method=a,c"


def test_a_board_runs_each_of_its_recipes_and_may_leave_the_default_states_out(tmp_path):
    axes = {"a": {"method.options.k": [1, 2]}}
    spec = board.load(write_board(tmp_path, state_axes=axes, recipes=["suite", "zoology"]))
    runs = board.stages(spec, ("a", "b"))
    assert [run[-1] for run in runs] == ["recipe=suite"] * 3 + ["recipe=zoology"] * 3  # the board, once per recipe
    assert [run[:-1] for run in runs[:3]] == [run[:-1] for run in runs[3:]] == board.stages(
        board.load(write_board(tmp_path, state_axes=axes)), ("a", "b"))  # no recipe named: none set
    axes_only = board.stages(board.load(write_board(tmp_path, state_axes=axes, default_states=False)), ("a", "b"))
    assert axes_only == [runs[1][:-1]]  # the state axis at the state point, nothing else


def test_the_recipe_board_runs_the_cpu_boards_state_axes_under_zoologys_recipe():
    cpu, recipe = (board.load(name) for name in ("cpu", "recipe"))
    assert recipe.state_axes == cpu.state_axes and recipe.protocol == cpu.protocol and recipe.budget == cpu.budget
    runs = board.stages(recipe, methods.available())
    assert all(run[-1] == "recipe=zoology" and f"point={cpu.state_point}" in run for run in runs)
    cells = {tuple(job) for run in runs for job in board.jobs(run)}
    assert len(cells) == sum(len(values) for _, values in cpu.state_axes.values())  # every smaller state, once
    # each is the CPU board's cell of the same state with the recipe set, nothing else
    axis_keys = {key for key, _ in cpu.state_axes.values()}
    cpu_axes = [run for run in board.stages(cpu, methods.available()) if any(o.split("=")[0] in axis_keys for o in run)]
    assert {cell[:-1] for cell in cells} == {tuple(job) for run in cpu_axes for job in board.jobs(run)}


def test_a_single_protocol_board_sweeps_its_seeds():
    stages = board.stages(board.load("gpu"), methods.available())
    assert all("protocol=single" in stage and "seed=0,1,2" in stage for stage in stages)
    assert [stage[-2] for stage in stages] == [f"experiment={p}" for p in (
        "lra_listops", "lra_text", "lra_retrieval", "lra_image", "lra_pathfinder", "lra_pathx")]  # one per point


@pytest.mark.slow  # 10-16 s: .ci/run runs it
def test_the_gpu_board_file_composes_the_jobs_of_the_preset_it_replaced(tmp_path_factory):
    old_conf = pinned_conf(tmp_path_factory.mktemp("pinned"))
    if old_conf is None:
        pytest.skip(f"this clone lacks the board's pinned commit {PIN.read_text().strip()} (a shallow clone)")
    # Each job of the preset's sweep composed its LRA preset in place of leaderboard_gpu. The seeds
    # change the seed alone: they are compared as the sweeps' values, the jobs at seed 0.
    old_jobs = [job[1:] for job in preset_jobs(old_conf, "experiment=leaderboard_gpu")]
    new_jobs = [job for multirun in board.stages(board.load("gpu"), methods.available())
                for job in board.jobs(multirun)]
    for found in (old_jobs, new_jobs):
        assert sorted(o for job in found for o in job if o.startswith("seed=")) == sorted(
            f"seed={s}" for s in (0, 1, 2) for _ in range(len(found) // 3))
    old = {canonical(compose(old_conf, job)) for job in old_jobs if "seed=0" in job}
    assert len(old) == 7 * 6
    assert {canonical(compose(CONF, job)) for job in new_jobs if "seed=0" in job} == old


def test_a_command_line_override_replaces_the_boards_own():
    stage = ["budget=cpu", "seed=0,1,2", "cpu_threads=1"]
    assert board.with_extra(stage, ["seed=0", "hydra.launcher.n_jobs=1"]) == [
        "budget=cpu", "cpu_threads=1", "seed=0", "hydra.launcher.n_jobs=1"]


@pytest.mark.parametrize(("keys", "said"), [
    ({"colour": "red"}, "unknown key(s) colour; valid keys: points, budget, protocol"),
    ({"state_point": "p9"}, "state_point='p9' is not one of its points: p1, p2"),
    ({"state_axes": {"a": {"x": 1}}}, "state_axes.a={'x': 1}: expected one key and its values"),
    ({"recipes": ["zoo"]}, "recipes=['zoo']: expected a list of recipes from: suite, zoology"),
    ({"default_states": False}, "default_states=false runs the state axes only, and it has no state_axes"),
])
def test_a_bad_board_file_is_refused_in_one_line(tmp_path, keys, said):
    with pytest.raises(board.BoardError, match=None) as caught:
        board.load(write_board(tmp_path, **keys))
    assert said in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(("keys", "said"), [
    ({"folder": "../up"}, "folder='../up': expected a name matching"),
    ({"pilots": {"p1": {"passed": "yes"}}}, "pilots={'p1': {'passed': 'yes'}}: expected, per point"),
    ({"train_timings": False}, "train_timings=False: expected true, or false with a folder"),
    ({"train_timings": "no", "folder": "long"}, "train_timings='no': expected true, or false with a folder"),
])
def test_a_bad_folder_or_pilot_is_refused_in_one_line(tmp_path, keys, said):
    with pytest.raises(board.BoardError) as caught:
        board.load(write_board(tmp_path, **keys))
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_a_point_that_cannot_run_is_refused_before_any_run(tmp_path):
    """An unknown point, a length tested at that is not longer than the trained one, a point without
    a pilot where the board asks for them, and one whose pilot failed: each one line, with the reason."""
    conf = tmp_path / "conf"
    (conf / "point").mkdir(parents=True)
    (conf / "point" / "p1.yaml").write_text(yaml.safe_dump({"task": {"seq_len": 256, "test_lengths": [128, 512]}}))
    (conf / "point" / "p2.yaml").write_text(yaml.safe_dump({"task": {"seq_len": 1024}}))
    spec = board.load(write_board(tmp_path, points=["p1", "p2", "p9"]))
    assert board.point_problems(spec, conf) == [
        "board mine: p1 is tested at [128], not longer than the 256 tokens it trains at; an evaluation length "
        "must exceed the trained length",
        "board mine: unknown point 'p9'; valid: p1, p2"]
    piloted = board.load(write_board(tmp_path, points=["p2"], state_point=None,
                                     pilots={"p2": {"passed": False, "note": "softmax 60% at 3,000 steps"}}))
    assert board.point_problems(piloted, conf) == [
        "board mine: p2 is refused: its pilot failed: softmax 60% at 3,000 steps"]
    unpiloted = board.load(write_board(tmp_path, points=["p1", "p2"], state_point=None,
                                       pilots={"p2": {"passed": True, "note": "ok"}}))
    assert board.point_problems(unpiloted, conf)[-1].startswith("board mine: p1 has no pilot")


def test_the_project_boards_points_all_exist_and_the_long_boards_own_folder_holds_its_records():
    conf = REPO / "suite" / "conf"
    for name in board.names():
        spec = board.load(name)
        assert not [p for p in board.point_problems(spec, conf) if "unknown" in p or "not longer" in p], name
    long = board.load("long")
    assert long.folder == "long" and all(long.pilots[p]["passed"] for p in long.points)
    assert board.refused_pilots(long) == [f"board long: {p} is refused: its pilot failed: {said['note']}"
                                          for p, said in long.pilots.items() if not said["passed"]]
    assert [stage[-2] for stage in board.stages(long, methods.available())] == [f"point={p}" for p in long.points]


def test_a_method_the_registry_lacks_is_refused_naming_the_registered_ones(tmp_path):
    spec = board.load(write_board(tmp_path, exclude=["nope"]))
    with pytest.raises(board.BoardError, match="unknown method.s. nope; registered methods: a, b"):
        board.stages(spec, ("a", "b"))


@pytest.mark.slow
def test_the_board_command_refuses_an_unknown_board_and_prints_a_dry_run():
    def command(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "suite", "board", *args], cwd=REPO, capture_output=True,
                              text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})

    unknown = command("cpux")
    assert unknown.returncode == 2 and "unknown board 'cpux'; valid boards: cpu, gpu, long, recipe" in unknown.stderr
    dry = command("cpu", "--dry-run", "hydra.launcher.n_jobs=1")
    assert dry.returncode == 0, dry.stderr
    lines = [line for line in dry.stderr.splitlines() if "multirun" in line]
    assert len(lines) == 9 and all(line.endswith("hydra.launcher.n_jobs=1") for line in lines)  # 1 + 5 axes + 3 points
    assert "point=cpu_mqar_64x16 method=softmax,linear,sliding_window,loglinear,hedgehog,taylor,favor" in lines[0]
    # one multirun per other point: a pinned commit's pre-check refuses a sweep over several points
    assert [line.split(" point=")[1].split()[0] for line in lines[6:]] == ["cpu_mqar_64x4", "cpu_mqar_64x8",
                                                                          "cpu_listops_short"]
    long = command("long", "--dry-run")  # a point off the list for a failed pilot is named, with the reason
    assert long.returncode == 0, long.stderr
    assert "board long: cpu_genomics_1024 is refused: its pilot failed: softmax stays at the 50%" in long.stderr


@pytest.mark.slow  # 12-19 s: .ci/run runs it
def test_a_board_file_runs_its_multiruns_and_resumes(tmp_path, data_dir):
    """A small unpinned board end to end: its multiruns run (the state axis too), and a rerun skips
    every run that has an ok record."""
    path = write_board(tmp_path, points=["mqar"], state_point="mqar", point_group="task", budget="smoke",
                       protocol={"name": "single", "seeds": [0]}, methods=["softmax", "sliding_window"],
                       state_axes={"sliding_window": {"method.options.window": [8]}})
    results = tmp_path / "results"
    env = {**os.environ, "SUITE_DATA_DIR": str(data_dir), "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}

    def command() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "suite", "board", str(path), "--results", str(results)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    first = command()
    assert first.returncode == 0, first.stderr[-2000:]
    ran = [(r["method"]["name"], r["config"]["method"]["options"].get("window"))
           for _, r in record_store.iter_records(results)]
    assert sorted(ran, key=str) == sorted([("softmax", None), ("sliding_window", 64), ("sliding_window", 8)], key=str)
    again = command()
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("skipped: an ok record of this run already exists") == 3
    assert len(list(results.rglob("*.json"))) == 3


# -- the site reads the board files' families ----------------------------------------------------------

def test_only_the_long_boards_training_runs_time_nothing():
    assert board.untimed_folders() == {"long"}  # long.yaml: train_timings false; its cost is --cost's
    assert board.load("long").train_timings is False and board.load("cpu").train_timings is True


def test_the_sites_families_and_recall_figures_are_the_board_files():
    from suite.site import board as site_board
    from suite.site import figures

    declared = {name: f for spec in board.names() for name, f in board.load(spec).families.items()}
    assert {f.name: (list(f.tasks), f.title) for f in site_board.FAMILIES} == {
        name: (f["tasks"], f["title"]) for name, f in declared.items()}
    assert [f.tasks for f in figures.RECALL_FAMILIES] == [("mqar",)]  # cpu.yaml: recall, figures: recall


def test_a_family_a_board_file_declares_gets_the_recall_figures_under_its_label(tmp_path, monkeypatch):
    from suite.site import board as site_board
    from suite.site import figures
    from suite.site.runs import load_runs
    from tests.test_site_board import mqar_board

    for r in mqar_board(["softmax", "linear"]):
        renamed = {**r, "task": {**r["task"], "name": "recall_x"},
                   "config": {**r["config"], "task": {**r["config"]["task"], "name": "recall_x"}}}
        renamed["config_hash"] = records.record_config_hash(renamed)  # as a run of that task writes it
        record_store.write_record(renamed, tmp_path)
    rows = site_board.board_rows(load_runs(tmp_path)[0])
    columns = site_board.board_columns(rows)
    assert not any("vs key-value pairs" in f.title for f in figures.board_figures(rows, columns))  # no board's
    family = site_board.Family("associative", ("recall_x",), "Associative recall", "RX", "recall")
    monkeypatch.setattr(site_board, "FAMILIES", (family,))
    monkeypatch.setattr(figures, "RECALL_FAMILIES", (family,))
    titles = [f.title for f in figures.board_figures(rows, columns)]
    assert any(t.startswith("RX: test acc vs key-value pairs") for t in titles), titles
    assert {site_board.family_of(c) for c in columns} == {"associative"}


def test_a_pinned_board_runs_at_its_pin_else_a_clean_head(tmp_path):
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git("rev-parse", "HEAD")
    pin = tmp_path / "results" / board.PIN_FILE
    assert board.pinned_commit(tmp_path, pin, None) == head  # no pin yet: the clean checkout's HEAD
    (tmp_path / "f").write_text("2")
    with pytest.raises(board.BoardError, match="uncommitted changes"):
        board.pinned_commit(tmp_path, pin, None)
    pin.parent.mkdir(parents=True)
    pin.write_text("0" * 40 + "\n")
    assert board.pinned_commit(tmp_path, pin, None) == "0" * 40  # the pin, whatever the checkout holds
    with pytest.raises(board.BoardError, match=f"holds a board from commit {'0' * 40}; remove its records"):
        board.pinned_commit(tmp_path, pin, head)
    with pytest.raises(board.BoardError, match="--commit 'nope' names no commit"):
        board.pinned_commit(tmp_path, pin, "nope")


def test_a_record_is_pinned_by_the_nearest_board_commit_above_it(tmp_path):
    """The site reads a board's pin from its own folder: the long board's records (results/long/train/)
    are not the CPU board's (results/train/BOARD_COMMIT), and a record under no pin has none."""
    from suite.site.runs import board_pin

    results = tmp_path / "results"
    for folder in (results / "train", results / "long" / "train"):
        (folder / "mqar" / "softmax").mkdir(parents=True)
        (folder / board.PIN_FILE.name).write_text("0" * 40 + "\n")
    assert board_pin(results / "long" / "train" / "mqar" / "softmax" / "r.json", results) == (
        results / "long" / "train" / "BOARD_COMMIT")
    assert board_pin(results / "train" / "mqar" / "softmax" / "r.json", results) == results / "train" / "BOARD_COMMIT"
    assert board_pin(results / "kernel" / "mqar" / "softmax" / "r.json", results) is None
