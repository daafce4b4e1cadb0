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
exec timeout "${GPU_CHECK_TIMEOUT:-900}" "$PY" bench/gpu_check.py "$@"
