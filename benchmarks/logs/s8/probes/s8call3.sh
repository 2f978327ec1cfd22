# Session 8, call 3, on the final tree: the GPU suite (skip list kept), examples, cold start.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
grep -E "^SKIPPED|passed|failed" $OUT/gc/gpu_tests.log > $OUT/gpu_summary.txt 2>&1
python3 - $OUT/gc/gpu_junit.xml > $OUT/skips.txt <<'PY'
import collections, sys, xml.etree.ElementTree as ET
c = collections.Counter()
for tc in ET.parse(sys.argv[1]).iter("testcase"):
    for s in tc.iter("skipped"):
        c[(tc.get("classname").rsplit(".", 1)[-1], s.get("message", ""))] += 1
for (f, m), n in sorted(c.items()):
    print(f"SKIPPED {n} {f}: {m}")
PY
python3 examples/run_all.py > $OUT/run_all.txt 2>&1; echo "run_all rc $?" >> $OUT/run_all.txt
python3 benchmarks/cold_start.py > $OUT/cold_start.txt 2>&1
rm -f $OUT/gc/gpu_junit.xml $OUT/gc/gpu.txt
echo ==== SUMMARY ====
tail -4 $OUT/gpu_check.log; tail -2 $OUT/run_all.txt; tail -12 $OUT/skips.txt
grep -h "checked pg.Kernel" $OUT/gc/bench_launch.log
grep -E "import ptxgen|trace|first build|first launch|total" $OUT/cold_start.txt | tail -12
