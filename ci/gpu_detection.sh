#!/usr/bin/env bash
# Detection power of the default suite and of a 200-example campaign on the H200, against the blind catalogue
# (tests/quality/regression_catalogue.json), verdicts only: the H200 rows of issue 17's before/after kill table.
#   STAGES="after before" (default both, in that order): "after" is this checkout (`jfa-verify mutants`),
#   "before" is the package on BEFORE_SITE (default .gpu/before-site: built from commit 3e93cc3, the last one
#   before the contract-coverage model; ci/detection_before.py says how) through ci/detection_before.py.
# Each stage runs the suite, then the campaign (EXAMPLES, default 200, seed 0), each cut by `timeout` after
# SUITE_S / CAMPAIGN_S seconds (default 280 each; SIGTERM keeps every verdict that finished in the JSON).
# ONLY="NAME ..." runs those mutants alone (a repaired one, or those a cut run left without a verdict).
# SIDE_BY_SIDE=1 runs a stage's suite and campaign at the same time (one mutant alone spends minutes compiling its
# variants one after another in each: on the H200, 2026-12-02, one mutant's suite had no verdict after 190 s).
#
# Needs allpairspy (pure Python, not on the H200 image): carry it as a wheel (ci/gpu_env.sh says how).
# Outputs under ${OUT:-gpu-out}: {after,before}-{suite,campaign}.json (per-mutant verdicts), detection.md (the
# kill table: counts only), *.log. Exit 0 when every stage ran, 1 when this checkout's suite killed < 95%.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
out=$(cd "$out" && pwd) root=$PWD
export PYTHONUNBUFFERED=1
source ci/gpu_env.sh
[ -n "${JFA_GPU_SESSION:-}" ] || gpu_install "$out/install.log" || exit 2  # gpu_session.sh installs once
cat=tests/quality/regression_catalogue.json
[ -f "$cat" ] || { echo "$cat missing"; exit 2; }
# The suite on CUDA has covering-array batches of several times more tiles than the 132 SMs.
python3 - <<'PY' | tee "$out/pairs.log"
from jfa_verify.cases.dimensions import Target
from jfa_verify.cases.pairs import PairCoverage, covering_array
from jfa_verify.protocol.registry import get_kernel
t = Target(get_kernel("triton_jfa"), "cuda")
cases = covering_array(t)
cov = PairCoverage(t).update(cases)
print(cov.summary(), flush=True)
print("several_waves cases:", cov.class_counts.get(("waves", "several_waves"), 0), "SMs:", t.num_sms)
PY
jobs=${JOBS:-12} examples=${EXAMPLES:-200}
only=()
[ -n "${ONLY:-}" ] && read -ra only_names <<<"$ONLY" && only=(--only "${only_names[@]}")
rc_all=0
run_kind() {  # run_kind STAGE KIND: one detection run, cut at its limit; its exit status is the run's
  local stage=$1 kind=$2 limit extra
  limit=$([ "$kind" = suite ] && echo "${SUITE_S:-280}" || echo "${CAMPAIGN_S:-280}")
  extra=$([ "$kind" = campaign ] && echo "--max-examples $examples" || true)
  echo "detection: $stage $kind (limit $limit s) from $(date -u +%H:%M:%S)"
  if [ "$stage" = after ]; then
    # shellcheck disable=SC2086
    timeout -k 15 "$limit" jfa-verify mutants --catalogue "$cat" --stage "$kind" $extra --device cuda \
      --jobs "$jobs" "${only[@]}" --json "$out/after-$kind.json" > "$out/after-$kind.log" 2>&1
  else
    # (from / : in the checkout's root, "import jfa_verify" would find this checkout's package)
    (cd / && PYTHONPATH="$root/${BEFORE_SITE:-.gpu/before-site}${PYTHONPATH:+:$PYTHONPATH}" timeout -k 15 "$limit" \
      python3 "$root/ci/detection_before.py" --stage "$kind" --examples "$examples" --device cuda --jobs "$jobs" \
      "${only[@]}" --json "$out/before-$kind.json") > "$out/before-$kind.log" 2>&1
  fi
}
for stage in ${STAGES:-after before}; do
  pids=() kinds=()
  for kind in suite campaign; do
    if [ -n "${SIDE_BY_SIDE:-}" ]; then run_kind "$stage" "$kind" & pids+=($!) kinds+=("$kind")
    else run_kind "$stage" "$kind"; rc=$?
      echo "detection: $stage $kind rc=$rc (1 = some mutant survived; 124 = cut by timeout)"
      [ "$rc" = 0 ] || [ "$rc" = 1 ] || rc_all=1
    fi
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    echo "detection: $stage ${kinds[$i]} rc=$rc (1 = some mutant survived; 124 = cut by timeout)"
    [ "$rc" = 0 ] || [ "$rc" = 1 ] || rc_all=1
  done
done
python3 ci/kill_table.py "H200 default suite, before (3e93cc3)=$out/before-suite.json" \
  "H200 default suite, after=$out/after-suite.json" \
  "H200 $examples-example campaign, before (3e93cc3)=$out/before-campaign.json" \
  "H200 $examples-example campaign, after=$out/after-campaign.json" | tee "$out/detection.md"
[ -f "$out/after-suite.json" ] || exit "$rc_all"
python3 -c "
import json,sys; rs=[r for r in json.load(open('$out/after-suite.json')) if r['status']!='skipped']
sys.exit(0 if sum(r['status']=='killed' for r in rs) >= 0.95*len(rs) else 1)" 2>/dev/null || exit 1
exit "$rc_all"
