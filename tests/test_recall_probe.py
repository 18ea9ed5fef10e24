"""scripts/recall_probe.py backs the board's finding on why Hedgehog trails at recall: its measures
are checked here against cases whose answer is known."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scripts.recall_probe import nearest_cosine

REPO = Path(__file__).resolve().parent.parent


def test_nearest_cosine_finds_look_alikes_and_only_them():
    apart = torch.eye(4).unsqueeze(0)  # four slots, orthogonal features
    twins = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]]])  # slots 0 and 1 differ only in scale
    assert torch.equal(nearest_cosine(apart), torch.zeros(1, 4))
    assert torch.allclose(nearest_cosine(twins), torch.tensor([[1.0, 1.0, 0.0]]))


@pytest.mark.slow
def test_the_probe_scores_the_queries_the_run_was_tested_on(tmp_path):
    # The probe re-reads the trained model on the test split: its accuracy over every test query
    # must be the run's own test accuracy, or it is not measuring the model the record describes.
    out = tmp_path / "probe.json"
    subprocess.run([sys.executable, str(REPO / "scripts" / "recall_probe.py"), "--out", str(out), "--label", "linear",
                    "--", "method=linear", "task=mqar", "budget=smoke", "cpu_threads=1",
                    f"results_dir={tmp_path / 'results'}"], check=True, cwd=tmp_path, capture_output=True)
    row = json.loads(out.read_text())["linear"]
    record = json.loads(next((tmp_path / "results").rglob("*.json")).read_text())
    assert row["accuracy"] == record["metrics"]["test_accuracy"]
    assert row["queries"] == 16 * record["config"]["task"]["num_kv_pairs"]  # budget=smoke: 16 test sequences
    assert 0 <= row["top_on_pair"] <= 1 and 0 <= row["alike_slots"] <= 1
    assert row["features"] == record["config"]["model"]["d_model"] // record["config"]["model"]["num_heads"]
