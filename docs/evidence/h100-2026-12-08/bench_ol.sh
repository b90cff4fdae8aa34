#!/usr/bin/env bash
# bench_e2e with the one-launch planner off, on, off, on (same machine, same process kind), into $OUT/ol.
cd "$(dirname "$0")/../../.."  # the checkout's root
L=$OUT/ol; mkdir -p $L
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/tcache}
source ci/gpu_env.sh; gpu_install $L/install.log || exit 2
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
cat > /tmp/bench_flag.py <<'PY'
import runpy, sys
import jfa_verify.scheduling.device_plan as d
d.ONE_LAUNCH_ON_CUDA = sys.argv.pop(1) == "on"
print("ONE_LAUNCH_ON_CUDA", d.ONE_LAUNCH_ON_CUDA, flush=True)
sys.argv[0] = "benchmarks/bench_e2e.py"
runpy.run_path("benchmarks/bench_e2e.py", run_name="__main__")
PY
i=0
for flag in ${FLAGS:-off on off on}; do
  i=$((i+1))
  left=$(( ${BENCH_S:-200} - $(el) )); [ $left -lt 30 ] && break
  timeout -k 5 $left python3 /tmp/bench_flag.py $flag --kernels gluon_jfa,triton_jfa,torch_fa2_varlen --dtypes bf16 \
    --head-dims 128 --json $L/e2e-$i-$flag.json >$L/e2e-$i-$flag.log 2>&1
  echo "bench $flag exit $? at $(el) s" | tee -a $L/status.txt
done
for f in $L/e2e-*.log; do echo "== $f"; tail -28 $f; done
