#!/usr/bin/env bash
# A/B of the backward's base-2 LSE computed once by the delta kernel (issue 38): gpu-old/ (HEAD) and gpu-src/ (the
# change): bitwise hashes of every output, bench_gluon; then, if the outputs are bit-identical, gluon_jfa's GPU gate
# on gpu-src (ci/gpu_lent_calls.sh 16), then bench_e2e of gluon_jfa with the time left.
set -uo pipefail
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache-ab
root=$PWD; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for tree in gpu-old gpu-src; do
  (cd "$root/$tree" && source ci/gpu_env.sh && gpu_install "$OUT/install-$tree.log" >/dev/null \
    && timeout -k 5 150 python3 "$root/gpu-src/exp/hash_outputs.py" >"$OUT/hash-$tree.json" 2>"$OUT/hash-$tree.err" \
    && timeout -k 5 150 python3 benchmarks/bench_gluon.py --json "$OUT/bench-$tree.json" >"$OUT/bench-$tree.log" 2>&1)
  echo "$tree exit $? at $(el) s"
done
for tree in gpu-old gpu-src; do echo "== $tree"; grep -E "^(pareto|one-mega|movielens|uniform)" "$OUT/bench-$tree.log"; done
if python3 -c "import json,sys; a=json.load(open('$OUT/hash-gpu-old.json')); b=json.load(open('$OUT/hash-gpu-src.json')); \
sys.exit(0 if a==b and len(a)==8 and 'nan' not in str(a) else 1)"; then
  echo "OUTPUTS BIT-IDENTICAL (8 configurations, O LSE dQ dK dV)"
  (cd "$root/gpu-src" && CALL16_S=${CALL16_S:-300} bash ci/gpu_lent_calls.sh 16)
  left=$(( ${AB_S:-540} - $(el) ))
  [ $left -gt 70 ] && (cd "$root/gpu-src" && source ci/gpu_env.sh && timeout -k 5 $left python3 benchmarks/bench_e2e.py \
    --kernels gluon_jfa --dtypes bf16 --head-dims 128 --json "$OUT/e2e-new.json" >"$OUT/e2e-new.log" 2>&1; \
    echo "bench_e2e exit $? at $(el) s"; grep -E "^(pareto|one-mega|movielens|uniform)" "$OUT/e2e-new.log")
else
  echo "OUTPUTS DIFFER or missing"; head -c 1500 "$OUT/hash-gpu-old.json"; head -c 1500 "$OUT/hash-gpu-src.json"
  tail -5 "$OUT/hash-gpu-src.err"
fi
