"""The wandb logger with the real library, offline: the run is named after the record's run id, tagged
with the method, task and budget, and a record that is not ok finishes the run with exit code 1."""

from __future__ import annotations

from pathlib import Path

import pytest
import wandb
from wandb.proto import wandb_internal_pb2

from suite import logger, record_store, records

BLOCK = 32768  # the transaction log is a LevelDB log: 32 KiB blocks of chunks with 7-byte headers
FULL, LAST = 1, 4  # chunk types that end a record


def transaction_log(path: Path) -> dict[str, list]:
    """The records of an offline run's ``.wandb`` file, by record type, as wandb wrote them."""
    data = path.read_bytes()
    assert data.startswith(b":W&B"), f"{path} is not a wandb transaction log"
    found, pending, pos = {}, b"", 7  # after wandb's own 7-byte file header
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        if left < 7 or (length == 0 and kind == 0):  # the rest of the block is padding
            pos += left
            continue
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record.FromString(pending)
            found.setdefault(record.WhichOneof("record_type"), []).append(record)
            pending = b""
    return found


@pytest.mark.parametrize("status, exit_code", [("ok", 0), ("error", 1)])
def test_wandb_run_carries_the_record_id_tags_and_exit_code(make_config, tmp_path, monkeypatch, status, exit_code):
    runs = tmp_path / "wandb-runs"
    monkeypatch.setenv("WANDB_MODE", "offline")  # read by conf/logger/wandb.yaml when composed
    monkeypatch.setenv("WANDB_DIR", str(runs))
    monkeypatch.setenv("WANDB_SILENT", "true")
    config = make_config("logger=wandb", "method=softmax", "task=listops", "budget=smoke")
    assert config["logger"]["mode"] == "offline"
    config_hash = records.config_hash(config, "cpu")
    run_id = records.new_run_id(config_hash)
    record = record_store.new_record(
        "train", config=config, config_hash=config_hash, method={"name": "softmax", "impl": "auto", "params": {}},
        task={"name": "listops"}, metrics={"test_accuracy": 0.25}, env={}, status=status,
        error=None if status == "ok" else "RuntimeError: simulated", run_id=run_id)
    assert record["run_id"] == run_id

    with logger.opened(config, run_id) as log:
        log.log({"train/loss": 2.5}, step=1)
        log.finish(record, tmp_path / "record.json")
    wandb.teardown()  # stops wandb's service process once it has written the run's files (finish() may return first)

    [run_dir] = (runs / "wandb").glob(f"offline-run-*-{run_id}")
    logged = transaction_log(run_dir / f"run-{run_id}.wandb")
    [run] = logged["run"]
    assert run.run.run_id == run_id
    assert list(run.run.tags) == ["softmax", "listops", "smoke"]
    assert [r.exit.exit_code for r in logged["exit"]] == [exit_code]
    logged_keys = {item.key or "/".join(item.nested_key) for r in logged["history"] for item in r.history.item}
    assert "train/loss" in logged_keys


def test_without_a_run_id_the_record_makes_its_own():
    made = [record_store.new_record("train", config={}, config_hash="0123456789abcdef", method={}, task={}, metrics={},
                               env={})["run_id"] for _ in range(2)]
    assert made[0] != made[1] and all("_01234567_" in run_id for run_id in made)
