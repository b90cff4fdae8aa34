"""Blind catalogue through the default suite of an older jfa-verify (the one on PYTHONPATH): one mutant per
process (a segfault of the interpreter takes only that mutant), first failing case kills it.

Usage: build the old commit's package into a folder (``pip install --no-deps --target DIR <wheel of it>``),
then ``PYTHONPATH=DIR python before_suite.py`` (writes ``before_suite.json`` in the current folder)."""
import json, subprocess, sys, time
from pathlib import Path

CAT = str(Path(__file__).resolve().parents[3] / "tests" / "quality" / "blind_catalogue.json")

def one(name):
    from jfa_verify.device import select_device
    select_device("cpu")
    from jfa_verify.fuzz.mutation import load_catalogue
    from jfa_verify.registry import get_kernel
    from jfa_verify.runner import run_case
    from jfa_verify.suites import get_suite
    cat = load_catalogue(CAT)
    try:
        cat.mutated_source(name) if not cat[name].scheduler else None
    except Exception as e:
        return {"name": name, "status": "n/a", "reason": f"{type(e).__name__}: {e}"[:300]}
    kernel = cat.kernel_of(name)
    cases = get_suite("default", "cpu", 0, kernel=get_kernel(cat.kernel)).cases
    t0 = time.time()
    for i, case in enumerate(cases):
        r = run_case(case, kernel, "cpu")
        if r.status in ("fail", "error", "crash", "hang"):
            return {"name": name, "status": "killed", "by": case.name, "case_index": i, "verdict": r.status,
                    "seconds": round(time.time() - t0, 1)}
    return {"name": name, "status": "survived", "cases": len(cases), "seconds": round(time.time() - t0, 1)}

if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(one(sys.argv[1])), flush=True)
        sys.exit(0)
    names = [m["name"] for m in json.load(open(CAT))["mutants"]]
    out = []
    for n in names:
        p = subprocess.run([sys.executable, __file__, n], capture_output=True, text=True, timeout=1800)
        line = [l for l in p.stdout.splitlines() if l.startswith("{")]
        row = json.loads(line[-1]) if line else {"name": n, "status": "crash", "reason": f"exit {p.returncode}: {p.stderr[-300:]}"}
        out.append(row)
        print(json.dumps(row), flush=True)
    json.dump(out, open("before_suite.json", "w"), indent=1)
    k = sum(r["status"] == "killed" for r in out); print(f"killed {k} of {len(out)}")
