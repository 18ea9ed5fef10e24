"""``python -m suite method=<name> task=<name> [budget=...] [mode=...] [key=value ...]``.

Config groups live in conf/ (see conf/config.yaml). Choices of the groups are checked before Hydra
composes anything, so a typo gets one line naming the valid choices and exit code 2.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
CHECKED_GROUPS = ("method", "task", "budget", "model", "mode", "logger", "experiment", "hydra/launcher")
# Hydra's own launchers need no extra; ours (conf/hydra/launcher/) need their plugin installed.
BUILTIN_LAUNCHERS = ("basic",)
EXIT_USER_ERROR = 2


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
    problem = check_group_choices(sys.argv[1:])
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

        from suite.run import run

        config = OmegaConf.to_container(cfg, resolve=True)
        sweeping = HydraConfig.get().mode == RunMode.MULTIRUN
        try:
            _, outcome = run(config)
        except USER_ERRORS as exc:
            print(f"error: {exc}", file=sys.stderr)
            if sweeping:
                return  # this job is refused; the sweep goes on
            sys.exit(EXIT_USER_ERROR)
        if outcome.status not in ("ok", "skipped") and not sweeping:
            sys.exit(1)

    job()


if __name__ == "__main__":
    main()
