#!/usr/bin/env bash
# The whole CPU board, every preset it publishes, two one-thread jobs at a time (2 cores):
#   leaderboard_cpu    every method at its default state at the state-bound point, MQAR (64, 16)
#   recall_state_cpu   each method at two smaller states there
#   leaderboard_cpu    every method at every other board point (MQAR with 4 and 8 pairs; ListOps short)
# in that order, so that the state-bound point, the board's main finding, is complete first.
# Every record of one board comes from one commit, with no uncommitted change: the commit named in
# results/train/BOARD_COMMIT, written by the first run (the checkout's HEAD, which must be clean).
# The sweep runs in a git worktree of that commit (.cache/board/<commit>), so the checkout may move
# on while the board runs, and a later session resumes it with the same code: a rerun skips every
# run that has an ok record under results/. Commit the records as they come in.
# BOARD_COMMIT=<rev> starts a board at another commit; the old board's records must go first.
# Extra arguments go to every sweep (e.g. hydra.launcher.n_jobs=1).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
pin="$repo/results/train/BOARD_COMMIT"
pinned=$([ -f "$pin" ] && cat "$pin" || true)
if [ -n "${BOARD_COMMIT:-}" ]; then
  commit=$(git -C "$repo" rev-parse --verify "$BOARD_COMMIT^{commit}")
  if [ -n "$pinned" ] && [ "$pinned" != "$commit" ]; then
    echo "board_cpu.sh: results/ holds a board from commit $pinned; remove its records (and $pin) to start one at $commit" >&2
    exit 2
  fi
elif [ -n "$pinned" ]; then
  commit=$pinned
else
  if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
    echo "board_cpu.sh: the checkout has uncommitted changes; a board's records come from a clean commit: commit first" >&2
    exit 2
  fi
  commit=$(git -C "$repo" rev-parse HEAD)
fi
mkdir -p "$(dirname "$pin")"
echo "$commit" > "$pin"
tree="$repo/.cache/board/$commit"
[ -d "$tree" ] || git -C "$repo" worktree add --detach "$tree" "$commit" >&2
cd "$tree"
echo "board_cpu.sh: the board's code is commit $commit (worktree $tree); records go to $repo/results" >&2
# A stage's runs that a stage before it ran are skipped (the same configs, ok records).
for stage in "experiment=leaderboard_cpu hydra.sweeper.params.point=cpu_mqar_64x16" \
             "experiment=recall_state_cpu" "experiment=leaderboard_cpu"; do
  # shellcheck disable=SC2086  # a stage is its overrides, split on spaces
  PYTHONPATH="$tree" python -m suite -m $stage hydra/launcher=joblib_local "results_dir=$repo/results" "$@"
done
