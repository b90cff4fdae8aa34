"""Blind set 8's kill counts on the CPU, as CI's blind gate judges a set (tests/quality/test_blind_set.py): the
default suite's covering array and its relation checks, each mutant in its own process; counts only, so that the
set stays unread. Run from the repository root: `TRITON_INTERPRET=1 python docs/evidence/cpu-2026-12-07-blind8/
kill_counts.py`."""
import collections
import sys
import time

sys.path.insert(0, ".")

if __name__ == "__main__":
    import torch

    from jfa_verify.fuzz.mutation import load_catalogue, run_mutants
    from tests.quality.test_regression_catalogue import gate_cases

    catalogue = "docs/evidence/cpu-2026-12-07-blind8/blind8.json"
    names = [n for n, m in load_catalogue(catalogue).mutants.items() if not m.gpu_only]
    t0 = time.time()
    results = run_mutants(names, catalogue=catalogue, device=torch.device("cpu"), stage="suite", jobs=1,
                          isolate=True, max_cases=gate_cases("cpu"), case_timeout_s=60)
    print("COUNTS", len(names), collections.Counter(r.status for r in results), f"{time.time() - t0:.0f} s")
