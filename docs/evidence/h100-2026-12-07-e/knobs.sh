#!/usr/bin/env bash
# dK/dV kernel variants (issue 38): bench_gluon side by side, then Nsight Compute stall reasons.
set -uo pipefail
cd "$(dirname "$0")/.."
L=/tmp/exp; mkdir -p $L
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/tcache}
source ci/gpu_env.sh; gpu_install $L/install.log || { cat $L/install.log; exit 2; }
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -k 5 ${BENCH_S:-330} python3 benchmarks/bench_gluon.py --json $L/bench.json \
  --variant registered:dkdv=zigzag \
  --variant st4:dkdv=zigzag,dkdv_stages=4 \
  --variant split:dkdv=zigzag,kernels=exp/k2_split.py (knobs-split.diff) --variant splitst4:dkdv=zigzag,kernels=exp/k2_split.py,dkdv_stages=4 \
  >$L/bench.log 2>&1
echo "bench exit $? at $(el) s" >>$L/status.txt
M='regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,regex:sm__pipe_tensor.*cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum'
for v in shipped:0; do
  p=${v%%:*}; s=${v##*:}
  echo "=== $v" >>$L/ncu.log
  timeout -k 5 100 ncu --clock-control none --kernel-name regex:"_bwd_dkdv_kernel" --launch-skip 1 --launch-count 1 --metrics "$M" \
    python3 exp/ncu_variant.py $p uniform-32 0 $s >>$L/ncu.log 2>&1
  echo "ncu $v exit $? at $(el) s" >>$L/status.txt
done
# per-instruction stall samples of the shipped dK/dV kernel (SASS with its source lines), for reading offline
timeout -k 5 120 ncu --clock-control none --kernel-name regex:"_bwd_dkdv_kernel" --launch-skip 1 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --import-source yes -o $L/dkdv python3 exp/ncu_variant.py shipped \
  uniform-32 0 0 >$L/ncu-src.log 2>&1 && ncu -i $L/dkdv.ncu-rep --page source --print-source sass,cuda --csv \
  >$L/dkdv-source.csv 2>>$L/ncu-src.log
echo "ncu source exit $? at $(el) s" >>$L/status.txt; gzip -f $L/dkdv-source.csv
cat $L/status.txt
grep -v "^done in" $L/bench.log | sed 's/+plan[^)]*)//g' | cut -c1-400
grep -E "^===|stalled|tensor|duration|throughput" $L/ncu.log | awk '{ if ($NF+0 > 0.5 || $1 ~ /===/ || /duration|tensor|throughput/) print }' | cut -c1-120
tar czf $OUT/exp.tgz -C $L . ; ls -la $OUT
