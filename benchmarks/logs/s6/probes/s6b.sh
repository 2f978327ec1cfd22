export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
for i in 1 2; do python3 benchmarks/launch_overhead.py --n 20000 > $OUT/free_$i.txt 2>&1; done
for i in 1 2; do taskset -c 5 python3 benchmarks/launch_overhead.py --n 20000 > $OUT/pin_$i.txt 2>&1; done
taskset -c 5 python3 benchmarks/logs/s6/probes/launch6.py > $OUT/launch6_pin.txt 2>&1
python3 benchmarks/logs/s6/probes/launch6.py > $OUT/launch6_free.txt 2>&1
echo ==== SUMMARY ====
for f in free_1 free_2 pin_1 pin_2; do echo $f; grep -E "baseline\)|retries|checked pg" $OUT/$f.txt | grep -E "cuda-bindings \(|pg.Kernel|retries|= "; done
grep -E "^(base|ex |call|fast|noop|checks)" $OUT/launch6_pin.txt $OUT/launch6_free.txt
