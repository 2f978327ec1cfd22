# Session 8, call 2: the new array-interface test on one GPU, the 2-GPU file's helpers on one
# GPU (two threads, generated launch, cupy), the runtime GPU tests, one launch benchmark.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 benchmarks/logs/s8/probes/multi_gpu_on_one.py > $OUT/multi_on_one.txt 2>&1; echo "rc $?" >> $OUT/multi_on_one.txt
python3 -m pytest tests/gpu/test_runtime_gpu.py tests/gpu/test_runtime_multi_gpu.py tests/gpu/test_runtime_other_context.py -m gpu -q -rs -p no:cacheprovider > $OUT/runtime_tests.txt 2>&1
python3 benchmarks/launch_overhead.py 2>&1 | tail -3 > $OUT/launch.txt
echo ==== SUMMARY ====
tail -4 $OUT/multi_on_one.txt; tail -3 $OUT/runtime_tests.txt; head -1 $OUT/launch.txt
