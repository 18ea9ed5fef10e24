#!/usr/bin/env bash
# The whole CPU board: `attention-suite board cpu` (suite/board.py reads suite/boards/cpu.yaml).
# It runs every method at the state-bound point, MQAR (64, 16), then each method's smaller states
# there, then every method at the other points, from the one commit named in
# results/train/BOARD_COMMIT (written by the first run: the clean checkout's HEAD) in a git worktree
# (.cache/board/<commit>); a rerun skips every run that has an ok record. Commit the records as they
# come in. BOARD_COMMIT=<rev> starts a board at another commit (the old board's records must go first).
# Extra arguments go to every sweep (e.g. hydra.launcher.n_jobs=1).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m suite board cpu "$@"
