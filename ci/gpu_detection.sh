#!/usr/bin/env bash
# Detection power of the default suite and of a short campaign on the H200, against the blind catalogue
# (tests/quality/blind_catalogue.json), verdicts only. Wall-time budget: SUITE_S + CAMPAIGN_S (default 240 + 180 s)
# plus ~30 s; each stage is cut by `timeout` (SIGTERM: `jfa-verify mutants` kills the mutants under way and
# keeps in its JSON every verdict that finished; the kill table counts those).
#
# Needs allpairspy (pure Python, not on the H200 image): carry it as a wheel (ci/gpu_env.sh says how).
# Outputs under ${OUT:-gpu-out}: suite.json, campaign.json (per-mutant verdicts), detection.md (the
# kill table: counts only), *.log. Exit 0 when both stages ran, 1 when the suite killed < 95%.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
source ci/gpu_env.sh
[ -n "${JFA_GPU_SESSION:-}" ] || gpu_install "$out/install.log" || exit 2  # gpu_session.sh installs once
cat=tests/quality/blind_catalogue.json
[ -f "$cat" ] || { echo "$cat missing"; exit 2; }
# The suite on CUDA has covering-array batches of several times more tiles than the 132 SMs.
python3 - <<'PY' | tee "$out/pairs.log"
from jfa_verify.dimensions import Target
from jfa_verify.pairs import PairCoverage, covering_array
from jfa_verify.registry import get_kernel
t = Target(get_kernel("triton_jfa"), "cuda")
cases = covering_array(t)
cov = PairCoverage(t).update(cases)
print(cov.summary(), flush=True)
print("several_waves cases:", cov.class_counts.get(("waves", "several_waves"), 0), "SMs:", t.num_sms)
PY
timeout -k 15 "${SUITE_S:-240}" jfa-verify mutants --catalogue "$cat" --stage suite --device cuda --jobs "${JOBS:-12}" \
  --json "$out/suite.json" > "$out/suite.log" 2>&1
rc_suite=$?
timeout -k 15 "${CAMPAIGN_S:-180}" jfa-verify mutants --catalogue "$cat" --stage campaign --max-examples 60 --device cuda --jobs "${JOBS:-12}" \
  --json "$out/campaign.json" > "$out/campaign.log" 2>&1
rc_campaign=$?
python3 ci/kill_table.py "H200 default suite=$out/suite.json" "H200 campaign (60 examples)=$out/campaign.json" \
  | tee "$out/detection.md"
echo "gpu detection: suite rc=$rc_suite campaign rc=$rc_campaign (1 = some mutant survived; 124 or 130 = cut by timeout)"
python3 -c "
import json,sys; rs=[r for r in json.load(open('$out/suite.json')) if r['status']!='skipped']
sys.exit(0 if sum(r['status']=='killed' for r in rs) >= 0.95*len(rs) else 1)" 2>/dev/null
