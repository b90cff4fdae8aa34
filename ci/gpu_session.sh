#!/usr/bin/env bash
# Every GPU measurement of one session in ONE call of at most ~9.5 minutes on one H200 (the lent device's
# time is short): the throughput benchmark first, alone (timings), then, in parallel, each with its own
# hard time limit and log: the gate (suite, campaign, determinism, canaries, recycled memory) on
# triton_jfa and gluon_jfa; compute-sanitizer memcheck and racecheck; the GPU tests (xdist workers, then
# the tests that need most of the card alone, the 2^31-element cases among them); gluon_jfa's campaign and its
# pipeline mutants; the peers' matrix; the perf bisect; the blind catalogue's kill rate. Results go under
# $OUT (default gpu-out) and are packed into $OUT/session.tar.gz; the last lines printed are the summary.
# Carry .whl (allpairspy) with the call: see ci/gpu_env.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out/logs"
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=ci JFA_GPU_SESSION=1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
source ci/gpu_env.sh
gpu_install "$out/logs/install.log" || exit 2
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader | tee "$out/logs/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/logs/gpu.txt"

# 1. Throughput, alone: verified cases per minute for 1 and 8 workers (issue 19).
echo "[$(el) s] bench_verify"
timeout -k 5 110 python3 benchmarks/bench_verify.py --device cuda --workers 1,8 --gpus 0 --seconds 20 --warmup 10 \
  --movielens --out "$out/bench" >"$out/logs/bench_verify.log" 2>&1
echo "bench_verify exit $?" >>"$out/logs/status.txt"

# 2. Everything else in parallel, each bounded.
job() {  # job NAME SECONDS COMMAND...: run in the background with a hard limit; its exit status is recorded
  local name=$1 secs=$2; shift 2
  ( timeout -k 10 "$secs" "$@" >"$out/logs/$name.log" 2>&1; echo "$name exit $?" >>"$out/logs/status.txt" ) &
}
echo "[$(el) s] parallel jobs"
job gate 400 jfa-verify gate --device cuda --kernel triton_jfa --kernel gluon_jfa --seed 0 --campaign-examples 60 \
  --timeout 120 --reproducers "$out/gate-repro" --json "$out/gate.json" --junit "$out/gate.junit.xml" --markdown "$out/gate.md"
job sanitizer 400 jfa-verify gate --device cuda --kernel triton_jfa --kernel gluon_jfa --checks canaries --small-cases 1 \
  --sanitizer memcheck racecheck --timeout 200 --reproducers "$out/san-repro" --json "$out/sanitizer.json" \
  --junit "$out/sanitizer.junit.xml" --markdown "$out/sanitizer.md"
job tests 410 bash -c "
  jfa-verify run --device cuda --plugin tests/quality/mutant_plugin.py --kernel mutant-kv_bound_minus_one \
    --filter tile-edges --no-progress --report $out/planted.json --reproducers $out/planted-repro >$out/logs/planted.log 2>&1
  echo \"planted-bug run exit \$? (want 1)\"
  python3 -m pytest -q -p no:cacheprovider -n 4 --jfa-device cuda -m 'not gpu_exclusive' --junitxml $out/pytest.junit.xml \
    tests/test_triton_jfa.py tests/test_properties.py tests/test_scheduled_kernels.py tests/quality/test_scheduler_bugs.py \
    tests/quality/test_mutants.py tests/test_gate.py 2>&1 | tail -15
  echo \"pytest exit \${PIPESTATUS[0]} (want 0)\"
  python3 -m pytest -q -p no:cacheprovider -p no:xdist --jfa-device cuda -m gpu_exclusive \
    --junitxml $out/pytest-exclusive.junit.xml tests/quality/test_mutants.py tests/test_strategies.py 2>&1 | tail -5
  echo \"exclusive pytest exit \${PIPESTATUS[0]} (want 0; the 2^31-element cases included)\""
job gluon-campaign 300 jfa-verify fuzz --device cuda --kernel gluon_jfa --workers 3 --max-examples 2000 --duration 250 \
  --seed 11 --timeout 90 --reproducers "$out/gluon-repro" --report "$out/gluon-campaign.json" --no-progress
job gluon-mutants 330 env OUT="$out" PARALLEL=2 bash ci/gpu_gluon_mutants.sh
job peers 300 env OUT="$out/peers" BUDGET=240 python3 ci/gpu_peers.py
job bisect 150 env OUT="$out/bisect" python3 ci/gpu_bisect.py
job detection 300 env OUT="$out/detection" STAGES=after SUITE_S=140 CAMPAIGN_S=140 JOBS=4 bash ci/gpu_detection.sh
wait
echo "[$(el) s] done"

tar -czf "$out/session.tar.gz" -C "$out" --exclude session.tar.gz . 2>/dev/null
echo "== status"; sort "$out/logs/status.txt"
echo "== gate"; sed -n '/## jfa-verify gate/,/### /p' "$out/logs/gate.log" | head -20
echo "== sanitizer"; grep -E "sanitizer|memcheck|racecheck" "$out/logs/sanitizer.log" | head -8
echo "== tests"; tail -14 "$out/logs/tests.log"
echo "== bench_verify"; tail -12 "$out/logs/bench_verify.log"
echo "== gluon campaign"; grep -E "^campaign on|finding|cases in" "$out/logs/gluon-campaign.log" | head -6
echo "== gluon mutants"; cat "$out/gluon-mutants/kill-table.md" 2>/dev/null
echo "== peers"; tail -12 "$out/logs/peers.log"
echo "== bisect"; tail -6 "$out/logs/bisect.log"
echo "== detection"; tail -8 "$out/logs/detection.log"
echo "[$(el) s] end"
