"""A board declared in one file (``suite/boards/<name>.yaml``): its points, the state axis of each
method, its protocol (the learning-rate grid and seeds), its budget and its methods, which default to
every registered method, outside ones included; the recipes it runs under (``recipes``: each of its
multiruns once per recipe; none named: the default recipe, ``recipe=`` left unset) and whether it runs
the methods' default states or only their state axes (``default_states``).

``attention-suite board cpu`` (``python -m suite.board cpu``, or a board file's path) expands the file
into Hydra multiruns of ``python -m suite -m`` and runs them in order: every method at the state
point, then each method's state axis there, then every method at the other points. A pinned board
runs them from the commit named in ``<results>/train/BOARD_COMMIT`` (written by its first run: the
checkout's HEAD, which must be clean) in a git worktree (``.cache/board/<commit>``), so the checkout
may move on while the board runs and every record of the board comes from one code version. A
rerun skips every run that has an ok record: the board resumes where it stopped.

``attention-suite board long --cost`` measures what the board's cells cost (mode=cost: the training
step at the trained length, inference at every tested length): one run per cell, one at a time
(``hydra/launcher=basic`` whatever the board's launcher, since a timing beside another job measures
the contention), pinned apart from the training runs by ``<results>/cost/BOARD_COMMIT``. Run it on
an idle host, after the board.

The file is read here, by the checkout that starts the board; the runs (and the registry that
``methods: all`` reads) are the pinned commit's. The site reads the boards' families from the same
files (``families()``).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from suite import records
from suite.recipe import RECIPES

BOARDS_DIR = Path(__file__).resolve().parent / "boards"
PIN_FILE = Path("train") / records.PIN_FILE  # under the results folder: the commit a pinned board runs at
COST_PIN_FILE = Path("cost") / records.PIN_FILE  # and the commit its cost runs (--cost) run at
REQUIRED = ("points", "budget", "protocol")
OPTIONAL = {"state_point": None, "point_group": "point", "methods": "all", "exclude": [], "first": [],
            "state_axes": {}, "default_states": True, "recipes": [], "pinned": False, "launcher": "basic",
            "overrides": [], "families": {}, "folder": None, "pilots": None, "train_timings": True}
FOLDER_NAME = re.compile(r"[a-z][a-z0-9_]*")  # a board's own folder of records, under the results folder
# A family of tasks (the site's tables): its tasks, its table's title, what its figures call its
# points, and which of the board's own figures it gets (recall: accuracy against pairs, state size
# and test length; none: the cost figure only).
FAMILY_KEYS = ("tasks", "title", "label", "figures")
FIGURES = (None, "recall")
EXIT_USER_ERROR, EXIT_INTERRUPTED = 2, 130


class BoardError(ValueError):
    """A board file or a board command that cannot run: one line naming the value and the choices."""


@dataclass(frozen=True)
class Board:
    name: str
    points: list[str]
    budget: str
    protocol: dict
    state_point: str | None
    point_group: str
    methods: str | list[str]
    exclude: list[str]
    first: list[str]
    state_axes: dict[str, tuple[str, list]]  # method -> (the override key that sets its state, the values)
    default_states: bool  # false: only the state axes run (at the state point)
    recipes: list[str]  # suite/recipe.py's names; empty: the default recipe, not named
    pinned: bool
    launcher: str
    overrides: list[str]
    families: dict[str, dict]
    folder: str | None = None  # its records' own folder under the results folder (its own pin); None: the top
    pilots: dict[str, dict] | None = None  # point -> {passed, note}: each point's pilot, where the board asks one
    train_timings: bool = True  # false: its training runs' speed and memory are no cost figures (--cost gives them)


def names() -> list[str]:
    """The project's boards (suite/boards/*.yaml)."""
    return sorted(p.stem for p in BOARDS_DIR.glob("*.yaml"))


def find(spec: str | Path) -> Path:
    """A board file: a path, or the name of one of the project's boards."""
    path = Path(spec)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise BoardError(f"board file {str(path)!r} does not exist")
        return path
    if str(spec) not in names():
        raise BoardError(f"unknown board {str(spec)!r}; valid boards: {', '.join(names())} (or a board file's path)")
    return BOARDS_DIR / f"{spec}.yaml"


def load(spec: str | Path) -> Board:
    """The board ``spec`` names (a path or a project board's name), its keys checked."""
    path = find(spec)
    where = f"board {path}"
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None) or type(exc).__name__
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise BoardError(f"{where}: not valid YAML{at} ({problem})") from None
    if not isinstance(raw, dict):
        raise BoardError(f"{where}: expected a mapping of keys, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise BoardError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: "
                         f"{', '.join((*REQUIRED, *OPTIONAL))}")
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise BoardError(f"{where}: missing key(s) {', '.join(missing)}")
    values = {**OPTIONAL, **raw}
    points = values["points"]
    if not (isinstance(points, list) and points and all(isinstance(p, str) for p in points)):
        raise BoardError(f"{where}: points={points!r}: expected a list of {values['point_group']} names")
    if values["state_point"] is not None and values["state_point"] not in points:
        raise BoardError(f"{where}: state_point={values['state_point']!r} is not one of its points: "
                         f"{', '.join(points)}")
    protocol = values["protocol"]
    if not (isinstance(protocol, dict) and isinstance(protocol.get("name"), str)):
        raise BoardError(f"{where}: protocol={protocol!r}: expected a mapping with a name (conf/protocol/)")
    methods = values["methods"]
    if methods != "all" and not (isinstance(methods, list) and all(isinstance(m, str) for m in methods)):
        raise BoardError(f"{where}: methods={methods!r}: expected 'all' or a list of method names")
    axes = {}
    for method, axis in (values["state_axes"] or {}).items():
        if not (isinstance(axis, dict) and len(axis) == 1 and isinstance(next(iter(axis.values())), list)):
            raise BoardError(f"{where}: state_axes.{method}={axis!r}: expected one key and its values, "
                             "e.g. {method.options.feature_dim: [4, 8]}")
        ((key, axis_values),) = axis.items()
        axes[method] = (key, axis_values)
    if not values["default_states"] and not (values["state_point"] and axes):
        raise BoardError(f"{where}: default_states=false runs the state axes only, and it has "
                         f"{'no state_axes' if values['state_point'] else 'no state_point'}")
    recipes = values["recipes"]
    if not (isinstance(recipes, list) and all(r in RECIPES for r in recipes)):
        raise BoardError(f"{where}: recipes={recipes!r}: expected a list of recipes from: {', '.join(RECIPES)}")
    families = values["families"] or {}
    for family, said in families.items():
        if not (isinstance(said, dict) and isinstance(said.get("tasks"), list)
                and set(said) <= set(FAMILY_KEYS) and said.get("figures") in FIGURES):
            raise BoardError(f"{where}: families.{family}={said!r}: expected tasks (a list) and optionally "
                             f"title, label and figures ({' or '.join(map(str, FIGURES))})")
    folder = values["folder"]
    if folder is not None and not (isinstance(folder, str) and FOLDER_NAME.fullmatch(folder)):
        raise BoardError(f"{where}: folder={folder!r}: expected a name matching {FOLDER_NAME.pattern} "
                         "(a folder under the results folder)")
    if not isinstance(values["train_timings"], bool) or not (values["train_timings"] or folder):
        raise BoardError(f"{where}: train_timings={values['train_timings']!r}: expected true, or false with a folder "
                         "(the site knows the board's records by their folder)")
    pilots = values["pilots"]
    if pilots is not None:
        if not isinstance(pilots, dict) or any(
                not (isinstance(said, dict) and set(said) == {"passed", "note"} and isinstance(said["passed"], bool)
                     and isinstance(said["note"], str)) for said in pilots.values()):
            raise BoardError(f"{where}: pilots={pilots!r}: expected, per point, {{passed: true|false, note: "
                             "'what the pilot measured'}")
    return Board(path.stem, points, str(values["budget"]), dict(protocol), values["state_point"],
                 values["point_group"], methods, list(values["exclude"]), list(values["first"]), axes,
                 bool(values["default_states"]), list(recipes), bool(values["pinned"]), values["launcher"],
                 list(values["overrides"]), dict(families), folder, None if pilots is None else dict(pilots),
                 values["train_timings"])


def point_problems(board: Board, conf_dir: Path) -> list[str]:
    """Why the board's points cannot run, one line each, found before any run starts: a point the
    config folder lacks (with the valid ones), a length tested at that is not longer than the
    length trained at, and, where the board asks for pilots, a point without one or whose pilot
    failed (with what it measured)."""
    group = Path(conf_dir) / board.point_group
    valid = sorted(p.stem for p in group.glob("*.yaml"))
    found = []
    for point in board.points:
        if point not in valid:
            found.append(f"board {board.name}: unknown {board.point_group} {point!r}; valid: {', '.join(valid)}")
            continue
        task = (yaml.safe_load((group / f"{point}.yaml").read_text()) or {}).get("task") or {}
        trained, tested = task.get("seq_len"), task.get("test_lengths") or []
        short = [n for n in tested if isinstance(trained, int) and isinstance(n, int) and n <= trained]
        if short:
            found.append(f"board {board.name}: {point} is tested at {short}, not longer than the {trained} tokens it "
                         "trains at; an evaluation length must exceed the trained length")
        if board.pilots is None:
            continue
        pilot = board.pilots.get(point)
        if pilot is None:
            found.append(f"board {board.name}: {point} has no pilot; the board runs a point only once its pilot "
                         "passed (pilots: {point: {passed, note}})")
        elif not pilot["passed"]:
            found.append(f"board {board.name}: {point} is refused: its pilot failed: {pilot['note']}")
    return found


def refused_pilots(board: Board) -> list[str]:
    """The points the board declares and does not run, because their pilot failed: one line each, with
    what the pilot measured, so that a board never drops a point without saying why."""
    return [f"board {board.name}: {point} is refused: its pilot failed: {pilot['note']}"
            for point, pilot in (board.pilots or {}).items() if not pilot["passed"] and point not in board.points]


def roster(board: Board, registered: list[str] | tuple[str, ...]) -> list[str]:
    """The methods the board runs, in the order it runs them: its own list, else every registered
    method; less its exclusions; the methods of ``first`` ahead, in that order."""
    chosen = list(registered) if board.methods == "all" else list(board.methods)
    named = [*(() if board.methods == "all" else board.methods), *board.exclude, *board.state_axes]
    unknown = [m for m in dict.fromkeys(named) if m not in registered]
    if unknown:
        raise BoardError(f"board {board.name}: unknown method(s) {', '.join(unknown)}; registered methods: "
                         f"{', '.join(registered)}")
    chosen = [m for m in chosen if m not in board.exclude]
    rank = {m: i for i, m in enumerate(board.first)}
    return sorted(chosen, key=lambda m: rank.get(m, len(rank)))  # stable: the others keep their order


def hydra_value(value: Any) -> str:
    """``value`` as an override's right-hand side: 0.001, [0.001,0.003], a name."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(map(hydra_value, value)) + "]"
    return repr(value) if isinstance(value, float) else str(value)


def common_overrides(board: Board) -> list[str]:
    """What every multirun of the board is given: its launcher, budget, protocol and own overrides."""
    protocol = dict(board.protocol)
    name, seeds = protocol.pop("name"), protocol.get("seeds")
    found = [f"hydra/launcher={board.launcher}", f"budget={board.budget}", f"protocol={name}"]
    if name == "single":  # one run per seed, swept by Hydra; a sweep protocol runs its seeds itself
        protocol.pop("seeds", None)
        if seeds:
            found.append("seed=" + ",".join(map(str, seeds)))
    found += [f"protocol.{key}={hydra_value(value)}" for key, value in protocol.items()]
    return found + board.overrides


def stages(board: Board, registered: list[str] | tuple[str, ...]) -> list[list[str]]:
    """The board as Hydra multiruns, each its overrides: every method at the state point (the board's
    main finding, complete first); each method's state axis there, one multirun per (key, values)
    shared by methods; then every method at each other point, one multirun per point. A board
    without a state point runs its points in order, one multirun each. Without ``default_states``,
    the state axes only. Under each of ``recipes`` in turn, when it names any."""
    methods = roster(board, registered)
    common, group = common_overrides(board), board.point_group
    # One multirun per point: a sweep over several points leaves the pre-check of a pinned commit's
    # own suite (4370902) composing the budget's default model, which a point replaces.
    first = [board.state_point] if board.state_point else board.points
    runs = [[*common, f"{group}={point}", f"method={','.join(methods)}"] for point in first if board.default_states]
    if board.state_point:
        axes: dict[tuple[str, str], list[str]] = {}
        for method in (m for m in methods if m in board.state_axes):
            key, values = board.state_axes[method]
            axes.setdefault((key, ",".join(map(hydra_value, values))), []).append(method)
        for (key, values), together in axes.items():
            runs.append([*common, f"{group}={board.state_point}", f"method={','.join(together)}", f"{key}={values}"])
        for point in (p for p in board.points if p != board.state_point and board.default_states):
            runs.append([*common, f"{group}={point}", f"method={','.join(methods)}"])
    return [[*stage, f"recipe={name}"] for name in board.recipes for stage in runs] if board.recipes else runs


def cost_stages(board: Board, registered: list[str] | tuple[str, ...]) -> list[list[str]]:
    """The board's multiruns as mode=cost runs (--cost): one run per cell, so per configuration the
    protocol's learning rates and seeds (which change no cost) are dropped, and one job at a time."""
    swept = ("hydra/launcher=", "protocol=", "protocol.", "seed=")
    return [["hydra/launcher=basic", *(o for o in stage if not o.startswith(swept)), "mode=cost"]
            for stage in stages(board, registered)]


def jobs(multirun: list[str]) -> list[list[str]]:
    """The jobs of a multirun, each its overrides, as Hydra's basic sweeper expands them (every
    combination of the swept values); the launcher and where records go, which change no job's
    config, left out."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(
        [o for o in multirun if not o.startswith(("hydra/launcher=", "results_dir="))])
    axes = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
            else [o.input_line] for o in parsed]
    return [list(job) for job in itertools.product(*axes)]


def with_extra(stage: list[str], extra: list[str]) -> list[str]:
    """A stage's overrides with the command line's own: one for a key the board sets replaces the board's."""
    def key(override: str) -> str:
        return override.split("=", 1)[0].lstrip("+~")

    given = {key(o) for o in extra}
    return [o for o in stage if key(o) not in given] + extra


def families() -> dict[str, dict]:
    """The task families of the project's boards (the site's tables): name -> {tasks, title, label, figures}."""
    found: dict[str, dict] = {}
    for name in names():
        found.update(load(name).families)
    return found


def smaller_states() -> dict[str, dict[str, set]]:
    """Per method, the size or option (its last key: ``d_model``, ``feature_dim``) and the values the
    project's boards run as its smaller states: a run at one of them is a variant of the method,
    never its usual configuration, however many of its runs the state axis holds."""
    found: dict[str, dict[str, set]] = {}
    for name in names():
        for method, (key, values) in load(name).state_axes.items():
            found.setdefault(method, {}).setdefault(key.rsplit(".", 1)[-1], set()).update(map(repr, values))
    return found


@functools.cache  # read per run by the site
def untimed_folders() -> frozenset[str]:
    """The folders (under the results folder) of the boards whose training runs' speed and memory
    are no cost figures (``train_timings: false``): their cost comes from their --cost records."""
    return frozenset(b.folder for b in map(load, names()) if not b.train_timings and b.folder)


@functools.cache  # read per board run by the site
def protocol_seeds() -> dict[str, tuple]:
    """Per budget a project's board runs, the seeds of its protocol: a board cell holds these and no others."""
    return {board.budget: tuple(board.protocol.get("seeds") or ()) for board in map(load, names())}


# -- running a board ------------------------------------------------------------------------------

def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def pinned_commit(repo: Path, pin: Path, requested: str | None) -> str:
    """The commit the board runs at: the pin's, else ``requested``, else the clean checkout's HEAD."""
    try:
        pinned = records.read_pin(pin) if pin.exists() or pin.is_symlink() else ""
    except records.RefusedFile as exc:
        raise BoardError(f"{exc}; remove it (and the board's records) or write the board's commit in it") from None
    if requested:
        try:
            commit = git(repo, "rev-parse", "--verify", f"{requested}^{{commit}}")
        except subprocess.CalledProcessError as exc:
            raise BoardError(f"--commit {requested!r} names no commit of {repo}") from exc
        if pinned and pinned != commit:
            raise BoardError(f"{pin.parent} holds a board from commit {pinned}; remove its records (and {pin}) "
                             f"to start one at {commit}")
        return commit
    if pinned:
        return pinned
    if git(repo, "status", "--porcelain", "--untracked-files=no"):
        raise BoardError("the checkout has uncommitted changes; a board's records come from a clean commit: "
                         "commit first")
    return git(repo, "rev-parse", "HEAD")


def registered_in(tree: Path) -> list[str]:
    """The methods registered in the code at ``tree`` (the pinned commit's, or the checkout's)."""
    code = "import methods; print('\\n'.join(methods.available()))"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True, capture_output=True, text=True)
    return out.stdout.split()


def run_stage(command: list[str], cwd: Path | None, env: dict) -> int:
    """Run one multirun and return its exit code. On Ctrl-C, which reaches the multirun too (one
    process group), wait for it to record its runs as interrupted and keep their checkpoints (a second
    Ctrl-C kills it) and return EXIT_INTERRUPTED: no traceback, nothing lost."""
    with subprocess.Popen(command, cwd=cwd, env=env) as child:
        try:
            return child.wait()
        except KeyboardInterrupt:
            while True:
                try:
                    child.wait()
                    return EXIT_INTERRUPTED
                except KeyboardInterrupt:
                    child.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attention-suite board", description=__doc__.split("\n\n")[1])
    parser.add_argument("board", help=f"a board file's path, or one of the project's boards: {', '.join(names())}")
    parser.add_argument("overrides", nargs="*", help="overrides for every multirun (one for a key the board sets "
                        "replaces the board's), e.g. hydra.launcher.n_jobs=1")
    parser.add_argument("--results", type=Path, default=None,
                        help="records go here (default: results/ of the checkout, or of this folder)")
    parser.add_argument("--commit", default=os.environ.get("BOARD_COMMIT"),
                        help="start a pinned board at this commit (default: the pin's, else HEAD)")
    parser.add_argument("--cost", action="store_true",
                        help="measure each cell's cost (mode=cost, one run at a time) instead of training; on an "
                             "idle host, after the board")
    parser.add_argument("--dry-run", action="store_true", help="print the multiruns, run nothing")
    args = parser.parse_intermixed_args(argv)
    tree, env = None, dict(os.environ)  # an unpinned board runs the suite this Python imports, here
    try:
        board = load(args.board)
        if board.pinned and not args.dry_run:
            try:
                repo = Path(git(Path.cwd(), "rev-parse", "--show-toplevel"))
            except (subprocess.CalledProcessError, FileNotFoundError) as exc:
                raise BoardError(f"board {board.name} is pinned to a commit: run it in a git checkout of the "
                                 "suite") from exc
            results = (args.results or repo / "results").resolve() / (board.folder or "")
            pin = results / (COST_PIN_FILE if args.cost else PIN_FILE)
            commit = pinned_commit(repo, pin, args.commit)
            pin.parent.mkdir(parents=True, exist_ok=True)
            pin.write_text(commit + "\n")
            tree = repo / ".cache" / "board" / commit
            if not tree.is_dir():
                git(repo, "worktree", "add", "--detach", str(tree), commit)
            env["PYTHONPATH"] = str(tree)
            refused = point_problems(board, tree / "suite" / "conf")
            if refused:
                raise BoardError("; ".join(refused))
            registered = registered_in(tree)
            print(f"board {board.name}: the board's code is commit {commit} (worktree {tree}); records go to "
                  f"{results}", file=sys.stderr)
        else:
            import methods

            results = (args.results or Path("results")).resolve() / (board.folder or "")
            refused = point_problems(board, Path(__file__).resolve().parent / "conf")
            if refused and board.point_group == "point":  # a board over tasks (point_group: task) has no point files
                raise BoardError("; ".join(refused))
            registered = list(methods.available())
        expand = cost_stages if args.cost else stages
        runs = [with_extra([*stage, f"results_dir={results}"], args.overrides) for stage in expand(board, registered)]
    except BoardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    for line in refused_pilots(board):
        print(line, file=sys.stderr)
    worst = 0
    for i, stage in enumerate(runs, 1):
        print(f"board {board.name}: multirun {i}/{len(runs)}: python -m suite -m {' '.join(stage)}", file=sys.stderr,
              flush=True)
        if args.dry_run:
            continue
        code = run_stage([sys.executable, "-m", "suite", "-m", *stage], tree, env)
        if code == EXIT_INTERRUPTED:
            print(f"board {board.name}: stopped at multirun {i}/{len(runs)}; the same command resumes it (ok records "
                  "are skipped, an interrupted run goes on from its last checkpoint)", file=sys.stderr)
        if code in (EXIT_USER_ERROR, EXIT_INTERRUPTED):  # a mistake in the command, or stopped: so would the rest be
            return code
        worst = max(worst, code)  # a failed cell is said in its sweep's report; the board goes on
    return worst


if __name__ == "__main__":
    sys.exit(main())
