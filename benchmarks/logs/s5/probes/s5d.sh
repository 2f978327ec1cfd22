export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
python3 benchmarks/tma_stream.py 1 > $OUT/tma_stream.txt 2>&1
python3 benchmarks/launch_overhead.py --n 20000 > $OUT/launch.txt 2>&1
python3 examples/run_all.py > $OUT/run_all.txt 2>&1; echo "run_all rc $?" >> $OUT/run_all.txt
echo ==== SUMMARY ====
tail -6 $OUT/gpu_check.log; tail -2 $OUT/gc/bench_launch.log; cat $OUT/tma_stream.txt; tail -3 $OUT/launch.txt; tail -2 $OUT/run_all.txt
python3 benchmarks/tma_ring_variants.py 36 37 38 39 40 41 42 21 > $OUT/variants3.txt 2>&1
cat $OUT/variants3.txt
