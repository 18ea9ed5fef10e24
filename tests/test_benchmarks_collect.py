"""The benchmarks (README, "Speed on a CPU") are not part of the default run, so a broken import in
them would go unseen until someone times: their collection is checked here."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_benchmarks_collect():
    done = subprocess.run([sys.executable, "-m", "pytest", "benchmarks", "--collect-only", "-q", "-n", "0",
                           "-p", "no:cacheprovider"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "test_board_training_step" in done.stdout
