export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
python3 examples/run_all.py > $OUT/run_all.txt 2>&1; echo "run_all rc $?" >> $OUT/run_all.txt
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_runtime_other_context.py -rs > $OUT/other_ctx_test.txt 2>&1
for i in 1 2; do python3 benchmarks/launch_overhead.py --n 20000 > $OUT/launch_$i.txt 2>&1; done
python3 benchmarks/logs/s6/probes/launch7.py > $OUT/launch7.txt 2>&1
python3 benchmarks/cold_start.py > $OUT/cold_start.txt 2>&1
echo ==== SUMMARY ====
tail -4 $OUT/gpu_check.log; grep -c PASSED $OUT/gc/gpu_tests.log; tail -2 $OUT/other_ctx_test.txt; tail -2 $OUT/run_all.txt
grep -h "checked pg.Kernel" $OUT/gc/bench_launch.log $OUT/launch_1.txt $OUT/launch_2.txt
grep -E "import ptxgen|first build|first launch|total" $OUT/cold_start.txt
cat $OUT/launch7.txt
