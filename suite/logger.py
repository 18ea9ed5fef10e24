"""Optional experiment logging (``logger=wandb``); off by default and never needs the network.

Jobs report progress with ``logger.current().log(metrics, step)``; the run opens the logger (given
the run id its record will carry) and closes it with the record. With ``logger=none`` every call does
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from suite.errors import ConfigError


class NullLogger:
    """What jobs talk to when no logger is configured."""

    def log(self, metrics: Mapping, step: int | None = None) -> None:
        pass

    def finish(self, record: Mapping, path: Path) -> None:
        pass


class WandbLogger(NullLogger):
    """Weights & Biases: metrics during the job, the record's summary and config at the end.

    ``logger.mode`` is ``offline`` unless set otherwise (or by ``WANDB_MODE``); offline runs are
    written under ``WANDB_DIR`` (or ``logger.dir``) and uploaded later with ``wandb sync``. The wandb
    run's id is the record's run id when the run passes it, tags are the method, task and budget, and
    a run whose record is not ok finishes with exit code 1, so wandb shows it failed.
    """

    def __init__(self, config: Mapping, run_id: str | None = None) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise ConfigError("logger=wandb needs the wandb package: pip install -e '.[wandb]'") from exc
        settings = config["logger"]
        method, task = config["method"]["name"], config["task"]["name"]
        budget = config.get("budget", {}).get("name")
        self.wandb = wandb
        self.run = wandb.init(
            project=settings["project"],
            mode=settings["mode"],
            dir=settings.get("dir"),
            id=run_id,  # None: wandb picks one; the summary's run_id still names the record
            name=f"{config['mode']['name']}-{method}-{task}-seed{config['seed']}",
            group=f"{method}-{task}",
            tags=[tag for tag in (method, task, budget) if tag],
            config=dict(config),
            reinit="finish_previous",  # one wandb run per job, also inside one multirun process
        )

    def log(self, metrics: Mapping, step: int | None = None) -> None:
        self.run.log(dict(metrics), step=step)

    def finish(self, record: Mapping, path: Path) -> None:
        flat = {k: v for k, v in record["metrics"].items() if isinstance(v, (int, float, str, bool))}
        self.run.summary.update({**flat, "status": record["status"], "run_id": record["run_id"],
                                 "config_hash": record["config_hash"], "record_path": str(path)})
        self.run.finish(exit_code=0 if record["status"] == "ok" else 1)


LOGGERS = {"none": NullLogger, "wandb": WandbLogger}
_current: NullLogger = NullLogger()


def current() -> NullLogger:
    """The logger of the job in progress (a no-op one outside a run)."""
    return _current


@contextmanager
def opened(config: Mapping, run_id: str | None = None) -> Iterator[NullLogger]:
    """Open the configured logger for the length of one job; ``run_id`` is the one its record will carry."""
    global _current
    name = config.get("logger", {}).get("name", "none")  # a name the config's schema has checked
    _current = LOGGERS[name]() if name == "none" else LOGGERS[name](config, run_id)
    try:
        yield _current
    finally:
        _current = NullLogger()
