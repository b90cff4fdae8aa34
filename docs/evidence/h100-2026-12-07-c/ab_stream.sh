#!/usr/bin/env bash
# A/B of the precompile step streaming its trace (9d73777) against the step before it (9161aab), cold each time.
set -uo pipefail
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=ci
source ci/gpu_env.sh; gpu_install /tmp/ab-install.log || exit 2
gpu_bytecode /tmp/ab-bytecode.log
nvidia-smi --query-gpu=name --format=csv,noheader
cp jfa_verify/run/precompile.py /tmp/new_precompile.py
t0=$(date +%s)
for v in new old new2; do
  [ $v = old ] && cp old_precompile.py jfa_verify/run/precompile.py
  [ $v = new2 ] && cp /tmp/new_precompile.py jfa_verify/run/precompile.py
  rm -rf /tmp/tc-$v /tmp/jc-$v
  /usr/bin/time -f "$v cold run wall %e s" env TRITON_CACHE_DIR=/tmp/tc-$v JFA_VERIFY_CACHE=/tmp/jc-$v \
    timeout -k 5 175 jfa-verify run --device cuda --no-progress --report $OUT/run-$v.json >$OUT/run-$v.log 2>&1
  echo "$v exit $? at $(( $(date +%s) - t0 )) s"
done
for v in new old new2; do echo "== $v"; grep -E "precompile:|^time:|passed|wall" $OUT/run-$v.log; done
python3 - <<'PY'
import json, os
for v in ("new", "old", "new2"):
    try:
        r = json.load(open(os.path.join(os.environ["OUT"], f"run-{v}.json")))
    except Exception as e:
        print(v, "no report", e); continue
    p = r.get("precompile") or {}
    print(v, "phases", r.get("phases_seconds"), "precompile", {k: p.get(k) for k in ("seconds", "trace_seconds", "variants", "compiled", "workers", "built_while_tracing")})
PY
