#!/usr/bin/env bash
# The committed CPU board, every preset in turn, two one-thread jobs at a time (2 cores):
#   leaderboard_cpu       the board itself: 5 methods x 4 points x 5 runs (lr sweep, then seeds)
#   recall_state_cpu      each method at a second, smaller state at MQAR (64, 4)
#   recall_backbone_cpu   MQAR (64, 4) on the old backbone (no convolution)
#   recall_shortconv_cpu  MQAR (64, 4) with the convolution on q, k, v (flash-linear-attention's layout)
# Resumable: every run that has an ok record under results/ is skipped, so after a stop the same
# command goes on where it was. Extra arguments go to every sweep (e.g. results_dir=/tmp/board).
set -euo pipefail
cd "$(dirname "$0")/.."
for experiment in leaderboard_cpu recall_state_cpu recall_backbone_cpu recall_shortconv_cpu; do
  python -m suite -m "experiment=$experiment" hydra/launcher=joblib_local "$@"
done
