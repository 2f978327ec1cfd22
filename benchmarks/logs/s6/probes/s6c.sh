export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 benchmarks/logs/s6/probes/other_ctx.py > $OUT/other_ctx.txt 2>&1; echo "other_ctx rc $?" >> $OUT/other_ctx.txt
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
python3 examples/run_all.py > $OUT/run_all.txt 2>&1; echo "run_all rc $?" >> $OUT/run_all.txt
echo ==== SUMMARY ====
cat $OUT/other_ctx.txt; tail -8 $OUT/gpu_check.log; tail -4 $OUT/gc/bench_launch.log; tail -2 $OUT/run_all.txt
