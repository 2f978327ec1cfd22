export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log --oneline -1; git status --short | head
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
python3 benchmarks/tma_stream.py 1 > $OUT/tma_stream.txt 2>&1
compute-sanitizer --tool memcheck python3 scratch/ring_memcheck.py > $OUT/memcheck.txt 2>&1; echo "memcheck rc $?" >> $OUT/memcheck.txt
python3 -m ptxgen.cli bench copy --variant tma_ring --dtype float32,float16 --scope cta --tile 32x32,16x64,64x64 --size 2GiB > $OUT/bench_ring.txt 2>&1
python3 scratch/launch_probe.py > $OUT/launch_probe.txt 2>&1
python3 examples/run_all.py > $OUT/run_all.txt 2>&1; echo "run_all rc $?" >> $OUT/run_all.txt
echo ==== SUMMARY ====
tail -7 $OUT/gpu_check.log; cat $OUT/tma_stream.txt; tail -4 $OUT/memcheck.txt; tail -12 $OUT/bench_ring.txt; cat $OUT/launch_probe.txt; tail -2 $OUT/run_all.txt
