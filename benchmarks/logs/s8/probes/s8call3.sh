# Session 8, call 3, on the final tree: the GPU suite (skip list kept), examples, cold start.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
grep -E "^SKIPPED|passed|failed" $OUT/gc/gpu_tests.log > $OUT/gpu_summary.txt 2>&1
python3 -m pytest tests/gpu -m gpu -q -rs -p no:cacheprovider 2>&1 | grep -E "^SKIPPED|passed|failed" > $OUT/skips.txt
python3 examples/run_all.py > $OUT/run_all.txt 2>&1; echo "run_all rc $?" >> $OUT/run_all.txt
python3 benchmarks/cold_start.py > $OUT/cold_start.txt 2>&1
rm -f $OUT/gc/gpu_junit.xml
echo ==== SUMMARY ====
tail -4 $OUT/gpu_check.log; tail -2 $OUT/run_all.txt; tail -12 $OUT/skips.txt
grep -h "checked pg.Kernel" $OUT/gc/bench_launch.log
grep -E "import ptxgen|trace|first build|first launch|total" $OUT/cold_start.txt | tail -12
