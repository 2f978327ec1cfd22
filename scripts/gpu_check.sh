#!/usr/bin/env bash
# The whole GPU suite on the device machine, then the GPU benchmarks; one-screen summary last.
# Usage: bash scripts/gpu_check.sh [pytest -k expression]
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu_check}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
K=${1:-}
python3 -m pytest tests/gpu -m gpu -q -rfE -p no:cacheprovider ${K:+-k "$K"} \
    --junitxml="$OUT/gpu_junit.xml" 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
rc=${PIPESTATUS[0]}
if [ -z "$K" ]; then
  python3 benchmarks/grid_stride_vs_torch.py 1 4 2>&1 | tee "$OUT/bench_grid_stride.log"
  python3 benchmarks/launch_overhead.py 2>&1 | tail -8 | tee "$OUT/bench_launch.log"
fi
echo "==== summary ===="
cat "$OUT/gpu.txt"
grep -E "passed|failed|error|skipped" "$OUT/gpu_tests.log" | tail -1
[ -z "$K" ] && tail -2 "$OUT/bench_grid_stride.log"
exit $rc
