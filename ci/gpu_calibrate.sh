#!/usr/bin/env bash
# Calibration sampling on a CUDA machine: many `jfa-verify calibrate --no-fit` processes at once
# (sampling is bound by per-case host work and Triton compiles, not by the GPU), each with its own
# Hypothesis seed and a wall-clock deadline, one JSON line per case (kept if a process is killed).
# Then fit and judge on the workstation:
#   jfa-verify calibrate --from-records <fit files> --holdout <other seeds' files> --out budgets.json
# Usage: OUT=dir DEADLINE=seconds WORKERS=n [EXTRA="--window-cases"] bash ci/gpu_calibrate.sh
# Workers are dealt round-robin (unless KINDS says otherwise) to: triton_jfa (float32, bfloat16, float16 in turn),
# triton_jfa_tf32 (float32), triton_jfa_fp8 (float8_e4m3fn). Output: $OUT/records.tgz and logs.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
deadline=${DEADLINE:-450}
workers=${WORKERS:-15}
seed0=${SEED0:-1000}
mkdir -p "$out/records" "$out/logs"
export PYTHONUNBUFFERED=1
# One Triton cache for all workers, kept in the checkout so a following call on a warm machine reuses it.
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$PWD/.triton-cache}
source ci/gpu_env.sh
gpu_install "$out/logs/install.log" || exit 2
kinds=("triton_jfa:float32 bfloat16 float16" "triton_jfa_tf32:float32" "triton_jfa:float32 bfloat16 float16"
       "triton_jfa_fp8:float8_e4m3fn")
# KINDS="kernel:dtype dtype;kernel:dtype" replaces that list (to balance the rows' case counts).
[[ -n ${KINDS:-} ]] && IFS=';' read -r -a kinds <<<"$KINDS"
for i in $(seq 0 $((workers - 1))); do
  kind=${kinds[$((i % ${#kinds[@]}))]}
  kernel=${kind%%:*}; dtypes=${kind#*:}; seed=$((seed0 + i))
  # PROFILE=1: the first worker runs under cProfile (where a case's host time goes).
  run=(jfa-verify)
  [[ ${PROFILE:-0} == 1 && $i == 0 ]] && run=(python3 -m cProfile -o "$out/logs/profile.pstats" -m jfa_verify.cli)
  timeout $((deadline + 60)) "${run[@]}" calibrate --device cuda --kernel "$kernel" --dtypes $dtypes \
    --cases 1000000 --seed "$seed" --deadline "$deadline" --no-fit --progress-every 200 ${EXTRA:-} \
    --records "$out/records/rec-$kernel-$seed.jsonl" >"$out/logs/cal-$kernel-$seed.log" 2>&1 &
done
wait
grep -h "^sampled\|^wall time" "$out"/logs/cal-*.log
[[ -f $out/logs/profile.pstats ]] && python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(80)" \
  "$out/logs/profile.pstats" >"$out/logs/profile.txt"
echo "compiled kernels in the Triton cache: $(find "$TRITON_CACHE_DIR" -name '*.cubin' | wc -l)"
cat "$out"/records/*.jsonl | wc -l
tar czf "$out/records.tgz" -C "$out" records logs && rm -rf "$out/records"
