"""How one command turns into runs: ``protocol=single`` runs the composed config once;
``protocol=lr_sweep`` runs the field's learning-rate protocol (Zoology, LRA) inside one board cell:
every rate of ``protocol.lrs`` at the first seed, the best by validation accuracy
(``records.select_lr``), then the other seeds at that rate. Each run writes its own record; runs
with an ok record already are skipped, so an interrupted sweep resumes where it stopped."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from suite import records
from suite.config import validate
from suite.run import Outcome, run


def with_lr_and_seed(config: Mapping, lr: float, seed: int) -> dict:
    """``config`` at learning rate ``lr`` (a float, as budgets write it: 1 and 1.0 hash apart) and ``seed``."""
    varied = copy.deepcopy(dict(config))
    varied["budget"]["lr"], varied["seed"] = float(lr), seed
    return varied


def run_protocol(config: Mapping, resume: bool) -> Outcome:
    """Run ``config`` under its protocol; the outcome of the last run (interrupted stops at once)."""
    validate(config)  # before the first run of a sweep: protocol.lrs and protocol.seeds too
    protocol = config.get("protocol") or {"name": "single"}
    if protocol["name"] == "single":
        return run(config, resume=resume)[1]
    lrs, seeds = protocol["lrs"], protocol["seeds"]
    swept = []
    for i, lr in enumerate(lrs, 1):
        print(f"lr_sweep: learning rate {i}/{len(lrs)}: {lr:g} (seed {seeds[0]})", flush=True)
        path, outcome = run(with_lr_and_seed(config, lr, seeds[0]), resume=True)
        if outcome.status == "interrupted":
            return outcome
        swept.append(records.read_record(path))
    chosen = records.select_lr(swept)
    if chosen is None:
        print("lr_sweep: no learning rate gave an ok run; no seeds are run", flush=True)
        return outcome
    tried = ", ".join(f"{r['config']['budget']['lr']:g}: {r['metrics'].get('val_accuracy', float('nan')):.4f}"
                      for r in swept)
    print(f"lr_sweep: validation accuracy by rate {{{tried}}}; chosen {chosen:g}", flush=True)
    for seed in seeds[1:]:
        print(f"lr_sweep: seed {seed} at learning rate {chosen:g}", flush=True)
        _, outcome = run(with_lr_and_seed(config, chosen, seed), resume=True)
        if outcome.status == "interrupted":
            return outcome
    return outcome
