"""Long Range Arena tasks."""

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path

# name -> "module:function" of the loader; merged into ``tasks.LOADERS``.
LOADERS = {
    "listops": "tasks.lra.listops:load",
    "listops_short": "tasks.lra.listops:load",  # the same generator, shorter expressions (CPU board)
    "text": "tasks.lra.text:load",
    "retrieval": "tasks.lra.retrieval:load",
    "image": "tasks.lra.image:load",
    "pathfinder": "tasks.lra.pathfinder:load",
    "pathx": "tasks.lra.pathfinder:load",
}

# The majority-class baseline of each generated task config the boards run, computed from its data
# by scripts/data_baselines.py (tests/test_listops.py regenerates them): validate and the site read
# a record's baseline here, since neither loads data. A config not listed has no baseline here.
TABLE = Path(__file__).with_name("baselines.json")


@cache
def table() -> dict[str, float]:
    """The table by data config (its JSON, keys sorted), read once: validate and the site ask it per record."""
    return {json.dumps(e["task"], sort_keys=True): e["baseline"] for e in json.loads(TABLE.read_text())["baselines"]}


def tabled_baseline(task: Mapping) -> float:
    """The table's baseline of this exact data config (KeyError if it holds none)."""
    return table()[json.dumps(dict(task), sort_keys=True)]


BASELINES = {"listops_short": tabled_baseline}

