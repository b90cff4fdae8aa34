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
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-120}
workers=${WORKERS:-16}
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
source ci/gpu_env.sh
gpu_install "$out/install.log" || exit 2
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"

echo "campaign: triton_jfa, $workers workers on GPU 0, $secs s"
timeout $((secs + 240)) jfa-verify fuzz --device cuda --kernel triton_jfa --workers "$workers" --gpus 0 \
  --duration "$secs" --timeout 120 --seed 1 --reproducers "$out/campaign-repro" --progress-interval 10 \
  --report "$out/campaign.json" --png "$out/campaign.png" 2>&1 | tee "$out/campaign.log" | tail -40
rc_campaign=${PIPESTATUS[0]}
python3 - "$out/campaign.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
print(f"campaign: {r['cases']} cases in {r['seconds']:.0f} s = {r['cases_per_minute']:.0f} verified cases/min, "
      f"{len(r['findings'])} finding(s), exit {r['exit_code']}; time split: {r['breakdown_seconds']}")
PY

timeout 300 python3 benchmarks/bench_verify.py --device cuda --workers 1,4,8,16 --gpus 0 --seconds 25 --warmup 10 \
  --movielens --out "$out" 2>&1 | tee "$out/bench_verify.log"
rc_bench=${PIPESTATUS[0]}
echo "gpu_campaign: campaign exit $rc_campaign (0: no finding), bench_verify exit $rc_bench (want 0)"
[ "$rc_bench" = 0 ] || exit 5
exit "$rc_campaign"
