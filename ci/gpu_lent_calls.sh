#!/usr/bin/env bash
# The GPU gate on one commit in three calls of the lent device (each under its 10-minute limit; chain them while the
# machine is warm, so that calls 2 and 3 find call 1's Triton cache: a fresh start has cost from one to nine
# minutes), then the timings still owed. Usage, from the repository root on the GPU machine:
# `bash ci/gpu_lent_calls.sh 1`, then 2, then 3. Logs are tarred into $OUT (c1.tgz ... c4.tgz).
# triton_jfa's gate is split over calls 1 and 2 (one gate would not fit a call from a cold cache: 2026-12-05, H100).
# Call 1: triton_jfa's gate checks suite (with its relations) and campaign, beside gluon_jfa's whole gate, the
#         planted-bug run, gluon_jfa's jagged grid and gluon_jfa's stress check.
# Call 2: triton_jfa's remaining gate checks (determinism, canaries, recycled memory, stress, memcheck and
#         racecheck) beside the GPU tests stage.
# Call 3: the backward stage (2^31 elements), the big stage, then with the time left the blind block-sparse and
#         MXFP8 catalogues (issue 41) through `jfa-verify mutants --stage suite` (H200 kill table). CALL_S (default
#         560) is its time in seconds: less where the session's device time is short, so that its logs come back.
# Call 4: timings: the main job from a cold Triton cache and warm; bench_e2e (bf16, D=128).
# Calls 5 and 6: the gluon_jfa race kill table (issue 42), half of the catalogue each.
# Call 7: a short budget's timings (issues 38, 39): triton_jfa's launch configurations swept against FA2
#         (benchmarks/sweep_triton_config.py, its "current" rows are call 4's triton_jfa rows), then the main job
#         from a cold Triton cache and warm.
# Call 8: the main job's timings alone (issue 39): the installed packages byte-compiled first, as installing them
#         with pip leaves them (gpu_bytecode), then cold (fresh Triton and jfa-verify caches), warm twice, warm with
#         torch's cuDNN attention put last, then bench_verify's campaign rate (16 workers, packs of 1 and 8;
#         BENCH_VERIFY=0 leaves it out).
# Call 9: where the main job's time goes (issue 39), after call 8 on the same machine (its caches warm): one worker's
#         cases profiled in-process (benchmarks/profile_case.py), SDPA's cost for new shapes per backend
#         (benchmarks/sdpa_first_calls.py), then the run's parent process under cProfile.
# Call 10: the three blind block-sparse mutants call 3's time did not reach (issue 41), each through `jfa-verify run`.
# Call 11: call 10 beside both kernels' stress stages and tests/test_stress.py on the GPU (a short budget's call).
# Call 12: call 10 (its mutants one at a time), then `jfa-verify run` of both unmutated kernels (CALL12_S seconds in
#          all; a one-call budget).
# Call 13: the block-sparse mutant call 12 did not reach (sparse_dkdv_query_block_rows_by_block_n), alone on the card,
#          then triton_jfa's main job alone (call 12's ran beside the mutant's unfinished run and lost ten cases to
#          out-of-memory errors: the outer timeout of call 10 ended its shell, not the mutant's `jfa-verify run`).
# Call 14: call 8 without bench_verify (the main job cold, warm twice, warm without cuDNN), then triton_jfa's main job
#          with 12 workers (its one out-of-memory case of call 13, run again once the other workers are ended), the
#          GPU tests that failed in call 2 of 2026-12-07 and test_device.py, then bench_verify with the time left of
#          CALL14_S (default 540).
# Call 15: where the backward's time goes (issue 38): each kernel's device time in one forward+backward call of
#          gluon_jfa, triton_jfa and FA2 on two batches, then Nsight Compute on gluon_jfa's backward kernels.
# Call 16: a change to gluon_jfa alone: its whole gate, the planted-bug run and stress, beside its GPU tests.
set -uo pipefail
cd "$(dirname "$0")/.."
call=${1:?give the call: 1 to 16}
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
L=/tmp/c$call; mkdir -p $L
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=ci TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/tcache}
source ci/gpu_env.sh; gpu_install $L/install.log || { cat $L/install.log; exit 2; }
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
if [ "$call" = 1 ]; then
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
  ( GATE_KERNELS=triton_jfa GATE_CHECKS="suite campaign" GATE_SANITIZERS="" GATE_EXAMPLES=100 WORKERS=9 STAGES=gate \
      OUT=$L/gt timeout -k 5 560 bash ci/gpu_run.sh >$L/gate-triton.log 2>&1
    echo "triton_jfa gate (suite campaign) exit $? at $(el) s" >>$L/status.txt ) &
  ( GATE_KERNELS=gluon_jfa GATE_EXAMPLES=100 WORKERS=5 STAGES="gate planted stress" \
      OUT=$L/gg timeout -k 5 560 bash ci/gpu_run.sh >$L/gate-gluon.log 2>&1
    echo "gluon_jfa gate, planted, stress exit $? at $(el) s" >>$L/status.txt ) &
  wait
  cat $L/status.txt
  echo "== triton_jfa"; grep -vE "^\s*$" $L/gate-triton.log | tail -25
  echo "== gluon_jfa"; grep -vE "^\s*$" $L/gate-gluon.log | tail -40
elif [ "$call" = 2 ]; then
  ( GATE_KERNELS=triton_jfa GATE_CHECKS="determinism canaries recycled_memory stress" WORKERS=5 STAGES=gate \
      OUT=$L/gt timeout -k 5 540 bash ci/gpu_run.sh >$L/gate-triton.log 2>&1
    echo "triton_jfa gate (determinism canaries recycled_memory stress, sanitizers) exit $? at $(el) s" >>$L/status.txt ) &
  ( STAGES=tests TEST_WORKERS=10 OUT=$L/t timeout -k 5 540 bash ci/gpu_run.sh tests/test_peers_gpu.py \
      tests/test_isolation.py::test_a_worker_reports_the_peak_device_memory_of_each_case \
      >$L/tests-stage.log 2>&1
    echo "tests-stage exit $? at $(el) s" >>$L/status.txt ) &
  wait
  cat $L/status.txt
  echo "== triton_jfa"; grep -vE "^\s*$" $L/gate-triton.log | tail -25
  echo "== tests stage"; grep -E "^(FAILED|ERROR)|passed|failed|gpu gate" $L/t/pytest.log $L/tests-stage.log | tail -40
elif [ "$call" = 3 ]; then
  # The 2^31-element backward on chunks, then the big stage (each needs most of the card: alone), then the blind
  # catalogues of issue 41 in the time left.
  ( STAGES="backward" OUT=$L/b timeout -k 5 300 bash ci/gpu_run.sh >$L/backward-stage.log 2>&1
    echo "backward exit $? at $(el) s" >>$L/status.txt )
  left=$(( ${CALL_S:-560} - $(el) ))
  [ $left -gt 60 ] && ( STAGES="big" OUT=$L/b timeout -k 5 $left bash ci/gpu_run.sh >$L/big-stage.log 2>&1
    echo "big exit $? at $(el) s" >>$L/status.txt )
  left=$(( ${CALL_S:-560} + 10 - $(el) ))
  if [ $left -gt 60 ]; then
    for c in mxfp8 sparse; do
      timeout -s INT -k 10 $left jfa-verify mutants --catalogue tests/quality/${c}_blind_set.json --stage suite --device cuda \
        --jobs 8 --json $L/$c-kills.json >$L/$c-kills.log 2>&1 &
    done
    wait; echo "blind catalogues done at $(el) s" >>$L/status.txt
  fi
  cat $L/status.txt
  echo "== backward"; tail -12 $L/backward-stage.log; echo "== big"; tail -12 $L/big-stage.log 2>/dev/null
  echo "== blind catalogues"; tail -16 $L/mxfp8-kills.log $L/sparse-kills.log 2>/dev/null
elif [ "$call" = 5 ] || [ "$call" = 6 ]; then
  # Issue 42's race kill table, half of gluon_jfa_races per call (8 then 7 mutants side by side): each mutant's suite
  # run (values), then its whole race gate (determinism, canaries, recycled memory, stress, racecheck, synccheck,
  # memcheck), every mutant gated (GATE_ALL) so that the table says which check kills what.
  all=$(python3 -c "from jfa_verify.fuzz.mutation import load_catalogue; print(' '.join(load_catalogue('gluon_jfa_races').mutants))")
  if [ "$call" = 5 ]; then part=$(echo $all | cut -d' ' -f1-8); else part=$(echo $all | cut -d' ' -f9-); fi
  MUTANTS="$part" OUT=$L CATALOGUE=gluon_jfa_races RACES=1 GATE_ALL=1 PARALLEL=8 RUN_S=150 GATE_S=380 \
    STRESS_RERUNS=${STRESS_RERUNS:-200} timeout -k 5 575 bash ci/gpu_gluon_mutants.sh >$L/races.log 2>&1
  echo "race kill table part $call exit $? at $(el) s" >>$L/status.txt
  cat $L/status.txt; cat $L/races.log | tail -20
elif [ "$call" = 7 ]; then
  nvidia-smi --query-gpu=name --format=csv,noheader
  timeout -k 5 330 python3 benchmarks/sweep_triton_config.py --json $L/sweep.json >$L/sweep.log 2>&1
  echo "sweep exit $? at $(el) s" >>$L/status.txt
  rm -rf /tmp/tcache-cold
  left=$(( 500 - $(el) ))
  [ $left -gt 40 ] && { /usr/bin/time -f "cold run wall %e s" env TRITON_CACHE_DIR=/tmp/tcache-cold timeout -k 5 $left \
      jfa-verify run --device cuda --no-progress --report $L/run-cold.json >$L/run-cold.log 2>&1
    echo "cold run exit $? at $(el) s" >>$L/status.txt; }
  left=$(( 570 - $(el) ))
  [ $left -gt 20 ] && { /usr/bin/time -f "warm run wall %e s" env TRITON_CACHE_DIR=/tmp/tcache-cold timeout -k 5 $left \
      jfa-verify run --device cuda --no-progress --report $L/run-warm.json >$L/run-warm.log 2>&1
    echo "warm run exit $? at $(el) s" >>$L/status.txt; }
  cat $L/status.txt
  echo "== sweep"; tail -45 $L/sweep.log
  echo "== runs"; head -2 $L/run-cold.log; tail -4 $L/run-cold.log; tail -3 $L/run-warm.log 2>/dev/null
elif [ "$call" = 8 ]; then
  nvidia-smi --query-gpu=name --format=csv,noheader
  gpu_bytecode $L/bytecode.log; tail -1 $L/bytecode.log
  rm -rf /tmp/tcache-cold /tmp/jcache-cold
  export JFA_VERIFY_CACHE=/tmp/jcache-cold
  for run in cold warm warm2; do
    /usr/bin/time -f "$run run wall %e s" env TRITON_CACHE_DIR=/tmp/tcache-cold timeout -k 5 260 jfa-verify run \
      --device cuda --no-progress --report $L/run-$run.json >$L/run-$run.log 2>&1
    echo "$run run exit $? at $(el) s" >>$L/status.txt
  done
  # the same warm run with torch's cuDNN attention put last (torch's own switch): the padded SDPA oracle's cost for
  # shapes new to a worker (benchmarks/sdpa_first_calls.py), measured on the whole job; the verdicts must not change
  /usr/bin/time -f "warm-nocudnn run wall %e s" env TRITON_CACHE_DIR=/tmp/tcache-cold TORCH_CUDNN_SDPA_DEPRIORITIZED=1 \
    timeout -k 5 120 jfa-verify run --device cuda --no-progress --report $L/run-warm-nocudnn.json \
    >$L/run-warm-nocudnn.log 2>&1
  echo "warm-nocudnn run exit $? at $(el) s" >>$L/status.txt
  left=$(( 560 - $(el) ))
  [ $left -gt 100 ] && [ "${BENCH_VERIFY:-1}" != 0 ] && { TRITON_CACHE_DIR=/tmp/tcache-cold timeout -k 5 $left python3 benchmarks/bench_verify.py \
      --device cuda --workers 16 --seconds 30 --warmup 30 --pack 1,8 --out $L >$L/bench-verify.log 2>&1
    echo "bench_verify exit $? at $(el) s" >>$L/status.txt; }
  cat $L/status.txt
  for run in cold warm warm2 warm-nocudnn; do echo "== $run"; grep -E "precompile:|^time:|passed|wall" $L/run-$run.log; done
  python3 -c "import json; p = sorted(c.get('peak_device_mib') or 0 for c in json.load(open('$L/run-warm.json'))['cases'])
print('peak device MiB a case: max', p[-1], 'median', p[len(p) // 2])" 2>&1 | tail -1
  echo "== bench_verify"; tail -25 $L/bench-verify.log 2>/dev/null
elif [ "$call" = 9 ]; then
  export TRITON_CACHE_DIR=/tmp/tcache-cold JFA_VERIFY_CACHE=/tmp/jcache-cold
  timeout -k 5 200 python3 benchmarks/profile_case.py --device cuda --kernel triton_jfa >$L/profile-case.log 2>&1
  echo "profile_case exit $? at $(el) s" >>$L/status.txt
  timeout -k 5 120 python3 benchmarks/sdpa_first_calls.py >$L/sdpa-first-calls.log 2>&1
  echo "sdpa_first_calls exit $? at $(el) s" >>$L/status.txt
  timeout -k 5 200 python3 -m cProfile -s cumulative "$(command -v jfa-verify)" run --device cuda --no-progress \
    --report $L/run-prof.json >$L/run-prof.log 2>&1
  echo "profiled run exit $? at $(el) s" >>$L/status.txt
  cat $L/status.txt
  grep -E "^(imports|suite|warm-up|==)" $L/profile-case.log; cat $L/sdpa-first-calls.log
  python3 -c "import sys, os; print('dont_write_bytecode', sys.dont_write_bytecode, os.environ.get('PYTHONPYCACHEPREFIX'))"
  grep -E "^time:|passed" $L/run-prof.log; grep -A45 "Ordered by" $L/run-prof.log | cut -c1-150
elif [ "$call" = 4 ]; then
  # Timings (issues 38, 39): the main job as the README runs it, from a cold Triton cache then warm; the registered
  # kernels called as users call them against FA2 (bf16, D=128). Alone on the machine: timings.
  nvidia-smi --query-gpu=name --format=csv,noheader
  rm -rf /tmp/tcache-cold
  /usr/bin/time -f "cold run wall %e s" env TRITON_CACHE_DIR=/tmp/tcache-cold timeout -k 5 260 jfa-verify run \
    --device cuda --no-progress --report $L/run-cold.json >$L/run-cold.log 2>&1
  echo "cold run exit $? at $(el) s" >>$L/status.txt
  /usr/bin/time -f "warm run wall %e s" env TRITON_CACHE_DIR=/tmp/tcache-cold timeout -k 5 100 jfa-verify run \
    --device cuda --no-progress --report $L/run-warm.json >$L/run-warm.log 2>&1
  echo "warm run exit $? at $(el) s" >>$L/status.txt
  left=$(( 560 - $(el) ))
  [ $left -gt 60 ] && { timeout -k 5 $left python3 benchmarks/bench_e2e.py --kernels gluon_jfa,triton_jfa,torch_fa2_varlen \
      --dtypes bf16 --head-dims 128 --json $L/e2e.json >$L/e2e.log 2>&1; echo "bench_e2e exit $? at $(el) s" >>$L/status.txt; }
  cat $L/status.txt
  echo "== runs"; head -2 $L/run-cold.log; tail -4 $L/run-cold.log; tail -3 $L/run-warm.log
  echo "== bench_e2e"; tail -30 $L/e2e.log 2>/dev/null
elif [ "$call" = 10 ]; then
  # The three blind block-sparse mutants no GPU has judged (issue 41), each through `jfa-verify run` (the default
  # suite and its relations, as `mutants --stage suite` runs them, but precompiled in parallel and RUN_JOBS case
  # workers: `mutants` runs one case at a time, each compiling its variants at first launch, and on an H100 three at
  # once reached no verdict in 430 s). No gate (GATE_S=0): the suite decides, as in the catalogue's CPU kill table.
  nvidia-smi --query-gpu=name --format=csv,noheader
  t10=${CALL10_S:-500}  # (call 11 runs it in less)
  CATALOGUE=tests/quality/sparse_blind_set.json MUTANTS="sparse_fwd_query_block_by_block_n \
    sparse_fwd_selection_without_sequence_start sparse_dkdv_query_block_rows_by_block_n" PARALLEL=${CALL10_PARALLEL:-3} \
    RUN_JOBS=${CALL10_RUN_JOBS:-4} \
    RUN_S=${CALL10_RUN_S:-$(( t10 - 10 ))} GATE_S=0 OUT=$L timeout -k 5 $t10 bash ci/gpu_gluon_mutants.sh >$L/sparse-left.log 2>&1
  echo "sparse mutants exit $? at $(el) s" >>$L/status.txt
  cat $L/status.txt; cat $L/sparse-left.log
  grep -hE "^precompile:|^time:|passed|failed" $L/sparse_blind_set-mutants/*.run.log | cut -c1-200
elif [ "$call" = 11 ]; then
  # Call 10 beside the stress check of the unmutated kernels (both, 200 reruns: the first GPU run of the
  # short-sequence stress cases) and tests/test_stress.py on the GPU: for a session whose device time has room for
  # two calls only (2026-12-06), with call 6.
  ( GATE_KERNELS=triton_jfa STAGES=stress OUT=$L/st timeout -k 5 470 bash ci/gpu_run.sh >$L/stress-triton.log 2>&1
    echo "triton_jfa stress stage exit $? at $(el) s" >>$L/status.txt ) &
  ( GATE_KERNELS=gluon_jfa STAGES=stress OUT=$L/sg timeout -k 5 470 bash ci/gpu_run.sh >$L/stress-gluon.log 2>&1
    echo "gluon_jfa stress stage exit $? at $(el) s" >>$L/status.txt ) &
  ( timeout -k 5 470 python3 -m pytest -q -p no:cacheprovider -n 3 --jfa-device cuda -m "not gpu_exclusive" -rfE \
      tests/test_stress.py >$L/test-stress.log 2>&1
    echo "tests/test_stress.py on cuda exit $? at $(el) s" >>$L/status.txt ) &
  CALL10_S=470 OUT=$OUT bash "$0" 10 >$L/call10.log 2>&1
  wait
  cat $L/status.txt
  grep -hE "^stress:|fail|hang|^  stress-" $L/st/stress-*.log $L/sg/stress-*.log | head -30
  tail -4 $L/test-stress.log; cat $L/call10.log | grep -v "^total\|^-r\|^d"
  cp -r /tmp/c10 $L/c10 2>/dev/null
elif [ "$call" = 12 ]; then
  # Call 10, then `jfa-verify run` of both unmutated kernels with the time left (the default suite and its relations
  # as a user runs it: the first GPU run of the suite's diagonal-offsets and misaligned-k/v cases, of the peers'
  # copies of rows not 16-byte aligned and of the self-only relation fallback), for a session with device time for
  # one short call (2026-12-06). The mutants run one after another, each with the whole machine for its
  # precompile step: they share the Triton cache of every function they do not patch, and the plain kernel's
  # run after them finds nearly all of its variants built.
  t12=${CALL12_S:-460}
  CALL10_S=$(( t12 * 6 / 10 )) CALL10_RUN_S=$(( t12 * 3 / 10 )) CALL10_PARALLEL=1 CALL10_RUN_JOBS=8 OUT=$OUT \
    bash "$0" 10 >$L/call10.log 2>&1
  left=$(( t12 - $(el) ))
  for k in triton_jfa gluon_jfa; do
    [ $left -gt 30 ] && ( /usr/bin/time -f "$k run wall %e s" timeout -k 5 $left jfa-verify run --device cuda \
        --kernel $k --jobs 6 --no-progress --report $L/run-$k.json --reproducers $L/repro-$k >$L/run-$k.log 2>&1
      echo "$k run exit $? at $(el) s" >>$L/status.txt ) &
  done
  wait
  cat $L/status.txt
  for k in triton_jfa gluon_jfa; do echo "== $k"; head -3 $L/run-$k.log 2>/dev/null | cut -c1-250
    grep -E "^\[(FAIL|ERROR|CRASH|HANG)|^time:|passed|wall" $L/run-$k.log 2>/dev/null | cut -c1-250 | tail -12; done
  grep -v "^total\|^-r\|^d" $L/call10.log
  cp -r /tmp/c10 $L/c10 2>/dev/null
elif [ "$call" = 13 ]; then
  nvidia-smi --query-gpu=name --format=csv,noheader
  CATALOGUE=tests/quality/sparse_blind_set.json MUTANTS=sparse_dkdv_query_block_rows_by_block_n PARALLEL=1 \
    RUN_JOBS=12 RUN_S=${CALL13_RUN_S:-300} GATE_S=0 OUT=$L bash ci/gpu_gluon_mutants.sh >$L/sparse-left.log 2>&1
  echo "sparse mutant exit $? at $(el) s" >>$L/status.txt
  /usr/bin/time -f "triton_jfa run wall %e s" timeout -k 5 ${CALL13_TRITON_S:-200} jfa-verify run --device cuda \
    --kernel triton_jfa --jobs 12 --no-progress --report $L/run-triton_jfa.json --reproducers $L/repro-triton_jfa \
    >$L/run-triton_jfa.log 2>&1
  echo "triton_jfa run exit $? at $(el) s" >>$L/status.txt
  cat $L/status.txt $L/sparse-left.log
  grep -hE "^  precompile:|^time:|passed|failed" $L/sparse_blind_set-mutants/*.run.log | cut -c1-250
  head -3 $L/run-triton_jfa.log | cut -c1-250
  grep -E "^\[(FAIL|ERROR|CRASH|HANG)|^time:|passed|wall" $L/run-triton_jfa.log | cut -c1-250 | tail -12
elif [ "$call" = 14 ]; then
  BENCH_VERIFY=0 OUT=$OUT bash "$0" 8 >$L/call8.log 2>&1
  cp -r /tmp/c8 $L/c8 2>/dev/null
  /usr/bin/time -f "triton_jfa run (12 workers) wall %e s" timeout -k 5 200 jfa-verify run --device cuda \
    --kernel triton_jfa --jobs 12 --no-progress --report $L/run-triton_jfa.json >$L/run-triton_jfa.log 2>&1
  echo "triton_jfa run (12 workers) exit $? at $(el) s" >>$L/status.txt
  timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 3 --jfa-device cuda -rfE --tb=short tests/test_device.py \
    tests/test_gate.py::test_sanitizer_and_perf_say_why_they_are_skipped_or_run_on_cpu \
    tests/test_isolation.py::test_a_worker_reports_the_peak_device_memory_of_each_case >$L/tests.log 2>&1
  echo "GPU tests exit $? at $(el) s" >>$L/status.txt
  left=$(( ${CALL14_S:-540} - $(el) ))
  [ $left -gt 90 ] && { TRITON_CACHE_DIR=/tmp/tcache-cold timeout -k 5 $left python3 benchmarks/bench_verify.py \
      --device cuda --workers 16 --seconds 30 --warmup 30 --pack 1,8 --out $L >$L/bench-verify.log 2>&1
    echo "bench_verify exit $? at $(el) s" >>$L/status.txt; }
  grep -v "^total\|^-r\|^d" $L/call8.log
  cat $L/status.txt
  grep -E "^\[(FAIL|ERROR|CRASH|HANG)|^time:|passed|wall|run again" $L/run-triton_jfa.log | cut -c1-250 | tail -8
  tail -5 $L/tests.log; echo "== bench_verify"; tail -25 $L/bench-verify.log 2>/dev/null
elif [ "$call" = 15 ]; then
  # Where the backward's time goes (issue 38): per-kernel device time of one forward+backward call of gluon_jfa,
  # triton_jfa and FA2 (the torch_fa2_varlen adapter) on uniform-32 and movielens-1024, then Nsight Compute's
  # speed-of-light, warp-stall and launch sections of gluon_jfa's two backward kernels (uniform-32, non-causal).
  nvidia-smi --query-gpu=name --format=csv,noheader
  for b in uniform-32 movielens-1024; do for c in "" --causal; do for k in gluon_jfa triton_jfa torch_fa2_varlen; do
    echo "=== $k $b ${c:-non-causal}" >>$L/profile.log
    timeout -k 5 90 python3 benchmarks/profile_call.py --kernel $k --batch $b $c --backward --calls 5 --top 8 \
      >>$L/profile.log 2>&1 || echo "profile exit $?" >>$L/profile.log
  done; done; done
  echo "profiles at $(el) s" >>$L/status.txt
  timeout -k 5 ${CALL15_NCU_S:-200} ncu --clock-control none --kernel-name regex:"_bwd_(dkdv|dq)_kernel" --launch-skip 2 --launch-count 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section LaunchStats \
    --section Occupancy python3 benchmarks/profile_call.py --kernel gluon_jfa --batch uniform-32 --backward \
    --calls 1 --top 1 >$L/ncu.log 2>&1
  echo "ncu exit $? at $(el) s" >>$L/status.txt
  cat $L/status.txt
  grep -E "^===|Self CUDA time total|_kernel|flash|host " $L/profile.log | cut -c1-160 | head -90
  grep -E "_bwd_|Duration|Throughput|Registers|Stall|Achieved Occ|Executed Ipc|Issue Slots|Theoretical Occ" \
    $L/ncu.log | head -60
elif [ "$call" = 16 ]; then
  # A change to gluon_jfa alone, on a short budget: its whole gate (suite, campaign, determinism, canaries, recycled
  # memory, sanitizers), the planted-bug run and its stress check, beside its GPU tests.
  nvidia-smi --query-gpu=name --format=csv,noheader
  ( GATE_KERNELS=gluon_jfa GATE_EXAMPLES=100 WORKERS=6 STAGES="gate planted stress" \
      OUT=$L/gg timeout -k 5 ${CALL16_S:-400} bash ci/gpu_run.sh >$L/gate-gluon.log 2>&1
    echo "gluon_jfa gate, planted, stress exit $? at $(el) s" >>$L/status.txt ) &
  ( timeout -k 5 ${CALL16_S:-400} python3 -m pytest -q -p no:cacheprovider -n 4 --jfa-device cuda -rfE --tb=short \
      tests/test_kernels_gpu.py tests/test_device_planned_calls.py tests/test_unsequenced.py tests/test_racecheck_sites.py \
      tests/test_gluon_codegen.py >$L/tests.log 2>&1
    echo "gluon GPU tests exit $? at $(el) s" >>$L/status.txt ) &
  wait
  cat $L/status.txt
  echo "== gluon_jfa"; grep -vE "^\s*$" $L/gate-gluon.log | grep -v "racecheck:" | tail -30
  echo "== tests"; tail -6 $L/tests.log
else
  echo "ci/gpu_lent_calls.sh: call must be 1 to 16, got $call" >&2; exit 2
fi
# (only a few files come back from a lent machine, none deep: one archive per call)
tar czf $OUT/c$call.tgz -C $L --exclude cal/records.tgz . 2>/dev/null; ls -la $OUT
