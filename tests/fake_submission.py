"""A submission folder as someone with a GPU would send it (docs/SUBMITTING.md), made from the
records of one board cell (tests/data/board_listops/: the d846858 board's ListOps short records, kept
here so that the tests do not lean on what results/ holds while a board reruns):
the same configs, rerun on a fake H100 machine with today's provenance (suite version, method
distribution, hardware block). Used by the validate, site and browser tests; nothing here writes
under results/."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from suite import records

REPO = Path(__file__).resolve().parent.parent
CELL = ("listops_short", "softmax")  # a board cell of three seeds at one learning rate
BOARD = Path(__file__).resolve().parent / "data" / "board_listops"  # a finished board's ListOps point
GPU = {"device_model": "NVIDIA H100 80GB HBM3", "device_memory_bytes": 85_520_809_984, "driver": "550.54.15",
       "cuda": "12.4", "torch": "2.13.0+cu124", "triton": "3.9.0", "fla": "0.6.0"}
SUBMITTER = "Ada Lovelace"


def committed_cell() -> list[dict]:
    """The records of CELL at its chosen learning rate (one per seed)."""
    task, method = CELL
    found = [json.loads(p.read_text()) for p in sorted((BOARD / "train" / task / method).glob("*.json"))]
    rates = [r["config"]["budget"]["lr"] for r in found if r["config"]["seed"] == 1]
    return [r for r in found if r["config"]["budget"]["lr"] == rates[0] and r["status"] == "ok"]


def gpu_record(record: dict, index: int) -> dict:
    """``record`` as if its config ran on the fake GPU machine: new run id and provenance, the hash
    of the same config on cuda, a GPU's throughput."""
    new = copy.deepcopy(record)
    new["env"].update(device="cuda", device_name=GPU["device_model"], cuda=GPU["cuda"], cuda_driver=GPU["driver"],
                      torch=GPU["torch"], suite_version="0.1.0", hardware=dict(GPU))
    new["method"]["distribution"] = {"name": "attention-suite", "version": "0.1.0"}
    new["config_hash"] = records.record_config_hash(new)
    new["run_id"] = f"20261203T12000{index}Z_{new['config_hash'][:8]}_0000000{index}"
    new["created"] = f"2026-12-03T12:00:0{index}Z"
    new["metrics"]["train_tokens_per_s"] *= 40
    new["metrics"]["peak_memory_source"] = "cuda_allocator"
    return new


def write(folder: Path, record: dict) -> Path:
    path = records.record_path(record, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def make_submission(folder: Path, submitter: str = SUBMITTER) -> list[Path]:
    """A valid submission folder: submission.json and the GPU records of CELL."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "submission.json").write_text(json.dumps({"submitter": submitter, "added": "2026-12-03",
                                                        "notes": "fake H100 machine made by a test"}))
    return [write(folder, gpu_record(r, i)) for i, r in enumerate(committed_cell(), start=1)]
