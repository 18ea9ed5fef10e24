"""``python -m suite method=<name> task=<name> [budget=...] [mode=...] [key=value ...]``.

Config groups live in conf/ (see conf/config.yaml). Choices of the groups and the keys of
``key=value`` overrides are checked before Hydra runs anything, so a typo gets one line naming the
valid choices (or the key meant) and exit code 2. Exit codes: 0 ok or skipped, 1 the run failed
(error, diverged, oom), 2 a user mistake, 130 interrupted (Ctrl-C or SIGTERM; a sweep stops too).
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
CHECKED_GROUPS = ("method", "task", "budget", "model", "mode", "logger", "experiment", "protocol", "point",
                  "state_size", "hydra/launcher")
# Hydra's own launchers need no extra; ours (conf/hydra/launcher/) need their plugin installed.
BUILTIN_LAUNCHERS = ("basic",)
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # the shell's code for a process ended by Ctrl-C


def group_choices(group: str) -> list[str]:
    """The options of a config group: the yaml files in conf/<group>/."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def check_group_choices(argv: list[str]) -> str | None:
    """A one-line message for the first unknown group choice on the command line, else None."""
    for arg in argv:
        match = re.fullmatch(r"\+{0,2}([\w/]+)=(.*)", arg)
        if not match or match.group(1) not in CHECKED_GROUPS:
            continue
        group, value = match.groups()
        if not re.fullmatch(r"[\w.-]+(,[\w.-]+)*", value):  # sweep syntax such as glob(): Hydra's call
            continue
        valid = group_choices(group)
        if group == "hydra/launcher":
            valid = sorted([*valid, *BUILTIN_LAUNCHERS])
        for choice in value.split(","):
            if choice not in valid:
                return f"unknown {group} {choice!r}; valid {group}s: {', '.join(valid)}"
            if group == "hydra/launcher" and choice not in BUILTIN_LAUNCHERS:
                missing = missing_launcher_plugin(choice)
                if missing:
                    return missing
    return None


def dotted_keys(node: dict, prefix: str = "") -> list[str]:
    """Every key of a nested dict as a dotted path: ``budget``, ``budget.max_steps``, ..."""
    keys = []
    for key, value in node.items():
        keys.append(f"{prefix}{key}")
        if isinstance(value, dict):
            keys += dotted_keys(value, f"{prefix}{key}.")
    return keys


def check_override_keys(argv: list[str]) -> str | None:
    """A one-line message for the first ``key=value`` whose key the composed config lacks, else None.

    Hydra's own answer spans five lines and advises ``+key=value``, which would add the typo as a
    new key that nothing reads; here the message names the key most likely meant.
    """
    wanted, groups, swept = [], [], []
    for arg in argv:
        match = re.fullmatch(r"(\+{0,2})([\w/.]+)=([\w.-]*)(,[\w.-]+)*|([A-Za-z_][\w.]*)=.*", arg, re.S)
        if not match:
            continue
        prefix, name, first, more, plain = match.groups()
        if name and (CONF_DIR / name).is_dir():  # a config group: compose with its choice
            if not name.startswith("hydra/"):
                groups.append(f"{prefix}{name}={first}")  # a sweep is checked with its first choice
                swept += [groups[-1]] if more else []
        elif (plain or not prefix) and (plain or name).split(".")[0] != "hydra":
            wanted.append(plain or name)
    if not wanted:
        return None
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            config = OmegaConf.to_container(compose("config", overrides=groups), resolve=False)
    except Exception:  # whatever composing trips on, Hydra reports it itself
        return None
    known = dotted_keys(config)
    context = f" (with {', '.join(swept)})" if swept else ""
    for key in wanted:
        if key in known:
            continue
        parent, _, leaf = key.rpartition(".")
        if not parent or parent in known:  # a misspelled leaf: compare it with its siblings
            close = [f"{parent}.{c}".lstrip(".") for c in difflib.get_close_matches(
                leaf, [k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == parent], n=1)]
        else:  # a misspelled group or path: compare whole keys of the same depth
            close = difflib.get_close_matches(key, [k for k in known if k.count(".") == key.count(".")], n=1)
        if close:
            return f"unknown config key {key!r}; did you mean {close[0]!r}?{context}"
        while parent and parent not in known:  # the deepest part of the key that exists
            parent = parent.rpartition(".")[0]
        siblings = ", ".join(k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == parent) or "none"
        where = f"keys of {parent}" if parent else "top-level keys"
        return f"unknown config key {key!r}; valid {where}: {siblings}{context}"
    return None


def missing_launcher_plugin(launcher: str) -> str | None:
    """A message when the plugin behind conf/hydra/launcher/<launcher>.yaml is not installed."""
    import importlib.util

    text = (CONF_DIR / "hydra" / "launcher" / f"{launcher}.yaml").read_text()
    target = re.search(r"^_target_:\s*(\S+)", text, re.M).group(1)
    package = ".".join(target.split(".")[:2])  # hydra_plugins.<plugin>
    if importlib.util.find_spec(package) is None:
        return (f"hydra/launcher={launcher} needs the {package.split('.')[1]} plugin: "
                f"pip install -e '.[cluster]'")
    return None


def main() -> None:
    problem = check_group_choices(sys.argv[1:]) or check_override_keys(sys.argv[1:])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)

    import hydra
    from omegaconf import DictConfig, OmegaConf

    from suite.errors import USER_ERRORS

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def job(cfg: DictConfig) -> None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        from suite.protocol import run_protocol

        config = OmegaConf.to_container(cfg, resolve=True)
        sweeping = HydraConfig.get().mode == RunMode.MULTIRUN
        try:
            # A sweep resumes (finished jobs are skipped); a single command always runs.
            outcome = run_protocol(config, resume=sweeping)
        except USER_ERRORS as exc:
            print(f"error: {exc}", file=sys.stderr)
            if sweeping:
                return  # this job is refused; the sweep goes on
            sys.exit(EXIT_USER_ERROR)
        if outcome.status == "interrupted":
            sys.exit(EXIT_INTERRUPTED)  # in a sweep too: Ctrl-C stops the sweep, not just this job
        if outcome.status not in ("ok", "skipped") and not sweeping:
            sys.exit(1)

    try:
        job()
    except KeyboardInterrupt:  # outside the train loop (loading data, writing): no record was written
        print("interrupted: no record written", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
