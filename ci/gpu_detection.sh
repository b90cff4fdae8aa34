#!/usr/bin/env bash
# Detection power of the default suite and of a short campaign on the H200, against the blind catalogue
# (tests/quality/blind_catalogue.json), verdicts only. Wall-time budget: SUITE_S + CAMPAIGN_S (default 240 + 180 s)
# plus ~30 s; each stage is cut by `timeout` (SIGTERM: `jfa-verify mutants` kills the mutants under way and
# keeps in its JSON every verdict that finished; the kill table counts those).
#
# Needs allpairspy (pure Python, not on the H200 image): carry it as a wheel, e.g. here
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl allpairspy==2.5.1
# and name .whl in the run's carry; this script installs it when .whl/ is there.
# Outputs under ${OUT:-gpu-out}: suite.json, campaign.json (per-mutant verdicts), detection.md (the
# kill table: counts only), *.log. Exit 0 when both stages ran, 1 when the suite killed < 95%.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [ -z "${JFA_GPU_SESSION:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then  # gpu_session.sh installs once
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
[ -n "${JFA_GPU_SESSION:-}" ] || python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$out/install.log" 2>&1 || {
  echo "install failed"; tail -20 "$out/install.log"; exit 2; }
python3 -c "import allpairspy" 2>/dev/null || { echo "allpairspy missing: carry .whl (see the header)"; exit 2; }
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
