"""Write tasks/lra/baselines.json: the majority-class baseline of each generated task config the
records under a results folder ran (a config's data, its budget's split sizes included, generated
as a run generates it), so that validate and the site check a record's baseline without its data.

    python scripts/data_baselines.py [--results results] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import tasks
from suite.record_store import iter_records
from tasks.lra import BASELINES, TABLE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.mkdtemp()))
    args = parser.parse_args()
    configs = {}
    for _, record in iter_records(args.results):
        task = record["config"].get("task") or {}
        if record["kind"] == "train" and task.get("name") in BASELINES and task.get("source") == "generate":
            config = tasks.data_config(task, record["config"].get("budget"))
            configs[json.dumps(config, sort_keys=True)] = config
    entries = [{"task": config, "baseline": tasks.load(config["name"], config, args.data_dir).baseline}
               for _, config in sorted(configs.items())]
    TABLE.write_text(json.dumps({"baselines": entries}, indent=1, sort_keys=True) + "\n")
    print(f"{TABLE}: {len(entries)} config(s)")


if __name__ == "__main__":
    main()
