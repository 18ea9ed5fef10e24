"""Adding a method is its folder: a toy method, written into a copy of the project (methods/toy/,
nothing else: its config is made from its class), gets an ok record from every mode. So no mode may
name the methods it knows (DESIGN.md: what the harness measures, the method declares)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suite import modes, record_store

REPO = Path(__file__).resolve().parents[1]

TOY = '''"""A toy method for the test: attention from the feature map sigmoid(x), naive path only."""

import torch

from methods._featuremap.module import FeatureMapAttention
from methods.registry import register


@register
class ToyAttention(FeatureMapAttention):
    name = "toy"
    impls = ("naive",)
    cpu_default = "naive"

    @property
    def num_features(self):
        return self.head_dim

    def feature_map(self, x, kind):
        self.check_kind(kind)
        return torch.sigmoid(x.float())
'''


@pytest.fixture(scope="module")
def project_with_toy(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("project")
    for part in ("suite", "methods", "tasks"):  # suite/ holds conf/ and the site's files
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__", "_build"))
    (copy / "methods" / "toy").mkdir()
    (copy / "methods" / "toy" / "__init__.py").write_text(TOY)
    return copy


@pytest.mark.parametrize("mode", modes.available())
def test_a_new_method_gets_an_ok_record_from_every_mode(project_with_toy, data_dir, tmp_path, mode):
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(project_with_toy), "SUITE_DATA_DIR": str(data_dir),
           "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}
    done = subprocess.run([sys.executable, "-m", "suite", "method=toy", f"mode={mode}", "budget=smoke",
                           f"results_dir={results}"], cwd=project_with_toy, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    [path] = results.rglob("*.json")
    record = record_store.read_record(path)
    assert record["kind"] == mode and record["status"] == "ok", record["error"]
    assert record["method"]["name"] == "toy" and record["method"]["resolved"]
