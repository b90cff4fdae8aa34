#!/usr/bin/env bash
# A/B of the outputs' allocation (issue 38): bench_e2e (the public call, host work included; bf16, D=128, H=8, the
# four batches, causal and not) on the commit before (gpu-old/: whole outputs filled) and this one (gpu-src/: only
# the rows before offsets[0] set, on the device), old / new / old / new on one machine, one Triton cache.
# Usage on the GPU machine, from the directory holding both trees: bash gpu-src/docs/.../ab_unsequenced.sh
set -uo pipefail
OUT=${OUT:-ab-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache-ab
root=$PWD
t0=$(date +%s)
for run in old new old2 new2; do
  tree=gpu-src; case $run in old*) tree=gpu-old;; esac
  left=$(( ${AB_S:-560} - ($(date +%s) - t0) ))
  [ $left -lt 60 ] && { echo "$run: not run ($left s left)"; continue; }
  (cd "$root/$tree" && source ci/gpu_env.sh && gpu_install "$OUT/install-$run.log" >/dev/null \
    && timeout -k 5 $(( left < 170 ? left : 170 )) python3 benchmarks/bench_e2e.py --kernels gluon_jfa,triton_jfa \
      --dtypes bf16 --head-dims 128 --json "$OUT/e2e-$run.json" >"$OUT/e2e-$run.log" 2>&1)
  echo "$run ($tree) exit $? at $(( $(date +%s) - t0 )) s"
done
for run in old new old2 new2; do echo "== $run"; grep -E "^(pareto|one-mega|movielens|uniform)" "$OUT/e2e-$run.log" 2>/dev/null; done
