#!/usr/bin/env bash
# gluon_jfa's pipeline mutants judged by the framework on a Hopper GPU: each mutant through
# `jfa-verify run` (the normal checks: outputs against float64 and SDPA, the output contract, NaN
# poisoning), a hang past --timeout counting as killed by the hang watchdog; survivors then through
# `jfa-verify gate` (determinism reruns, guard-band canaries, recycled memory, compute-sanitizer
# racecheck and memcheck). Prints a kill table: mutant, verdict, the check that killed it.
# Usage: OUT=dir PARALLEL=4 [RUN_S=300] [GATE_S=200] bash ci/gpu_gluon_mutants.sh   (RUN_S: seconds for a mutant's
# suite run, GATE_S: for a survivor's gate; a run cut short counts the verdicts its report holds, and is
# "inconclusive" only where none failed: ci/mutant_verdict.py)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}/gluon-mutants
mkdir -p "$out"
export PYTHONUNBUFFERED=1
names=$(python3 -c "from jfa_verify.fuzz.mutation import load_catalogue; print(' '.join(load_catalogue('gluon_jfa').mutants))")
one() {
  name=$1; out=$2
  # the whole default suite: the covering array (only cases inside gluon_jfa's capabilities) and the full-size
  # layouts, whose sequences span several K/V stages (a pipeline bug needs more than one tile to show)
  rm -f "$out/$name.json"  # a run that stops before its first case writes none: never read an old one
  timeout -k 5 "${RUN_S:-300}" jfa-verify run --device cuda --plugin tests/quality/mutant_plugin.py --kernel "mutant-gluon-$name" \
    --jobs 2 --timeout 90 --no-progress --report "$out/$name.json" --reproducers "$out/repro-$name" \
    >"$out/$name.run.log" 2>&1
  rc=$?
  # the report's verdicts decide, even for a run cut by the limit (ci/mutant_verdict.py)
  IFS='|' read -r verdict by < <(python3 ci/mutant_verdict.py "$out/$name.json" "$rc" "${RUN_S:-300}")
  [ -n "${verdict:-}" ] || { verdict=error; by="ci/mutant_verdict.py gave no verdict (exit $rc)"; }
  if [ "$verdict" = survived ]; then
    timeout -k 5 "${GATE_S:-200}" jfa-verify gate --device cuda --plugin tests/quality/mutant_plugin.py --kernel "mutant-gluon-$name" \
      --checks determinism canaries recycled_memory --small-cases 2 --reruns 5 --sanitizer racecheck memcheck \
      --timeout 60 --json "$out/$name.gate.json" --junit "$out/$name.gate.xml" --markdown "$out/$name.gate.md" \
      --reproducers "$out/repro-$name" >"$out/$name.gate.log" 2>&1
    grc=$?
    # 1, 3, 4: a finding, a hang, a crash; 2: a check could not judge (a sanitizer past its time): not a kill
    case $grc in
      1|3|4) verdict=killed; by="gate (exit $grc): $(grep -E '\| (fail|hang|crash) \|' "$out/$name.gate.md" | tr -s ' ' | head -3 | tr '\n' ';')";;
      0) ;;
      *) verdict="survived (gate inconclusive, exit $grc)"; by="$(grep -E '\| error \|' "$out/$name.gate.md" | tr -s ' ' | head -2 | tr '\n' ';')";;
    esac
  fi
  echo "| $name | $verdict | $by |"
}
export -f one
echo "| mutant | verdict | killed by |"
echo "|---|---|---|"
printf '%s\n' $names | xargs -P "${PARALLEL:-4}" -I{} bash -c 'one "$@"' _ {} "$out" | tee "$out/kill-table.md"
