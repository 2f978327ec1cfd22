#!/bin/bash
# Fifth session, first call: suite on HEAD, accessors, ring sizes, ring cases 15-26
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log --oneline -1
OUT=$OUT/gc bash scripts/gpu_check.sh > $OUT/gpu_check.log 2>&1; echo "gpu_check rc $?" >> $OUT/gpu_check.log
python3 scratch/accessors.py > $OUT/accessors.txt 2>&1
python3 scratch/ring_sizes.py > $OUT/ring_sizes.txt 2>&1
python3 benchmarks/tma_ring_variants.py 15 16 17 18 19 20 21 22 23 24 25 26 > $OUT/variants.txt 2>&1
python3 examples/run_all.py > $OUT/run_all.txt 2>&1; echo "run_all rc $?" >> $OUT/run_all.txt
echo ==== SUMMARY ====
tail -6 $OUT/gpu_check.log; cat $OUT/accessors.txt $OUT/ring_sizes.txt $OUT/variants.txt; tail -2 $OUT/run_all.txt
