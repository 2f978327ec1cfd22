# The session's final device call: the GPU suite and benchmarks, the examples, the amended
# two-thread test's reference on one GPU, two more launch runs, cold start and first_ptx.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
python3 examples/run_all.py > $OUT/run_all.txt 2>&1; echo "run_all rc $?" >> $OUT/run_all.txt
python3 benchmarks/logs/s7/probes/acc_ref.py > $OUT/acc_ref.txt 2>&1
for i in 1 2; do python3 benchmarks/launch_overhead.py --n 20000 > $OUT/launch_$i.txt 2>&1; done
python3 benchmarks/cold_start.py > $OUT/cold_start.txt 2>&1
python3 benchmarks/first_ptx.py 3 add_one tile.warp > $OUT/first_ptx.txt 2>&1
python3 -m pytest tests/gpu -m gpu -q -rs -p no:cacheprovider > $OUT/suite_rs.txt 2>&1
echo ==== SUMMARY ====
tail -4 $OUT/gpu_check.log; grep -E "passed|failed" $OUT/gc/gpu_tests.log | tail -1; tail -2 $OUT/run_all.txt
cat $OUT/acc_ref.txt
grep -h "checked pg.Kernel" $OUT/gc/bench_launch.log $OUT/launch_1.txt $OUT/launch_2.txt
grep -E "import ptxgen|first build|first launch|total" $OUT/cold_start.txt
tail -3 $OUT/first_ptx.txt
grep -E "SKIPPED|passed" $OUT/suite_rs.txt | sed "s/^SKIPPED //" | cut -c1-150
