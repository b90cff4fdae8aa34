"""Blind catalogue through a 200-example campaign of an older jfa-verify (the one on PYTHONPATH): one mutant per
process (a crash of the interpreter takes only that mutant and counts as a kill: a crash is a finding), no
shrinking, seed 0; a mutant is killed by the campaign's first failing case. ``examples_to_failure`` counts
the cases the campaign ran up to and including that one (the "after" runs' ``cases_run``).

Usage: build the old commit's package into a folder (``pip install --no-deps --target DIR <wheel of it>``),
then, from a folder outside the checkout, ``PYTHONPATH=DIR:<site-packages> python before_campaign.py``
(writes ``before_campaign.json`` in the current folder; ``--only NAME ...`` for some mutants)."""
import json, subprocess, sys, tempfile, time
from pathlib import Path

CAT = str(Path(__file__).resolve().parents[3] / "tests" / "quality" / "blind_catalogue.json")
EXAMPLES = 200


def one(name):
    from jfa_verify.device import select_device
    select_device("cpu")
    from jfa_verify.fuzz.campaign import run_campaign
    from jfa_verify.fuzz.mutation import load_catalogue
    cat = load_catalogue(CAT)
    try:
        cat.mutated_source(name) if not cat[name].scheduler else None
    except Exception as e:
        return {"name": name, "status": "n/a", "reason": f"{type(e).__name__}: {e}"[:300]}
    kernel = cat.kernel_of(name)
    seen = {"cases": 0, "first": None, "status": None}

    def on_event(ev):
        if ev.get("event") == "case":
            seen["cases"] += 1
            if ev.get("status") in ("fail", "error", "crash", "hang") and seen["first"] is None:
                seen["first"], seen["status"] = seen["cases"], ev["status"]

    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="jfa-before-campaign-") as corpus:
        summary = run_campaign(kernel, max_examples=EXAMPLES, corpus_dir=corpus, device="cpu", seed=0, shrink=False,
                               on_event=on_event)
    # ci/kill_table.py's fields: cases_run is the cases up to the first failure for a killed mutant
    row = {"name": name, "cases_total": summary.cases_run, "seconds": round(time.time() - t0, 1)}
    if summary.failures or seen["first"]:
        return {**row, "status": "killed", "cases_run": seen["first"], "examples_to_failure": seen["first"],
                "verdict": seen["status"], "killing_status": seen["status"]}
    return {**row, "status": "survived", "cases_run": summary.cases_run}


if __name__ == "__main__":
    if len(sys.argv) == 2 and not sys.argv[1].startswith("--"):
        print(json.dumps(one(sys.argv[1])), flush=True)
        sys.exit(0)
    names = [m["name"] for m in json.load(open(CAT))["mutants"]]
    if "--only" in sys.argv:
        names = sys.argv[sys.argv.index("--only") + 1:]
    out = []
    for n in names:
        try:
            p = subprocess.run([sys.executable, __file__, n], capture_output=True, text=True, timeout=1800)
            line = [l for l in p.stdout.splitlines() if l.startswith("{")]
            row = json.loads(line[-1]) if line else {"name": n, "status": "killed", "verdict": "crash",
                                                     "killing_status": "crash", "cases_run": 0,
                                                     "reason": f"exit {p.returncode}: {p.stderr[-300:]}"}
        except subprocess.TimeoutExpired:
            row = {"name": n, "status": "timeout", "reason": "no verdict in 1800 s"}
        row["finished_at_utc"] = time.strftime("%H:%M:%S", time.gmtime())
        out.append(row)
        print(json.dumps(row), flush=True)
        json.dump(out, open("before_campaign.json", "w"), indent=1)
    k = sum(r["status"] == "killed" for r in out)
    print(f"killed {k} of {len(out)}")
