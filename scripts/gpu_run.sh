#!/usr/bin/env bash
# The one-shot GPU run (scripts/gpu_run.py): kernel checks, timings against SDPA and fla, and a
# short bf16 training of every method, in at most 8 minutes on a host lent for minutes.
#
# On a CPU machine with network, build the bundle of wheels the GPU host needs (everything the
# suite imports besides torch and triton, which the host has; Python 3.12, Linux x86_64):
#   scripts/gpu_run.sh --build-wheels wheels/        # pip download + pip wheel, about 150 MB
# Copy the repository and wheels/ to the GPU host (no network there), then:
#   scripts/gpu_run.sh --wheels wheels/              # a venv over the host's torch/triton, filled from wheels/
#   scripts/gpu_run.sh --dry-run                     # the same stages on the CPU, tiny shapes (tested); its
#                                                    # records go under its --out folder, never results/
# Other arguments go to scripts/gpu_run.py (--out, --results-dir, --budget-s).
set -euo pipefail
cd "$(dirname "$0")/.."

# What the suite imports besides torch and triton (pyproject's pins), and fla's kernels.
REQUIREMENTS=(
  "hydra-core==1.3.2" "omegaconf>=2.3,<2.4" "antlr4-python3-runtime==4.9.3" "pyyaml>=6"
  "datasets>=2.19,<6" "huggingface_hub>=0.23,<3" "pyarrow>=12" "pillow>=10,<14" "numpy>=1.24" "tqdm>=4.66"
  "pydantic>=2.7,<3" "typing_extensions>=4.6" "jinja2>=3.1,<4" "altair>=6.3,<7" "vl-convert-python>=1.9,<2"
  "fla-core==0.6.0" "einops"
)
PYTHON="${PYTHON:-python3}"
TARGET_PYTHON="${TARGET_PYTHON:-3.12}"
WHEELS=""
BUILD=""
ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --wheels) WHEELS="$2"; shift 2 ;;
    --build-wheels) BUILD="$2"; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

if [[ -n "$BUILD" ]]; then
  mkdir -p "$BUILD"
  # antlr4-python3-runtime 4.9.3 (hydra's parser) is published as a source archive only: build
  # its pure-Python wheel here; every other package comes as a published wheel for the target.
  "$PYTHON" -m pip wheel --no-deps --wheel-dir "$BUILD" "antlr4-python3-runtime==4.9.3"
  "$PYTHON" -m pip download --dest "$BUILD" --find-links "$BUILD" --only-binary=:all: \
    --python-version "$TARGET_PYTHON" --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 "${REQUIREMENTS[@]}"
  echo "bundle: $BUILD ($(du -sh "$BUILD" | cut -f1)); on the GPU host: scripts/gpu_run.sh --wheels $BUILD"
  exit 0
fi

if [[ -n "$WHEELS" ]]; then
  # The host's torch and triton stay as they are (system site packages); the rest comes from the
  # bundle only, never from an index.
  "$PYTHON" -m venv --system-site-packages .cache/gpu_venv
  PYTHON=.cache/gpu_venv/bin/python
  "$PYTHON" -m pip install --no-index --find-links "$WHEELS" "${REQUIREMENTS[@]}"
fi
exec "$PYTHON" scripts/gpu_run.py ${ARGS[@]+"${ARGS[@]}"}
