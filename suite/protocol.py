"""How one command turns into runs: ``protocol=single`` runs the composed config once;
``protocol=lr_sweep`` runs the field's learning-rate protocol (Zoology, LRA) inside one board cell:
every rate of ``protocol.lrs`` at the first seed, the best by validation accuracy
(``records.select_lr``), then the other seeds at that rate. Each run writes its own record; runs
with an ok record already are skipped, so an interrupted sweep resumes where it stopped."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from suite import records
from suite.errors import ConfigError
from suite.run import Outcome, run

PROTOCOLS = ("single", "lr_sweep")


def with_lr_and_seed(config: Mapping, lr: float, seed: int) -> dict:
    varied = copy.deepcopy(dict(config))
    varied["budget"]["lr"], varied["seed"] = lr, seed
    return varied


def check_lr_sweep(protocol: Mapping) -> tuple[list[float], list[int]]:
    lrs, seeds = protocol.get("lrs"), protocol.get("seeds")
    if (not isinstance(lrs, list) or not lrs
            or any(isinstance(x, bool) or not isinstance(x, (int, float)) or x <= 0 for x in lrs)):
        raise ConfigError(f"protocol.lrs must be a non-empty list of positive numbers, got {lrs!r}")
    if (not isinstance(seeds, list) or not seeds or len(set(seeds)) != len(seeds)
            or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds)):
        raise ConfigError(f"protocol.seeds must be a non-empty list of distinct integers, got {seeds!r}")
    return [float(x) for x in lrs], seeds


def run_protocol(config: Mapping, resume: bool) -> Outcome:
    """Run ``config`` under its protocol; the outcome of the last run (interrupted stops at once)."""
    protocol = config.get("protocol") or {"name": "single"}
    name = protocol.get("name")
    if name not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {name!r}; valid protocols: {', '.join(PROTOCOLS)}")
    if name == "single":
        return run(config, resume=resume)[1]
    lrs, seeds = check_lr_sweep(protocol)
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
