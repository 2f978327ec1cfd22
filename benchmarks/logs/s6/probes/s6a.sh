export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; lscpu | grep -E "Model name|MHz" | head -3
python3 benchmarks/logs/s6/probes/launch6.py > $OUT/launch6.txt 2>&1
for i in 1 2; do python3 benchmarks/launch_overhead.py --n 20000 > $OUT/launch_$i.txt 2>&1; done
python3 benchmarks/cold_start.py > $OUT/cold_start.txt 2>&1
echo ==== SUMMARY ====
cat $OUT/launch6.txt; tail -3 $OUT/launch_1.txt $OUT/launch_2.txt; tail -12 $OUT/cold_start.txt
