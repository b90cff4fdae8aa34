"""Write ``regression_kills.json``: the suite case that kills each mutant of the regression catalogue (a script, not
a pytest test).

The gate (``test_regression_catalogue.py``) runs that case first for each mutant. This script runs the gate's cases
in the suite's own order, with no record, on the CPU under Triton's interpreter (about four minutes on 2 cores),
and records the first case that kills each mutant. Run it when the gate warns that the record is stale (the
default suite or the covering array changed).

Usage::

    TRITON_INTERPRET=1 python tests/quality/record_regression_kills.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from jfa_verify.fuzz.mutation import load_catalogue, run_mutants
    from tests.quality.test_regression_catalogue import CATALOGUE, KILLS, gate_cases, gate_kills

    cat = load_catalogue(str(CATALOGUE))
    names = [n for n, m in cat.mutants.items() if not m.gpu_only]
    results = run_mutants(names, catalogue=str(CATALOGUE), device=torch.device("cpu"), stage="suite", jobs=1,
                          isolate=True, max_cases=gate_cases("cpu"), case_timeout_s=60)
    kills = gate_kills(results)
    KILLS.write_text(json.dumps({
        "about": "What killed each regression-catalogue mutant first, the default suite's cases run in order on the "
                 "CPU: a case or relation check, which the gate runs first, or (crash) / (hang); a mutant not named "
                 "survived (tests/quality/test_regression_catalogue.py). Written by "
                 "tests/quality/record_regression_kills.py.",
        "kills": dict(sorted(kills.items()))}, indent=1) + "\n")
    print(f"{len(kills)} of {len(names)} mutants killed (by a suite case, a relation check, a crash or a hang); "
          f"wrote {KILLS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
