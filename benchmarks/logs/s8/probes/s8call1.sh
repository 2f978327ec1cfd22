# Session 8, call 1: can one GPU show up twice (CUDA_VISIBLE_DEVICES=0,0)?  The 2-GPU test's
# helpers on one GPU, then the GPU suite and benchmarks on this tree.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ nvidia-smi -L
  for v in 0,0 0,1 ""; do
    CUDA_VISIBLE_DEVICES=$v python3 -c "
import os, torch, ptxgen.runtime as rt
print('CUDA_VISIBLE_DEVICES=%r: torch %d, ptxgen %d' % (os.environ.get('CUDA_VISIBLE_DEVICES'), torch.cuda.device_count(), rt.device_count()))" 2>&1 | tail -1
  done; } > $OUT/visible.txt 2>&1
python3 benchmarks/logs/s8/probes/multi_gpu_on_one.py > $OUT/multi_on_one.txt 2>&1; echo "rc $?" >> $OUT/multi_on_one.txt
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
python3 -m pytest tests/gpu/test_runtime_multi_gpu.py -m gpu -q -rs -p no:cacheprovider > $OUT/multi_rs.txt 2>&1
python3 benchmarks/launch_overhead.py 2>&1 | tail -4 > $OUT/launch2.txt
echo ==== SUMMARY ====
cat $OUT/visible.txt; tail -6 $OUT/multi_on_one.txt; tail -4 $OUT/gpu_check.log; tail -2 $OUT/multi_rs.txt
grep -h "checked pg.Kernel" $OUT/gc/bench_launch.log $OUT/launch2.txt
