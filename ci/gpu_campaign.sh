#!/usr/bin/env bash
# One H200 call: a triton_jfa fuzz campaign with every worker on one GPU for SECONDS (first argument,
# default 120), live progress into $OUT/campaign.log, ending with its JSON report; then bench_verify
# (verified cases per minute for 1, 4, 8, 16 workers, with the per-case breakdown, and one
# MovieLens-size batch).
#
# Wall time: about SECONDS + 90 s for the campaign (worker start-up, first compiles, final report)
# plus about 230 s for bench_verify (4 worker counts x (10 s warm-up + 25 s + ~20 s start-up)):
# ~7.5 minutes at the default SECONDS=120. Hard limits: the campaign is given SECONDS (--duration)
# and `timeout` kills it at SECONDS + 240 s; bench_verify is killed at 300 s.
# Exit: 0 when the campaign found nothing and the benchmark ran; the campaign's own code (1 finding,
# 3 hang, 4 crash) otherwise, or 5 when the benchmark failed.
#
# A campaign longer than one call (the lent machine's calls end at 10 minutes; issue 19 asks for a 10-minute
# campaign) runs in two calls on one warm machine (the next call must come within its 30 s idle release):
#   MODE=start   ci/gpu_campaign.sh 600   starts the campaign in its own process session (setsid: it outlives the
#                                         call), follows its progress for up to WAIT seconds (default 540) into
#                                         $OUT/campaign.log, and exits 0 while it still runs (10 if it never started)
#   MODE=collect ci/gpu_campaign.sh       waits up to WAIT seconds for it to end, copies its log, report, PNG and
#                                         reproducers to $OUT, then runs bench_verify as above
# The campaign's files live in STATE (default /tmp/jfa-campaign) between the calls.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-120}
workers=${WORKERS:-16}
out=${OUT:-gpu-out}
mode=${MODE:-all}
state=${STATE:-/tmp/jfa-campaign}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
source ci/gpu_env.sh
gpu_install "$out/install.log" || exit 2
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"

campaign() {  # DIR: the campaign, its files in DIR; its exit status in DIR/rc when it ends
  timeout $((secs + 240)) jfa-verify fuzz --device cuda --kernel triton_jfa --workers "$workers" --gpus 0 \
    --duration "$secs" --timeout 120 --seed 1 --reproducers "$1/campaign-repro" --progress-interval 10 \
    --report "$1/campaign.json" --png "$1/campaign.png" >"$1/campaign.log" 2>&1
  echo $? >"$1/rc"
}

follow() {  # WAIT: follow the campaign's log into $out until it ends or WAIT seconds pass; 0 when it ended
  local waited=0
  while [ ! -e "$state/rc" ] && [ "$waited" -lt "${WAIT:-540}" ]; do sleep 5; waited=$((waited + 5)); done
  cp "$state/campaign.log" "$out/campaign.log" 2>/dev/null
  tail -5 "$out/campaign.log" 2>/dev/null
  [ -e "$state/rc" ]
}

case $mode in
  start)
    rm -rf "$state" && mkdir -p "$state"
    echo "campaign (detached): triton_jfa, $workers workers on GPU 0, $secs s; files in $state"
    export -f campaign; export secs workers
    setsid bash -c 'campaign "$0"' "$state" </dev/null >/dev/null 2>&1 &
    sleep 5
    [ -e "$state/campaign.log" ] || { echo "the campaign did not start"; exit 10; }
    if follow; then echo "the campaign already ended (exit $(cat "$state/rc")): run MODE=collect"; else
      echo "the campaign runs on: run MODE=collect within 30 s"; fi
    exit 0 ;;
  collect)
    [ -d "$state" ] || { echo "no campaign in $state: start one with MODE=start (on this same warm machine)"; exit 10; }
    follow || { echo "the campaign has not ended after ${WAIT:-540} s"; exit 11; }
    cp -r "$state"/. "$out"/
    rc_campaign=$(cat "$state/rc")
    tail -40 "$out/campaign.log" ;;
  all)
    mkdir -p "$out"
    echo "campaign: triton_jfa, $workers workers on GPU 0, $secs s"
    campaign "$out"
    rc_campaign=$(cat "$out/rc")
    tail -40 "$out/campaign.log" ;;
  *) echo "MODE=$mode: give start, collect or all (the default)"; exit 2 ;;
esac
python3 - "$out/campaign.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
print(f"campaign: {r['cases']} cases in {r['seconds']:.0f} s = {r['cases_per_minute']:.0f} verified cases/min, "
      f"{len(r['findings'])} finding(s), exit {r['exit_code']}; time split: {r['breakdown_seconds']}")
PY

# BENCH: bench_verify's worker counts and pack sizes (default: 1, 4, 8 and 16 workers, unpacked)
# shellcheck disable=SC2086
timeout 300 python3 benchmarks/bench_verify.py --device cuda ${BENCH:---workers 1,4,8,16} --gpus 0 --seconds 25 \
  --warmup 10 --movielens --out "$out" 2>&1 | tee "$out/bench_verify.log"
rc_bench=${PIPESTATUS[0]}
echo "gpu_campaign: campaign exit $rc_campaign (0: no finding), bench_verify exit $rc_bench (want 0)"
[ "$rc_bench" = 0 ] || exit 5
exit "$rc_campaign"
