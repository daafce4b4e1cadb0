#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: runs the GPU tests (pytest -m gpu) and the
# GPU benchmarks from this source tree, and writes bench/results/gpu-check-<device>.md, whose
# header names the commit it verified (read by .ci/gpu_verification.py).
#
#   bash bench/gpu_check.sh            # full run (about 10 minutes)
#   bash bench/gpu_check.sh --quick    # small sizes (about 2 minutes)
#
# Needs what the GPU machines already have (CuPy, numba, scikit-learn, SciPy; PyTorch
# optional), no network and no install: gpurpo is imported from this checkout.
set -u
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# the outer limit leaves 300 s beyond the run's --budget (600 s by default) for the report
BUDGET=600
ARGS=("$@")
for ((i = 0; i < ${#ARGS[@]}; i++)); do
  case "${ARGS[i]}" in
    --budget) BUDGET="${ARGS[i + 1]:-600}" ;;
    --budget=*) BUDGET="${ARGS[i]#--budget=}" ;;
  esac
done
LIMIT="${GPU_CHECK_TIMEOUT:-$(( ${BUDGET%.*} + 300 ))}"
exec timeout "$LIMIT" "$PY" bench/gpu_check.py "$@"
