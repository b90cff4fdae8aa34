#!/usr/bin/env bash
# H200 held-out evidence for sliding windows: triton_jfa on windowed cases only, judged by the packaged table.
# Hard wall time: DEADLINE (default 240 s) of sampling + ~60 s of install and first compiles; one GPU, WORKERS
# processes (default 12: sampling is bound by host work and compiles). Output: $OUT/records/*.jsonl, logs,
# and $OUT/window-verdict.txt (exit 1 on any false failure). Copy the records back as
# docs/evidence/windows-2026-12-01/h200-window-holdout.jsonl.gz (gzip the concatenation).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
KINDS="triton_jfa:float32 bfloat16 float16" EXTRA="--window-cases" DEADLINE=${DEADLINE:-240} WORKERS=${WORKERS:-12} \
  OUT="$out" SEED0=${SEED0:-7000} bash ci/gpu_calibrate.sh
# gpu_calibrate.sh packs the records into records.tgz and removes the folder
tar xzf "$out/records.tgz" -C "$out" records
cat "$out"/records/*.jsonl > "$out/h200-window-holdout.jsonl" && rm -rf "$out/records"
python3 - "$out/h200-window-holdout.jsonl" <<'PY' | tee "$out/window-verdict.txt"
import sys
from jfa_verify.judge.budgets import default_table
from jfa_verify.workflows.calibrate import evaluate, format_stats, read_records
records = read_records([sys.argv[1]])
stats = evaluate(records, default_table())
print(f"{len(records)} windowed H200 records, {sum(1 for r in records if r.case['full'].get('window'))} with a window")
print(format_stats(stats))
fails = sum(s.failures for s in stats.values())
print(f"false failures: {fails}")
sys.exit(1 if fails or not records else 0)
PY
