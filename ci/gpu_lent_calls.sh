#!/usr/bin/env bash
# The GPU gate and the H200 measurements still owed, in three calls of the lent device (each under its 10-minute
# limit; chain them while the machine is warm: a fresh start has cost from one to nine minutes). Usage, from the
# repository root on the GPU machine: `bash ci/gpu_lent_calls.sh 1`, then 2, then 3. Logs are tarred into $OUT
# (c1.tgz ... c3.tgz, and mxfp8-records.tgz: the MXFP8 calibration samples; fit only the mxfp8 row from them with
# `jfa-verify calibrate --from-records ... --holdout ...`, since the sampler also records unscaled cases).
# Call 1: the gate stage alone (both kernels side by side, the planted-bug run, gluon_jfa's jagged grid), then the
#         stress check per kernel.
# Call 2: the GPU tests stage, beside triton_jfa_mxfp8's default suite and then MXFP8 calibration samples.
# Call 3: the backward stage (2^31 elements), then the big stage with the time left.
# Call 4: timings: the main job from a cold Triton cache and warm; bench_e2e (bf16, D=128).
set -uo pipefail
cd "$(dirname "$0")/.."
call=${1:?give the call: 1, 2 or 3}
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
L=/tmp/c$call; mkdir -p $L
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=ci TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/tcache}
source ci/gpu_env.sh; gpu_install $L/install.log || { cat $L/install.log; exit 2; }
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
if [ "$call" = 1 ]; then
  # The gate stage alone (side by side with the tests stage it ran a float64 reference out of the card's memory
  # and past the call's limit, 2026-12-05), then the stress check per kernel in the time left.
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
  ( GATE_EXAMPLES=100 WORKERS=5 STAGES=gate OUT=$L/g timeout -k 5 520 bash ci/gpu_run.sh >$L/gate-stage.log 2>&1
    echo "gate-stage exit $? at $(el) s" >>$L/status.txt )
  for k in triton_jfa gluon_jfa; do
    left=$(( (560 - $(el)) / 2 )); [ "$k" = gluon_jfa ] && left=$(( 560 - $(el) ))
    [ $left -gt 30 ] || { echo "stress $k not run: no time left" >>$L/status.txt; continue; }
    timeout -k 5 $left jfa-verify stress --device cuda --kernel $k --seed 0 --reruns 50 --timeout 120 \
      --json $L/stress-$k.json >$L/stress-$k.log 2>&1; echo "stress $k exit $? at $(el) s" >>$L/status.txt
  done
  cat $L/status.txt
  echo "== gate stage"; grep -vE "^\s*$" $L/gate-stage.log | tail -45
  echo "== stress"; tail -5 $L/stress-triton_jfa.log; tail -5 $L/stress-gluon_jfa.log
elif [ "$call" = 2 ]; then
  # The GPU tests stage beside triton_jfa_mxfp8's default suite, then MXFP8 calibration samples (H200 only: the
  # calibration table is the H200's).
  ( STAGES=tests TEST_WORKERS=10 OUT=$L/t timeout -k 5 480 bash ci/gpu_run.sh tests/test_peers_gpu.py \
      >$L/tests-stage.log 2>&1
    echo "tests-stage exit $? at $(el) s" >>$L/status.txt ) &
  ( timeout -k 5 200 jfa-verify run --device cuda --kernel triton_jfa_mxfp8 --no-progress --jobs 3 \
      --report $L/mxfp8-run.json --reproducers $L/mxfp8-repro >$L/mxfp8-run.log 2>&1
    echo "mxfp8 run exit $? at $(el) s" >>$L/status.txt
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      left=$(( 540 - $(el) ))
      KINDS="triton_jfa_mxfp8:float8_e4m3fn" OUT=$L/cal DEADLINE=$(( left - 40 )) WORKERS=3 SEED0=3000 \
        timeout -k 5 $left bash ci/gpu_calibrate.sh >$L/calibrate.log 2>&1
      echo "calibrate exit $? at $(el) s" >>$L/status.txt
    else echo "calibrate not run: not an H200" >>$L/status.txt; fi ) &
  wait
  cat $L/status.txt
  echo "== tests stage"; grep -E "^(FAILED|ERROR)|passed|failed|gpu gate" $L/t/pytest.log $L/tests-stage.log | tail -40
  echo "== mxfp8 run"; tail -6 $L/mxfp8-run.log
  echo "== calibrate"; tail -8 $L/calibrate.log 2>/dev/null
  cp $L/cal/records.tgz $OUT/mxfp8-records.tgz 2>/dev/null
elif [ "$call" = 3 ]; then
  # The 2^31-element backward on chunks, then the big stage (each needs most of the card: alone).
  ( STAGES="backward" OUT=$L/b timeout -k 5 300 bash ci/gpu_run.sh >$L/backward-stage.log 2>&1
    echo "backward exit $? at $(el) s" >>$L/status.txt )
  left=$(( 560 - $(el) ))
  [ $left -gt 60 ] && ( STAGES="big" OUT=$L/b timeout -k 5 $left bash ci/gpu_run.sh >$L/big-stage.log 2>&1
    echo "big exit $? at $(el) s" >>$L/status.txt )
  cat $L/status.txt
  echo "== backward"; tail -12 $L/backward-stage.log; echo "== big"; tail -12 $L/big-stage.log 2>/dev/null
elif [ "$call" = 4 ]; then
  # Timings (issues 38, 39): the main job as the README runs it, from a cold Triton cache then warm; the registered
  # kernels called as users call them against FA2 (bf16, D=128). Alone on the machine: timings.
  nvidia-smi --query-gpu=name --format=csv,noheader
  rm -rf /tmp/tcache-cold
  /usr/bin/time -f "cold run wall %e s" env TRITON_CACHE_DIR=/tmp/tcache-cold timeout -k 5 200 jfa-verify run \
    --device cuda --no-progress --report $L/run-cold.json >$L/run-cold.log 2>&1
  echo "cold run exit $? at $(el) s" >>$L/status.txt
  /usr/bin/time -f "warm run wall %e s" env TRITON_CACHE_DIR=/tmp/tcache-cold timeout -k 5 120 jfa-verify run \
    --device cuda --no-progress --report $L/run-warm.json >$L/run-warm.log 2>&1
  echo "warm run exit $? at $(el) s" >>$L/status.txt
  left=$(( 560 - $(el) ))
  [ $left -gt 60 ] && { timeout -k 5 $left python3 benchmarks/bench_e2e.py --kernels gluon_jfa,triton_jfa,torch_fa2_varlen \
      --dtypes bf16 --head-dims 128 --json $L/e2e.json >$L/e2e.log 2>&1; echo "bench_e2e exit $? at $(el) s" >>$L/status.txt; }
  cat $L/status.txt
  echo "== runs"; head -2 $L/run-cold.log; tail -4 $L/run-cold.log; tail -3 $L/run-warm.log
  echo "== bench_e2e"; tail -30 $L/e2e.log 2>/dev/null
else
  echo "ci/gpu_lent_calls.sh: call must be 1, 2, 3 or 4, got $call" >&2; exit 2
fi
# (only a few files come back from a lent machine, none deep: one archive per call)
tar czf $OUT/c$call.tgz -C $L --exclude cal/records.tgz . 2>/dev/null; ls -la $OUT
