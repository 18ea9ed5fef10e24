"""``python -m suite method=<name> task=<name> [budget=...] [mode=...] [key=value ...]``; ``--help``;
``python -m suite validate [--submission] PATH...`` checks records instead (suite/validate.py);
``python -m suite board cpu`` runs a board file's multiruns (suite/board.py);
``python -m suite check-method SPEC [--options JSON]`` runs the method contract on a method
(suite/check_method.py).

Config groups live in conf/ (see conf/config.yaml), but for the method group, made from the method
classes (suite/groups.py); ``method=my_pkg.attn:MyAttention`` names a class by its import path, and
``hydra.searchpath=[file://...]`` adds folders of configs. Hydra parses the command line and composes
the config, once; its own flags (``--cfg job``, ``--info``, ``-sc install=bash``, ``-m``) are its own.
Group choices are looked up in Hydra's config repository before anything runs (a sweep's too, and
the optional groups Hydra would skip in silence); a mistake Hydra meets while composing (a
misspelled key) is said in one line with the key meant; then the schema (suite.config) checks the
values before any work. Exit codes: 0 ok or skipped, 1 the run failed (error, diverged, oom), 2 a
user mistake, 130 interrupted (Ctrl-C or SIGTERM; a sweep stops too).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent / "conf"  # package data; conf/ at the root links here
CONFIG_NAME = "config"
# Groups the config picks by itself (tuning: <task>_<budget>): not advertised in --help, still checked.
INTERNAL_GROUPS = ("tuning",)
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # the shell's code for a process ended by Ctrl-C


@cache
def config_loader(searchpath: tuple[str, ...] = ()):
    """Hydra's loader over conf/, the installed plugins' configs (e.g. hydra/launcher=joblib), the
    groups made from code (suite.groups: ConfigStore) and the folders a command adds with
    ``hydra.searchpath=[...]``, placed where Hydra's own loader places them (before ConfigStore's)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path

    search_path = create_config_search_path(str(CONF_DIR))
    for path in searchpath:
        search_path.prepend("hydra.searchpath in command-line", path, anchor="schema")
    return ConfigLoaderImpl(config_search_path=search_path)


def group_choices(group: str, searchpath: tuple[str, ...] = ()) -> list[str]:
    """The options of a config group, as Hydra finds them."""
    return sorted(config_loader(searchpath).get_group_options(group))


def parsed_overrides(argv: list[str]) -> list:
    """The overrides of a command line, as Hydra's own parsers read them ([] for shell completion,
    whose words are completion commands such as ``install=bash``, not config)."""
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = get_args_parser().parse_args(argv)
    return [] if args.shell_completion else OverridesParser.create().parse_overrides(args.overrides)


def choices_of(override, escaped: bool = False) -> list[str]:
    """The choices an override names: one, or each of a sweep's (``a,b``); none for a glob or range.
    ``escaped``: a sweep's as Hydra's grammar writes them in an override (``my_pkg.attn\\:MyAttention``)."""
    from hydra.core.override_parser.types import ChoiceSweep

    value = override.value()
    if isinstance(value, str):
        return [value]
    if isinstance(value, ChoiceSweep):
        texts = list(override.sweep_string_iterator())
        return texts if escaped else [v if isinstance(v, str) else text for v, text in zip(value.list, texts)]
    return []


def is_group(name: str, searchpath: tuple[str, ...] = ()) -> bool:
    return config_loader(searchpath).repository.group_exists(name)


def searchpath_of(overrides: list) -> tuple[str, ...]:
    """The folders ``hydra.searchpath=[...]`` adds (Hydra refuses any other form itself)."""
    for override in overrides:
        if override.get_key_element() == "hydra.searchpath" and isinstance(override.value(), list):
            return tuple(str(path) for path in override.value())
    return ()


def import_paths(argv: list[str]) -> list[str]:
    """The methods a command names by import path (``method=my_pkg.attn:MyAttention``, a sweep's too)."""
    return [choice for override in parsed_overrides(argv) if override.key_or_group == "method"
            for choice in choices_of(override) if ":" in choice]


def check_group_choices(argv: list[str]) -> str | None:
    """A one-line message for the first unknown group choice on the command line (or an override
    Hydra cannot parse, or a method that cannot be imported), else None. Stores the groups made from
    code first (suite.groups), the methods the command names by import path too."""
    from hydra.errors import OverrideParseException

    from suite.errors import USER_ERRORS
    from suite.groups import store, store_spec

    try:
        overrides = parsed_overrides(argv)
    except OverrideParseException as exc:
        reason = str(exc).splitlines()[0]
        return (f"cannot parse the override {exc.override!r}: {reason} "
                f"(Hydra's override grammar: https://hydra.cc/docs/advanced/override_grammar/basic/)")
    try:
        store()
        for spec in import_paths(argv):
            store_spec(spec)
    except USER_ERRORS as exc:  # a broken entry point, a method path that imports no method
        return str(exc)
    searchpath = searchpath_of(overrides)
    for override in overrides:
        group = override.key_or_group
        problem = None if group.split(".")[0] == "hydra" else key_problem(override)  # Hydra's own are not recorded
        if problem:
            return problem
        if override.is_delete() or override.package is not None or not is_group(group, searchpath):
            continue
        valid = group_choices(group, searchpath)
        for choice in choices_of(override):
            if choice not in valid:
                from suite.config import unknown_choice

                outside = "; or a class by its import path, method=my_pkg.attn:MyAttention" if group == "method" else ""
                return unknown_choice(group, choice, valid, f"valid {group}s") + outside
            if group == "hydra/launcher":
                missing = missing_launcher_plugin(choice)
                if missing:
                    return missing
    return None


def key_problem(override) -> str | None:
    """A one-line refusal of a key override that would put into the record what the command did not
    mean: an environment variable, or a key added with ``+`` that nothing reads (a typo, run in silence)."""
    from suite.config import added_key, reads_environment
    from suite.modes import run_schemas

    key = override.key_or_group
    problem = reads_environment(key, override.input_line.partition("=")[2])
    if problem is None and override.is_add() and not is_group(key):
        problem = added_key(key, run_schemas().values())
    return problem


def missing_launcher_plugin(launcher: str) -> str | None:
    """A message when the plugin behind conf/hydra/launcher/<launcher>.yaml is not installed."""
    import importlib.util

    path = CONF_DIR / "hydra" / "launcher" / f"{launcher}.yaml"
    if not path.exists():  # Hydra's own (basic) or a plugin's own config: nothing to install
        return None
    target = re.search(r"^_target_:\s*(\S+)", path.read_text(), re.M).group(1)
    package = ".".join(target.split(".")[:2])  # hydra_plugins.<plugin>
    try:  # find_spec raises, not answers None, when no plugin at all is installed (no hydra_plugins)
        found = importlib.util.find_spec(package)
    except ModuleNotFoundError:
        found = None
    if found is None:
        return (f"hydra/launcher={launcher} needs the {package.split('.')[1]} plugin: "
                f"pip install -e '.[cluster]'")
    return None


def hydra_dir_problem() -> str | None:
    """A line when $SUITE_HYDRA_DIR, where Hydra writes its logs, names a file (Hydra would raise)."""
    from suite.records import file_in_the_way

    folder = os.environ.get("SUITE_HYDRA_DIR")
    blocking = file_in_the_way(Path(folder)) if folder else None
    if blocking is None:
        return None
    return f"SUITE_HYDRA_DIR={folder!r} is not a folder ({blocking} is a file); name a folder for Hydra's logs"


# -- what Hydra raised while composing, said in one line ---------------------------------------------

def explain(exc: Exception, argv: list[str]) -> str | None:
    """One line for a composition error Hydra raised, else None (not a user mistake)."""
    from hydra.errors import CompactHydraException, ConfigCompositionException, MissingConfigException

    from suite.config import unknown_choice

    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file and exc.options is not None:
        group, _, choice = exc.missing_cfg_file.rpartition("/")  # e.g. an experiment's own choice
        return unknown_choice(group, choice, sorted(exc.options), f"valid {group}s")
    overridden = re.match(r"Could not override '([^']+)'", str(exc))  # the whole key, as written
    if isinstance(exc, ConfigCompositionException) and overridden and getattr(exc.__cause__, "full_key", None):
        return unknown_key_on_command_line(overridden.group(1), argv)
    if isinstance(exc, CompactHydraException):  # Hydra's messages for the user (a bad override's syntax)
        return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return None


def dotted_keys(node: dict, prefix: str = "") -> list[str]:
    """Every key of a nested dict as a dotted path: ``budget``, ``budget.max_steps``, ..."""
    keys = []
    for key, value in node.items():
        keys.append(f"{prefix}{key}")
        if isinstance(value, dict):
            keys += dotted_keys(value, f"{prefix}{key}.")
    return keys


def unknown_key_on_command_line(key: str, argv: list[str]) -> str:
    """``unknown config key``, with the key meant among those of the config the command composes.

    Only on this error path is the config composed a second time, with the command's group choices
    alone: of a sweep, the first combination of choices that lacks the key (it is named)."""
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from suite.config import unknown_key

    overrides = parsed_overrides(argv)
    searchpath = searchpath_of(overrides)
    groups = [o for o in overrides if is_group(o.key_or_group, searchpath) and not o.is_delete()]
    fixed = [o.input_line for o in groups if not o.is_sweep_override()]
    swept = [[f"{o.get_key_element()}={c}" for c in choices_of(o, escaped=True)] for o in groups
             if o.is_sweep_override()]
    known: list[str] = []
    for combination in itertools.product(*swept):
        try:
            cfg = config_loader(searchpath).load_configuration(CONFIG_NAME, [*fixed, *combination], RunMode.RUN)
        except Exception:  # another mistake in this combination: no keys to suggest from
            continue
        known = dotted_keys(OmegaConf.to_container(cfg, resolve=False))
        if key not in known:
            context = f" (with {', '.join(combination)})" if combination else ""
            return unknown_key(key, known, context)
    return unknown_key(key, known)


@contextmanager
def hydra_raises() -> Iterator[None]:
    """Let Hydra raise what it meets instead of printing it (several lines, exit code 1), so that a
    composition mistake is said here in one line with exit code 2. HYDRA_FULL_ERROR is Hydra's switch;
    other errors then show their whole traceback, still with exit code 1."""
    before = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["HYDRA_FULL_ERROR"]
        else:
            os.environ["HYDRA_FULL_ERROR"] = before


# -- --help --------------------------------------------------------------------------------------------

def help_groups(*, _root_) -> str:
    """The groups of ``--help`` with their choices, this command's in brackets (a resolver of
    conf/config.yaml's hydra.help.template); internal groups and Hydra's own are left out, but for
    the launchers."""
    choices = _root_.hydra.runtime.choices
    searchpath = tuple(_root_.hydra.searchpath)
    groups = [g for g in config_loader(searchpath).list_groups("") if g not in (*INTERNAL_GROUPS, "hydra")]
    lines = []
    for group in [*groups, "hydra/launcher"]:
        items = ", ".join(f"[{c}]" if c == choices.get(group) else c for c in group_choices(group, searchpath))
        lines += textwrap.wrap(f"{group}: {items}", width=100, initial_indent="  ", subsequent_indent="      ")
    return "\n".join(lines).replace("$", "$$")  # the template is a string.Template next


def help_keys(*, _root_) -> str:
    """The top-level keys of ``--help`` with this command's values (a resolver like help_groups)."""
    from omegaconf import Container

    # Key by key: resolving the whole root would resolve the help template that calls this.
    values = {k: _root_[k] for k in _root_ if k != "hydra" and not isinstance(_root_[k], Container)}
    text = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in values.items())  # as typed
    return "\n".join(textwrap.wrap(text, width=100, initial_indent="  ", subsequent_indent="  ")).replace("$", "$$")


def main() -> None:
    import hydra
    from omegaconf import DictConfig, OmegaConf

    from suite.errors import USER_ERRORS

    argv = sys.argv[1:]
    # `python -m suite` puts the current folder on the path, the console command its bin folder: a
    # module of the current folder (method=my_pkg.attn:MyAttention) is found either way. Appended,
    # so that a folder holding a checkout's methods/ or suite/ cannot shadow the installed ones.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    if argv[:1] == ["board"]:  # `attention-suite board cpu`: a board file's multiruns (suite/board.py)
        from suite.board import main as board

        sys.exit(board(argv[1:]))
    if argv[:1] == ["validate"]:  # `attention-suite validate PATH...`: no config, no Hydra (suite/validate.py)
        from suite.validate import main as validate

        sys.exit(validate(argv[1:]))
    if argv[:1] == ["check-method"]:  # `attention-suite check-method SPEC`: the contract kit, no Hydra
        from suite.check_method import main as check_method

        sys.exit(check_method(argv[1:]))
    problem = check_group_choices(argv) or hydra_dir_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    specs = import_paths(argv)  # imported again by each job: a launcher's worker process has not yet
    from hydra._internal.utils import get_args_parser

    args = get_args_parser().parse_args(argv)
    if args.help or args.cfg:  # only then: Hydra hands resolvers to a sweep's workers, which cannot load __main__'s
        OmegaConf.register_new_resolver("suite_help_groups", help_groups, replace=True)
        OmegaConf.register_new_resolver("suite_help_keys", help_keys, replace=True)

    @hydra.main(config_path=str(CONF_DIR), config_name=CONFIG_NAME, version_base="1.3")
    def job(cfg: DictConfig) -> None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        import methods
        from suite.config import environment_problems
        from suite.errors import ConfigError
        from suite.protocol import run_protocol
        from suite.sweep import FINE, note

        for spec in specs:
            methods.resolve(spec)
        sweeping = HydraConfig.get().mode == RunMode.MULTIRUN
        try:
            # Checked before it is resolved: however a resolver came in, it reads nothing into the record.
            problems = environment_problems(OmegaConf.to_container(cfg, resolve=False))
            if problems:
                raise ConfigError("\n".join(problems))
            config = OmegaConf.to_container(cfg, resolve=True)
            # A sweep resumes (finished jobs are skipped); a single command always runs.
            outcome = run_protocol(config, resume=sweeping)
        except USER_ERRORS as exc:
            for line in str(exc).splitlines():  # one line per mistake
                print(f"error: {line}", file=sys.stderr)
            if sweeping:
                note("refused", str(exc))
                return  # this job is refused; the sweep goes on, and exits non-zero at its end
            sys.exit(EXIT_USER_ERROR)
        if sweeping:
            note(outcome.status, outcome.error)
        if outcome.status == "interrupted":
            sys.exit(EXIT_INTERRUPTED)  # in a sweep too: Ctrl-C stops the sweep, not just this job
        if outcome.status not in FINE and not sweeping:
            sys.exit(1)

    try:
        with hydra_raises():
            job()
    except KeyboardInterrupt:  # outside the train loop (loading data, writing): no record was written
        print("interrupted: no record written", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:
        problem = explain(exc, argv)
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)


if __name__ == "__main__":
    main()
