"""How one command turns into runs: ``protocol=single`` runs the composed config once;
``protocol=lr_sweep`` runs the field's learning-rate protocol (Zoology, LRA) inside one board cell:
every rate of ``protocol.lrs`` at the first seed, the best by validation accuracy
(``records.select_lr``), then the other seeds at that rate. Each run writes its own record; runs
with an ok record already are skipped, so an interrupted sweep resumes where it stopped."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from suite import modes, record_store, records
from suite.config import validate
from suite.job import Outcome
from suite.run import run_checked


def with_lr_and_seed(config: Mapping, lr: float, seed: int) -> dict:
    """``config`` at learning rate ``lr`` (a float, as budgets write it: 1 and 1.0 hash apart) and ``seed``."""
    varied = copy.deepcopy(dict(config))
    varied["budget"]["lr"], varied["seed"] = float(lr), seed
    return varied


def one_significant_digit(x: float) -> float:
    """``x`` rounded to one significant digit, as the grids write their rates (3e-4, not 3.33e-4)."""
    return float(f"{x:.0e}")


def rate_past_edge(tried: list[float], chosen: float) -> float | None:
    """The next rate past the edge of ``tried`` where ``chosen`` sits, one step of the edge's own
    ratio beyond it (1e-3 below 3e-3: 3e-4); None when ``chosen`` is inside (or the grid is one rate)."""
    rates = sorted(set(tried))
    if len(rates) < 2 or rates[0] < chosen < rates[-1]:
        return None
    if chosen == rates[0]:
        return one_significant_digit(rates[0] * rates[0] / rates[1])
    return one_significant_digit(rates[-1] * rates[-1] / rates[-2])


def run_protocol(config: Mapping, resume: bool) -> Outcome:
    """Run ``config`` under its protocol; the outcome of the last run (interrupted stops at once)."""
    validate(config, modes.run_schemas())  # once, before the first run: protocol.lrs and protocol.seeds too (a run's
    # learning rate and seed are one of these, or a rate past their edge)
    protocol = config.get("protocol") or {"name": "single"}
    if protocol["name"] == "single":
        return run_checked(config, resume=resume)[1]
    lrs, seeds = protocol["lrs"], protocol["seeds"]
    swept = []
    for i, lr in enumerate(lrs, 1):
        print(f"lr_sweep: learning rate {i}/{len(lrs)}: {lr:g} (seed {seeds[0]})", flush=True)
        path, outcome = run_checked(with_lr_and_seed(config, lr, seeds[0]), resume=True)
        if outcome.status == "interrupted":
            return outcome
        swept.append(record_store.read_record(path))
    chosen = records.select_lr(swept)
    added = {"below": 0, "above": 0}
    while chosen is not None and (beyond := rate_past_edge([r["config"]["budget"]["lr"] for r in swept], chosen)):
        side = "below" if beyond < chosen else "above"
        if added[side] >= protocol.get("bracket", 0):
            print(f"lr_sweep: the best rate {chosen:g} is still at the {'low' if side == 'below' else 'high'} "
                  f"edge after {added[side]} added rate(s) (protocol.bracket={protocol.get('bracket', 0)})",
                  flush=True)
            break
        added[side] += 1
        print(f"lr_sweep: the best rate {chosen:g} sits at an edge of the rates tried; adding {beyond:g} "
              f"(seed {seeds[0]})", flush=True)
        path, outcome = run_checked(with_lr_and_seed(config, beyond, seeds[0]), resume=True)
        if outcome.status == "interrupted":
            return outcome
        swept.append(record_store.read_record(path))
        chosen = records.select_lr(swept)
    if chosen is None:
        print("lr_sweep: no learning rate gave an ok run; no seeds are run", flush=True)
        return outcome
    tried = ", ".join(f"{r['config']['budget']['lr']:g}: {r['metrics'].get('val_accuracy', float('nan')):.4f}"
                      for r in swept)
    print(f"lr_sweep: validation accuracy by rate {{{tried}}}; chosen {chosen:g}", flush=True)
    for seed in seeds[1:]:
        print(f"lr_sweep: seed {seed} at learning rate {chosen:g}", flush=True)
        _, outcome = run_checked(with_lr_and_seed(config, chosen, seed), resume=True)
        if outcome.status == "interrupted":
            return outcome
    return outcome
