export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 benchmarks/tma_ring_variants.py 27 28 29 30 31 32 33 34 35 > $OUT/variants2.txt 2>&1
LH=evict_last SH=evict_first python3 scratch/ring_sizes.py > $OUT/ring_sizes_hint.txt 2>&1
echo ==== SUMMARY ====; cat $OUT/variants2.txt $OUT/ring_sizes_hint.txt
