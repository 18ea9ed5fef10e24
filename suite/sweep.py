"""A sweep's exit code a scheduler can trust: each job of a Hydra multirun notes how it ended in its
own output folder (``note``), wherever the launcher ran it; when the sweep is over, ``Report`` (a
Hydra callback, conf/config.yaml) lists the jobs that were refused or did not end ok, and the sweep
exits 2 if any was refused (a mistake in the command), else 1 if any failed, else 0."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback

OUTCOME = "suite-outcome.json"
FINE = ("ok", "skipped", "not_applicable")  # statuses of a job that did what it could
EXIT_FAILED, EXIT_REFUSED = 1, 2


def note(status: str, error: str | None = None) -> None:
    """Write how this sweep job ended (``refused``, or its record's status) into its output folder."""
    hydra = HydraConfig.get()
    folder = Path(hydra.runtime.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    outcome = {"job": hydra.job.num, "overrides": list(hydra.overrides.task), "status": status, "error": error}
    (folder / OUTCOME).write_text(json.dumps(outcome) + "\n")


class Report(Callback):
    """At the end of a multirun: the jobs that did not end ok, one line each, and the exit code."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        self.sweep_dir = Path(str(config.hydra.sweep.dir))  # read once: it holds the launch time

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        ended = [json.loads(p.read_text()) for p in self.sweep_dir.glob(f"*/{OUTCOME}")]
        bad = sorted((o for o in ended if o["status"] not in FINE), key=lambda o: o["job"])
        if not bad:
            return
        print(f"sweep: {len(bad)} of {len(ended)} jobs did not end ok:", file=sys.stderr)
        for o in bad:
            said = (o["error"] or "").splitlines()[0] if o["error"] else ""
            print(f"  job {o['job']} ({' '.join(o['overrides'])}): {o['status']}" + (f": {said}" if said else ""),
                  file=sys.stderr)
        sys.exit(EXIT_REFUSED if any(o["status"] == "refused" for o in bad) else EXIT_FAILED)
