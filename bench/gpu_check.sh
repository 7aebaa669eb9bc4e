#!/usr/bin/env bash
# The GPU checks in one call: the trainer's GPU tests, then the 1B bf16 MFU bench (issue #8). Logs go to $OUT.
# On a machine without this project's dependencies, carry wheels in .whl/ (pydantic and its needs): they are
# installed to /tmp/site first. Extra arguments go to bench/bench_train.py.
#   OUT=/tmp/gpu bash bench/gpu_check.sh [--steps 10]
set -u -o pipefail
status=0
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site || exit 1
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/nvidia-smi.txt"
python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__)"
# both steps run whatever the first gives; the exit status says whether either failed (or ran out of time)
timeout "${TEST_S:-150}" python3 -m pytest -q -p no:cacheprovider tests/midtrain/test_gpu.py 2>&1 \
    | tee "$OUT/gpu_tests.log" || status=1
timeout "${BENCH_S:-270}" python3 bench/bench_train.py --device cuda --model-size 1b "$@" 2>&1 \
    | tee "$OUT/bench_train_1b.log" || status=1
exit $status
