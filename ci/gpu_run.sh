#!/usr/bin/env bash
# The GPU gate, for a CUDA machine (the lent H200 here; B200 runners in production).
# Installs the package without dependencies (the machine has torch and triton), then runs
# the main job, a planted-bug run that must fail, the kernel, property, scheduler and
# mutation tests on CUDA, the 2^31-element case, and the ALIGNED hints' bit-identity.
# Logs and JSON reports go under ${OUT:-gpu-out}.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$out/install.log" 2>&1 || {
  echo "install failed"; tail -20 "$out/install.log"; exit 2; }
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"

jfa-verify run --device cuda --report "$out/report.json" --reproducers "$out/repro" --no-progress 2>&1 | tee "$out/run.log"
rc_run=${PIPESTATUS[0]}
jfa-verify run --device cuda --plugin tests/quality/mutant_plugin.py --kernel mutant-kv_bound_minus_one \
  --filter tile-edges --no-progress --report "$out/mutant.json" --reproducers "$out/mutant-repro" >"$out/mutant.log" 2>&1
rc_mut=$?
grep -E "^\[FAIL\]|worst at|passed," "$out/mutant.log" | head -12
HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci} python3 -m pytest -q -p no:cacheprovider -n 8 --jfa-device cuda \
  tests/test_triton_jfa.py tests/test_properties.py tests/test_scheduled_kernels.py \
  tests/quality/test_scheduler_bugs.py tests/quality/test_mutants.py "$@" 2>&1 | tee "$out/pytest.log" | tail -15
rc_test=${PIPESTATUS[0]}
python3 ci/gpu_overflow.py "$out" > "$out/overflow.log" 2>&1
rc_ovf=$?
grep "^==" "$out/overflow.log"
# The ALIGNED hints change code generation only: the forward must be bit-identical with and
# without them and under full specialization (speed ratios printed alongside).
python3 benchmarks/bench_specialization.py --json "$out/specialization.json" > "$out/specialization.log" 2>&1
rc_spec=$?
grep -E "speedup|NOT bit" "$out/specialization.log" | head -30
echo "gpu gate: run=$rc_run (want 0) planted-bug run=$rc_mut (want 1) tests=$rc_test (want 0) 2^31 case=$rc_ovf (want 0)" \
  "hints bit-identical=$rc_spec (want 0)"
[ "$rc_run" = 0 ] && [ "$rc_mut" = 1 ] && [ "$rc_test" = 0 ] && [ "$rc_ovf" = 0 ] && [ "$rc_spec" = 0 ]
