# The last device call, on the final tree: the GPU suite (with its skip list) and benchmarks,
# the examples, cold start.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
python3 -m pytest tests/gpu/test_runtime_multi_gpu.py tests/gpu/test_runtime_other_context.py -m gpu -q -rs -p no:cacheprovider > $OUT/runtime_rs.txt 2>&1
python3 examples/run_all.py > $OUT/run_all.txt 2>&1; echo "run_all rc $?" >> $OUT/run_all.txt
python3 benchmarks/cold_start.py > $OUT/cold_start.txt 2>&1
python3 --version > $OUT/python.txt 2>&1
echo ==== SUMMARY ====
cat $OUT/python.txt; tail -4 $OUT/gpu_check.log; tail -2 $OUT/run_all.txt; tail -3 $OUT/runtime_rs.txt
grep -h "checked pg.Kernel" $OUT/gc/bench_launch.log
grep -E "import ptxgen|trace|first build|first launch" $OUT/cold_start.txt
