#!/usr/bin/env bash
# gluon_jfa's pipeline mutants judged by the framework on a Hopper GPU: each mutant through
# `jfa-verify run` (the normal checks: outputs against float64 and SDPA, the output contract, NaN
# poisoning), a hang past --timeout counting as killed by the hang watchdog; survivors then through
# `jfa-verify gate` (determinism reruns, guard-band canaries, recycled memory, compute-sanitizer
# racecheck and memcheck). Prints a kill table: mutant, verdict, the check that killed it.
# Usage: OUT=dir PARALLEL=4 [RUN_S=300] [RUN_JOBS=2] [GATE_S=200] [CATALOGUE=gluon_jfa] [RACES=1] [MUTANTS="a b"] bash ci/gpu_gluon_mutants.sh
# (RUN_S: seconds for a mutant's suite run, 0 for none (the gate alone decides); RUN_JOBS: its case workers;
# GATE_S: for a survivor's gate, 0 for none (the suite run alone decides); a run
# cut short counts the verdicts its report holds, and is "inconclusive" only where none failed: ci/mutant_verdict.py.
# MUTANTS: only these mutants of the catalogue, e.g. half of it per call of a lent machine).
# CATALOGUE: a packaged catalogue name or a file (default gluon_jfa, through tests/quality/mutant_plugin.py as
# kernels mutant-gluon-NAME; any other through ci/catalogue_mutant_plugin.py as mutant-CATALOGUE-NAME, results
# in OUT/CATALOGUE-mutants). RACES=1: the survivors' gate adds the stress check (STRESS_RERUNS reruns, default
# 200) and the racecheck, synccheck and memcheck sanitizers, GATE_S default 600. GATE_CHECKS and SANITIZERS
# override the gate's check and tool lists. GATE_ALL=1 gates every mutant, not only the run's survivors (a killed
# mutant keeps its verdict; the gate's is appended, and each check's row is in OUT/.../NAME.gate.md).
set -uo pipefail
cd "$(dirname "$0")/.."
catalogue=${CATALOGUE:-gluon_jfa}
if [ "$catalogue" = gluon_jfa ]; then
  plugin=tests/quality/mutant_plugin.py; prefix=mutant-gluon-; out=${OUT:-gpu-out}/gluon-mutants
else
  export JFA_MUTANT_CATALOGUE=$catalogue
  plugin=ci/catalogue_mutant_plugin.py
  prefix=mutant-$(python3 -c "from jfa_verify.fuzz.mutation import load_catalogue; import sys; print(load_catalogue(sys.argv[1]).name)" "$catalogue")-
  out=${OUT:-gpu-out}/$(basename "$catalogue" .json)-mutants
fi
if [ "${RACES:-0}" = 1 ]; then
  gate_checks=${GATE_CHECKS:-determinism canaries recycled_memory stress}
  sanitizers=${SANITIZERS:-racecheck synccheck memcheck}
  gate_s=${GATE_S:-600}
else
  gate_checks=${GATE_CHECKS:-determinism canaries recycled_memory}
  sanitizers=${SANITIZERS:-racecheck memcheck}
  gate_s=${GATE_S:-200}
fi
export plugin prefix gate_checks sanitizers gate_s STRESS_RERUNS GATE_ALL
mkdir -p "$out"
export PYTHONUNBUFFERED=1
names=$(python3 -c "from jfa_verify.fuzz.mutation import load_catalogue; import sys; print(' '.join(load_catalogue(sys.argv[1]).mutants))" "$catalogue")
if [ -n "${MUTANTS:-}" ]; then  # a part of the catalogue (a kill table split over calls of a lent machine)
  for m in $MUTANTS; do
    case " $names " in *" $m "*) ;; *) echo "MUTANTS: $m is not a mutant of $catalogue (it has: $names)" >&2; exit 2;; esac
  done
  names=$MUTANTS
fi
one() {
  name=$1; out=$2
  # the whole default suite: the covering array (only cases inside gluon_jfa's capabilities) and the full-size
  # layouts, whose sequences span several K/V stages (a pipeline bug needs more than one tile to show)
  rm -f "$out/$name.json"  # a run that stops before its first case writes none: never read an old one
  if [ "${RUN_S:-300}" = 0 ]; then  # the gate alone decides
    verdict=survived; by="no suite run (RUN_S=0)"
  else
    timeout -k 5 "${RUN_S:-300}" jfa-verify run --device cuda --plugin "$plugin" --kernel "$prefix$name" \
      --jobs "${RUN_JOBS:-2}" --timeout 90 --no-progress --report "$out/$name.json" --reproducers "$out/repro-$name" \
      >"$out/$name.run.log" 2>&1
    rc=$?
    # the report's verdicts decide, even for a run cut by the limit (ci/mutant_verdict.py)
    IFS='|' read -r verdict by < <(python3 ci/mutant_verdict.py "$out/$name.json" "$rc" "${RUN_S:-300}")
    [ -n "${verdict:-}" ] || { verdict=error; by="ci/mutant_verdict.py gave no verdict (exit $rc)"; }
  fi
  if [ "$gate_s" != 0 ] && { [ "$verdict" = survived ] || [ "${GATE_ALL:-0}" = 1 ]; }; then
    run_verdict=$verdict
    stress=()
    rm -f "$out/$name.gate.md"  # a gate that dies before writing one must not be read from an older run
    case " $gate_checks " in *" stress "*) stress=(--stress-reruns "${STRESS_RERUNS:-200}");; esac
    # shellcheck disable=SC2086  # the check and tool lists split into words
    timeout -k 5 "$gate_s" jfa-verify gate --device cuda --plugin "$plugin" --kernel "$prefix$name" \
      --checks $gate_checks ${stress[@]+"${stress[@]}"} --small-cases 2 --reruns 5 --sanitizer $sanitizers \
      --timeout 60 --json "$out/$name.gate.json" --junit "$out/$name.gate.xml" --markdown "$out/$name.gate.md" \
      --reproducers "$out/repro-$name" >"$out/$name.gate.log" 2>&1
    grc=$?
    # a finding, a hang or a crash of the gate kills; a gate that could not judge does not (ci/mutant_verdict.py)
    IFS='|' read -r verdict by < <(python3 ci/mutant_verdict.py --gate "$run_verdict" "$by" "$grc" "$out/$name.gate.md")
    [ -n "${verdict:-}" ] || { verdict=error; by="ci/mutant_verdict.py --gate gave no verdict (gate exit $grc)"; }
  fi
  echo "| $name | $verdict | $by |"
}
export -f one
echo "| mutant | verdict | killed by |"
echo "|---|---|---|"
printf '%s\n' $names | xargs -P "${PARALLEL:-4}" -I{} bash -c 'one "$@"' _ {} "$out" | tee "$out/kill-table.md"
