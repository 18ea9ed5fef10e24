#!/usr/bin/env bash
# What the long board costs, measured after it, on an idle host (issue 43, items 4 and 6):
#   1. every cell's mode=cost run, one at a time (`attention-suite board long --cost`: the training step
#      at 256 tokens, inference per sequence and its peak memory at 256-4,096; records under
#      results/long/cost/, pinned by results/long/cost/BOARD_COMMIT; resumable);
#   2. the benchmark of the long model's training step at 256, 1,024 and 4,096 tokens against its
#      FLOP-count ratio to softmax's (benchmarks/test_attention_ops.py::test_long_training_step);
#   3. the cells and cost tables as Markdown, through the site's own code (scripts/long_table.py).
# A timing beside another job measures the contention, so it refuses to start while the host is busy
# (a 1-minute load average of 0.5 or more; FORCE=1 starts anyway, and the records keep the load
# averages they ran under). Commit the cost records, and paste the tables into docs/long_board.md.
set -euo pipefail
cd "$(dirname "$0")/.."
load="$(cut -d' ' -f1 /proc/loadavg)"
if [ "${FORCE:-0}" != 1 ] && awk -v l="$load" 'BEGIN { exit !(l >= 0.5) }'; then
  echo "error: the host is busy (1-minute load average $load, expected under 0.5): stop the board and other jobs" \
       "first, or FORCE=1 to time anyway" >&2
  exit 2
fi
python -m suite board long --cost
OMP_NUM_THREADS=1 python -m pytest benchmarks -k long_training_step --benchmark-only --benchmark-enable -n 0 -q
python scripts/long_table.py
