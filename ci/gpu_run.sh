#!/usr/bin/env bash
# The GPU gate, for a CUDA machine (the lent H200 here; B200 runners in production).
# Installs the package without dependencies (the machine has torch and Triton), then runs
# `jfa-verify gate` on triton_jfa and gluon_jfa, one gate per kernel at the same time (suite, campaign,
# determinism, canaries, recycled memory, compute-sanitizer memcheck + racecheck), a planted-bug run that must fail,
# the stress check per kernel (STRESS_RERUNS reruns of each long case, default 200), the GPU tests
# (pytest-xdist workers for the ordinary ones, the ones needing most of the card alone: the 2^31-element
# cases, where triton_jfa must pass and its int32-overflow mutant must die), and the ALIGNED hints'
# bit-identity. Logs and reports go under ${OUT:-gpu-out}.
# GATE_KERNELS (default "triton_jfa gluon_jfa") picks the gated kernels; GATE_EXAMPLES (default 200) sizes the gate's campaign; WORKERS (default 8) the gate's --jobs; TEST_WORKERS
# (default 12 of the H200 machine's 16 cores: the tests mostly wait on Triton compiling) the pytest workers. STAGES (default "gate planted stress tests big backward") runs parts, so that each fits a 10-minute job (H200,
# cold Triton cache, 2026-12-01): "gate" (the gates, about 4 minutes with both gates side by side), "planted" (the
# planted-bug run that must fail, gluon_jfa's jagged grid), "tests"
# (the GPU tests on xdist workers: 126 tests took 326 s on 2026-12-01; 138 were not done in 400 s at 4ff987f), "big" (the tests that need most of the card, alone,
# about 4 minutes; the hints' bit-identity), "stress" (jfa-verify stress on each kernel, one after the other: a stage of
# its own so that the gate stage keeps its measured time), "backward" (the 2^31-element backward judged on chunks, alone: triton_jfa
# must pass, its int32 dK/dV key-row mutant must die). Green is every stage green on one commit.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}
source ci/gpu_env.sh
gpu_install "$out/install.log" || exit 2
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
stages=" ${STAGES:-gate planted stress tests big backward} "
rc_gate=0 rc_mut=1 rc_grid=0 rc_test=0 rc_excl=0 rc_spec=0 rc_bwd=0 rc_stress=0
tests=(tests/test_triton_jfa.py tests/test_properties.py tests/test_scheduled_kernels.py
       tests/quality/test_scheduler_bugs.py tests/quality/test_mutants.py tests/test_gate.py tests/test_counter_normals.py
       tests/test_kernels_gpu.py tests/test_device_planned_calls.py tests/test_native_kit.py tests/test_stress.py
       tests/test_mxfp8.py tests/test_fp8.py tests/test_oracles.py)
# The tests that need most of the card, each in a process of its own: torch's caching allocator keeps what one test
# freed, so the next test in the same process, or a child it starts, ran out of the H200's memory (2026-12-05).
# Usage: exclusive K_EXPR LOG_PREFIX FILE...; returns 1 if any test failed or none was collected.
exclusive() {
  local expr=$1 prefix=$2; shift 2
  local ids rc=0 n=0
  ids=$(python3 -m pytest -q -p no:cacheprovider -p no:xdist --jfa-device cuda -m gpu_exclusive -k "$expr" \
    --collect-only "$@" 2>/dev/null | grep "::")
  : >"$prefix.log"
  for id in $ids; do
    n=$((n + 1))
    python3 -m pytest -q -p no:cacheprovider -p no:xdist --jfa-device cuda -rfE --tb=short \
      --junitxml "$prefix-$n.junit.xml" "$id" >>"$prefix.log" 2>&1 || rc=1
    tail -1 "$prefix.log" | sed "s|^|$id: |"
  done
  [ "$n" -gt 0 ] || { echo "no gpu_exclusive test matched -k '$expr'"; rc=1; }
  return $rc
}
if [[ $stages == *" gate "* ]]; then

# one gate per kernel, side by side (as a CI matrix would run them): each checks numbers, not speed
pids=()
# GATE_CHECKS splits a kernel's gate over calls (one call runs "suite campaign" with no sanitizer, the next the
# rest): default every check of the gate; GATE_SANITIZERS (default "memcheck racecheck"; empty for none).
checks=(); [ -n "${GATE_CHECKS:-}" ] && read -r -a checks <<<"--checks $GATE_CHECKS"
sanitizers=(); read -r -a sanitizers <<<"${GATE_SANITIZERS-memcheck racecheck}"
[ ${#sanitizers[@]} -gt 0 ] && sanitizers=(--sanitizer "${sanitizers[@]}")
for k in ${GATE_KERNELS:-triton_jfa gluon_jfa}; do
  jfa-verify gate --device cuda --kernel "$k" --seed 0 ${checks[@]+"${checks[@]}"} ${sanitizers[@]+"${sanitizers[@]}"} \
    --campaign-examples "${GATE_EXAMPLES:-200}" --timeout 300 --jobs "${WORKERS:-8}" \
    --reproducers "$out/repro" --json "$out/gate-$k.json" --junit "$out/gate-$k.junit.xml" \
    --markdown "$out/gate-$k.md" >"$out/gate-$k.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || rc_gate=$?; done
for k in ${GATE_KERNELS:-triton_jfa gluon_jfa}; do sed -n '/## jfa-verify gate/,$p' "$out/gate-$k.log" | head -40; done
fi
if [[ $stages == *" planted "* ]]; then
jfa-verify run --device cuda --plugin tests/quality/mutant_plugin.py --kernel mutant-kv_bound_minus_one \
  --filter tile-edges --no-progress --report "$out/mutant.json" --reproducers "$out/mutant-repro" >"$out/mutant.log" 2>&1
rc_mut=$?
grep -E "^\[FAIL\]|worst at|passed," "$out/mutant.log" | head -8
# gluon_jfa on the jagged grid (tile-boundary lengths at its own tiles, empties, cross, broadcast-Q, MovieLens, ...)
if [[ " ${GATE_KERNELS:-gluon_jfa} " == *" gluon_jfa "* ]]; then
  jfa-verify run --device cuda --kernel gluon_jfa --suite jagged-grid --no-progress --jobs "${WORKERS:-8}" \
    --report "$out/jagged-grid-gluon_jfa.json" --reproducers "$out/grid-repro" >"$out/jagged-grid-gluon_jfa.log" 2>&1
  rc_grid=$?
  tail -3 "$out/jagged-grid-gluon_jfa.log"
fi
fi
if [[ $stages == *" stress "* ]]; then
for k in ${GATE_KERNELS:-triton_jfa gluon_jfa}; do
  jfa-verify stress --device cuda --kernel "$k" --seed 0 --reruns "${STRESS_RERUNS:-200}" --json "$out/stress-$k.json" \
    >"$out/stress-$k.log" 2>&1 || rc_stress=$?
  tail -5 "$out/stress-$k.log"
done
fi
if [[ $stages == *" tests "* ]]; then
# A few tests take minutes on the GPU (a mutant's targeted cases, the gate's crash and hang runs): work stealing
# keeps them from waiting in one worker's queue behind others (xdist >= 3.2); --durations says which they are.
dist=$(python3 -c "import xdist, sys; v = tuple(map(int, xdist.__version__.split('.')[:2])); print('worksteal' if v >= (3, 2) else 'load')")
python3 -m pytest -p no:cacheprovider -n "${TEST_WORKERS:-12}" --dist "$dist" --durations 15 --jfa-device cuda \
  -m "not gpu_exclusive" -rfE --tb=short -o console_output_style=classic -v --junitxml "$out/pytest.junit.xml" "${tests[@]}" "$@" 2>&1 \
  | tee "$out/pytest.log" | grep -E "^(FAILED|ERROR)|passed|failed|^[0-9.]+s (call|setup)"
rc_test=${PIPESTATUS[0]}
fi
if [[ $stages == *" big "* ]]; then
exclusive "not backward" "$out/pytest-exclusive" "${tests[@]}" tests/test_strategies.py
rc_excl=$?
# The ALIGNED hints change code generation only: the forward must be bit-identical with and
# without them and under full specialization (speed ratios printed alongside).
python3 benchmarks/bench_specialization.py --json "$out/specialization.json" > "$out/specialization.log" 2>&1
rc_spec=$?
grep -E "speedup|NOT bit" "$out/specialization.log" | head -30
fi
if [[ $stages == *" backward "* ]]; then
exclusive backward "$out/pytest-backward" tests/test_strategies.py tests/test_chunked_reference.py
rc_bwd=$?
fi
echo "gpu gate (stages:$stages): gate=$rc_gate (want 0) planted-bug run=$rc_mut (want 1) jagged grid=$rc_grid (want 0)" \
  "tests=$rc_test (want 0)" \
  "exclusive tests (2^31 cases included)=$rc_excl (want 0) hints bit-identical=$rc_spec (want 0)" \
  "2^31 backward on chunks=$rc_bwd (want 0) stress=$rc_stress (want 0)"
[ "$rc_gate" = 0 ] && [ "$rc_mut" = 1 ] && [ "$rc_grid" = 0 ] && [ "$rc_test" = 0 ] && [ "$rc_excl" = 0 ] && [ "$rc_spec" = 0 ] \
  && [ "$rc_bwd" = 0 ] && [ "$rc_stress" = 0 ]
