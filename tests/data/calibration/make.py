"""Make this folder's compact calibration records from the raw ones (in git history at commit 4543630).

    python tests/data/calibration/make.py   # from the repository root; needs git and the commit

Fitting records are JSON lines with every measured number as it was (float64), so
``jfa-verify calibrate --from-records`` reads them and the refit is exact; the case summary loses
its ``full`` case (replay data) and the wall times. The two large held-out sets are columns in an
``.npz`` with the numbers rounded to float32 (a relative change under 1e-7; the script checks that
no verdict and no headroom moves by more than 1e-6 under the packaged table). ``manifest.json``
says, per file, what it was used for, where it came from (path and sha256 of the raw file) and the
commit of the kernel source it was measured on, where the evidence READMEs name it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOURCE_COMMIT = "4543630"
CAL = "docs/evidence/calibration-2026-11-29"
WIN = "docs/evidence/windows-2026-12-01"
OUTPUTS = ("o", "lse", "dq", "dk", "dv")
CALL1 = "0276fc0 (call 1, seeds 3000-3014: strides specialized)"
CALL23 = "f00b4ee (calls 2 and 3, seeds 4000-5014)"

# (raw file, compact file, used for, kernel source commit)
FILES = [
    (f"{CAL}/h200-fit.jsonl.gz", "fit-v2-v3-h200.jsonl.gz", "fitted versions 2 and 3",
     "not recorded (H200 sessions before commit 5115007)"),
    (f"{CAL}/h200-holdout.jsonl.gz", "heldout-v2-fit-v3-h200.jsonl.gz",
     "held out for version 2, then fitted version 3 (not held out for version 3)",
     "not recorded (H200 sessions before commit 5115007)"),
    (f"{CAL}/cpu-fit.jsonl.gz", "fit-v2-v3-cpu.jsonl.gz", "fitted versions 2 and 3",
     "not recorded (before commit 5115007)"),
    (f"{CAL}/cpu-holdout.jsonl.gz", "heldout-v2-fit-v3-cpu.jsonl.gz",
     "held out for version 2, then fitted version 3 (not held out for version 3)",
     "not recorded (before commit 5115007)"),
    (f"{CAL}/cpu-fp8-refloored.jsonl.gz", "fit-v3-cpu-fp8-refloored.jsonl.gz",
     "fitted version 3 (version 2's float8 fitting and held-out cases, floors derived again)",
     "not recorded (before commit 5f4276d)"),
    (f"{CAL}/h200-fp8-fit.jsonl.gz", "fit-v3-h200-fp8.jsonl.gz", "fitted version 3", CALL1),
    (f"{CAL}/h200-b-holdout.jsonl.gz", "heldout-v3-h200.npz", "held out for version 3 (never fitted)",
     f"{CALL1}; {CALL23}"),
    (f"{CAL}/h200-fp8-holdout.jsonl.gz", "heldout-v3-h200-fp8.npz", "held out for version 3 (never fitted)",
     f"{CALL1}; {CALL23}"),
    (f"{WIN}/cpu-window-holdout.jsonl.gz", "heldout-v3-window-cpu.jsonl.gz",
     "held out (windowed cases judged by version 3, never fitted)", "678c052"),
    (f"{WIN}/h200-window-holdout.jsonl.gz", "heldout-v3-window-h200.jsonl.gz",
     "held out (windowed cases judged by version 3, never fitted)", "4ff987f"),
]

CASE_KEYS = ("batch", "max_seqlen_q", "max_seqlen_k", "tokens_q", "tokens_k", "head_dim", "head_dim_v",
             "heads_q", "heads_kv", "causal", "mode", "values", "dtype")


def raw(path: str) -> bytes:
    return subprocess.run(["git", "show", f"{SOURCE_COMMIT}:{path}"], check=True, capture_output=True).stdout


def slim(doc: dict) -> dict:
    case = {k: doc["case"][k] for k in CASE_KEYS}
    if "window" in doc["case"].get("full", {}):
        case["full"] = {"window": doc["case"]["full"]["window"]}
    return {"row": doc["row"], "kernel": doc["kernel"], "seed": doc["seed"], "device": doc["device"],
            "environment": doc.get("environment", {}), "case": case, "outputs": doc["outputs"],
            "problems": doc.get("problems", {})}


def columns(docs: list[dict]) -> dict:
    assert not any(d.get("problems") for d in docs), "a record with a non-finite mismatch: keep it as JSON lines"
    (env,) = {json.dumps(d.get("environment", {}), sort_keys=True) for d in docs}
    numbers = np.full((len(docs), len(OUTPUTS), 5), np.nan, dtype=np.float32)
    for i, d in enumerate(docs):
        for j, out in enumerate(OUTPUTS):
            if out in d["outputs"]:
                numbers[i, j] = d["outputs"][out]
    return {"row": np.array([d["row"] for d in docs]), "kernel": np.array([d["kernel"] for d in docs]),
            "device": np.array([d["device"] for d in docs]), "seed": np.array([d["seed"] for d in docs]),
            "tokens_q": np.array([d["case"]["tokens_q"] for d in docs]),
            "tokens_k": np.array([d["case"]["tokens_k"] for d in docs]),
            "causal": np.array([d["case"]["causal"] for d in docs]), "environment": np.array(env),
            "outputs": np.array(OUTPUTS), "numbers": numbers}


def check_float32_copy(docs: list[dict], path: Path) -> None:
    sys.path.insert(0, str(HERE.parents[2]))
    from jfa_verify.judge.budgets import default_table
    from jfa_verify.workflows.calibrate import Record, record_headroom
    from tests.calibration_records import read_npz_records

    table = default_table()
    for d, r in zip(docs, read_npz_records(path), strict=True):
        full = Record.from_dict(d)
        assert (full.row, full.seed, full.device, set(full.outputs)) == (r.row, r.seed, r.device, set(r.outputs))
        for out, numbers in full.outputs.items():
            a, b = (record_headroom(n, table.budget(full.row, out)) for n in (numbers, r.outputs[out]))
            assert (a > 1) == (b > 1) and abs(a - b) <= 1e-6 * max(a, 1e-30), (full.row, out, a, b)


def main() -> None:
    manifest = {"source_commit": SOURCE_COMMIT, "files": {}}
    for src, name, used, commit in FILES:
        data = raw(src)
        docs = [json.loads(line) for line in gzip.decompress(data).decode().splitlines() if line.strip()]
        out = HERE / name
        if name.endswith(".npz"):
            np.savez_compressed(out, **columns(docs))
            check_float32_copy(docs, out)
        else:
            text = "".join(json.dumps(slim(d), separators=(",", ":")) + "\n" for d in docs)
            out.write_bytes(gzip.compress(text.encode(), 9, mtime=0))
        manifest["files"][Path(src).name if src.startswith(CAL) else f"windows/{Path(src).name}"] = {
            "file": name, "used_for": used, "cases": len(docs), "kernel_source_commit": commit,
            "raw": f"{SOURCE_COMMIT}:{src}", "raw_sha256": hashlib.sha256(data).hexdigest(),
            "numbers": "float32" if name.endswith(".npz") else "float64"}
        print(f"{name}: {len(docs)} cases, {out.stat().st_size} bytes")
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
