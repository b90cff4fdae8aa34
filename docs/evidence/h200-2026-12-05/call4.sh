#!/usr/bin/env bash
# Call 4 (2026-12-05, fe0cbfe): the gate test whose plugin was mended and the stress tests; triton_jfa_mxfp8's
# default suite on the H200; the stress check per kernel (50 reruns); MXFP8 calibration samples. All side by side.
set -uo pipefail
cd "$(dirname "$0")"
L=/tmp/c4; mkdir -p $L
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=ci TRITON_CACHE_DIR=/tmp/tcache
source ci/gpu_env.sh; gpu_install $L/install.log || { cat $L/install.log; exit 2; }
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
( timeout -k 5 ${TT:-140} python3 -m pytest -q -p no:cacheprovider -n 3 --jfa-device cuda -rfE --tb=short \
    "tests/test_gate.py::test_a_nondeterminism_finding_is_a_case_file_that_findings_lists_and_replay_reruns" \
    tests/test_stress.py >$L/tests.log 2>&1; echo "tests exit $? at $(el) s" >>$L/status.txt ) &
( timeout -k 5 ${RT:-140} jfa-verify run --device cuda --kernel triton_jfa_mxfp8 --no-progress --jobs 4 \
    --report $L/mxfp8-run.json --reproducers $L/mxfp8-repro >$L/mxfp8-run.log 2>&1
  echo "mxfp8 run exit $? at $(el) s" >>$L/status.txt ) &
( for k in triton_jfa gluon_jfa; do
    timeout -k 5 ${ST:-65} jfa-verify stress --device cuda --kernel $k --seed 0 --reruns ${RERUNS:-20} --json $L/stress-$k.json \
      >$L/stress-$k.log 2>&1; echo "stress $k exit $? at $(el) s" >>$L/status.txt
  done ) &
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || CD=0  # (the calibration table is the H200's)
[ "${CD:-90}" != 0 ] && ( KINDS="triton_jfa_mxfp8:float8_e4m3fn" OUT=$L/cal DEADLINE=${CD:-90} WORKERS=4 SEED0=3000 \
    timeout -k 5 ${CT:-140} bash ci/gpu_calibrate.sh >$L/calibrate.log 2>&1
  echo "calibrate exit $? at $(el) s" >>$L/status.txt ) &
wait
cat $L/status.txt
echo "== tests"; grep -E "^(FAILED|ERROR)|passed|failed" $L/tests.log | tail -8
echo "== mxfp8 run"; tail -6 $L/mxfp8-run.log
echo "== stress"; tail -5 $L/stress-triton_jfa.log; tail -5 $L/stress-gluon_jfa.log
echo "== calibrate"; tail -5 $L/calibrate.log
cp $L/cal/records.tgz $OUT/mxfp8-records.tgz 2>/dev/null
tar czf $OUT/c4.tgz -C $L --exclude cal/records.tgz --exclude '*.pt' . 2>/dev/null; ls -la $OUT
