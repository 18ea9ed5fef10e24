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
    assert "test_board_training_step" in done.stdout and "test_long_training_step" in done.stdout


def test_the_long_step_goal_compares_time_and_flop_ratios_to_softmax_at_the_goal_lengths():
    from benchmarks.goals import long_step_lines

    steps = {("softmax", 256): 1.0, ("linear", 256): 3.0, ("softmax", 1024): 2.0, ("linear", 1024): 1.0,
             ("favor", 1024): 2.0}
    flops = {("softmax", 256): 1.0, ("linear", 256): 1.0, ("softmax", 1024): 4.0, ("linear", 1024): 2.0,
             ("favor", 1024): 2.0}
    assert long_step_lines(steps, flops) == [
        "long step linear N=256: 3.00x softmax (SDPA), its FLOPs allow 1.00x",  # no goal at 256
        "long step favor N=1024: 1.00x softmax (SDPA), its FLOPs allow 0.50x (NOT within 1.25x of it: goal)",
        "long step linear N=1024: 0.50x softmax (SDPA), its FLOPs allow 0.50x (within 1.25x of it: goal)"]
