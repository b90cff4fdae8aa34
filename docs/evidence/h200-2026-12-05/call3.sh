#!/usr/bin/env bash
# Call 3 (2026-12-05, run on 4b0abbf from a copy of the tree in gpu-src/ with c1-repro/ and failed_ids.txt beside
# it): the 57 failed GPU tests again and the three test files 4b0abbf changed; the triton_jfa gate's checks call 1
# did not finish (the replay of the OOM case alone, the sanitizers); the planted-bug run and gluon_jfa's jagged grid.
set -uo pipefail
cd "$(dirname "$0")"
L=/tmp/c3; mkdir -p $L
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=ci TRITON_CACHE_DIR=/tmp/tcache
source ci/gpu_env.sh; gpu_install $L/install.log || { cat $L/install.log; exit 2; }
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mapfile -t ids < failed_ids.txt
( timeout -k 5 ${TT:-300} python3 -m pytest -q -p no:cacheprovider -n 10 --dist worksteal --jfa-device cuda \
    -m "not gpu_exclusive" -rfE --tb=short "${ids[@]}" tests/test_mxfp8.py tests/test_fp8.py tests/test_stress.py \
    >$L/tests.log 2>&1; echo "tests exit $? at $(el) s" >>$L/status.txt ) &
( timeout -k 5 ${GT:-300} jfa-verify gate --device cuda --kernel triton_jfa --seed 0 --checks replay --replay c1-repro \
    --sanitizer memcheck racecheck --timeout 240 --jobs 2 --reproducers $L/repro --json $L/gate.json \
    --markdown $L/gate.md >$L/gate.log 2>&1; echo "gate exit $? at $(el) s" >>$L/status.txt ) &
( jfa-verify run --device cuda --plugin tests/quality/mutant_plugin.py --kernel mutant-kv_bound_minus_one \
    --filter tile-edges --no-progress --report $L/mutant.json --reproducers $L/mutant-repro >$L/mutant.log 2>&1
  echo "planted-bug run exit $? (want 1) at $(el) s" >>$L/status.txt
  timeout -k 5 200 jfa-verify run --device cuda --kernel gluon_jfa --suite jagged-grid --no-progress --jobs 4 \
    --report $L/grid.json --reproducers $L/grid-repro >$L/grid.log 2>&1
  echo "gluon jagged grid exit $? (want 0) at $(el) s" >>$L/status.txt ) &
wait
tar czf $OUT/c3.tgz -C $L --exclude '*.pt' . 2>/dev/null
