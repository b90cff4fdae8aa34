"""Write ``regression_kills.json`` (or, with ``blind``, ``blind_kills.json``): the suite case that kills each mutant
of the regression catalogue (or of the blind set), a script, not a pytest test.

The gates (``test_regression_catalogue.py``, ``test_blind_set.py``) run that case first for each mutant. This script
runs the gate's cases in the suite's own order, with no record, on the CPU under Triton's interpreter (about four
minutes on 2 cores for the regression catalogue, two for the blind set), and records the first case that kills each
mutant. Run it when a gate warns that its record is stale (the default suite or the covering array changed). The
blind set's record is written and read by machines only, like the set (reading it would say which case kills which
unread bug); the script prints counts only for it.

Usage::

    TRITON_INTERPRET=1 python tests/quality/record_regression_kills.py [regression|blind]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from jfa_verify.fuzz.mutation import load_catalogue, run_mutants
    from tests.quality.test_blind_set import BLIND_KILLS, BLIND_SET
    from tests.quality.test_regression_catalogue import CATALOGUE, KILLS, gate_cases, gate_kills

    which = (sys.argv[1:] if argv is None else argv) or ["regression"]
    if which not in (["regression"], ["blind"]):
        print(f"usage: record_regression_kills.py [regression|blind], not {' '.join(which)}", file=sys.stderr)
        return 2
    blind = which == ["blind"]
    catalogue, record = (BLIND_SET, BLIND_KILLS) if blind else (CATALOGUE, KILLS)
    cat = load_catalogue(str(catalogue))
    names = [n for n, m in cat.mutants.items() if not m.gpu_only]
    results = run_mutants(names, catalogue=str(catalogue), device=torch.device("cpu"), stage="suite", jobs=1,
                          isolate=True, max_cases=gate_cases("cpu"), case_timeout_s=60)
    kills = gate_kills(results)
    record.write_text(json.dumps({
        "about": f"What killed each {'blind-set' if blind else 'regression-catalogue'} mutant first, the default "
                 "suite's cases run in order on the CPU: a case or relation check, which the gate runs first, or "
                 "(crash) / (hang); a mutant not named survived (tests/quality/test_regression_catalogue.py). "
                 "Written by tests/quality/record_regression_kills.py." + (" Unread, like the set." if blind else ""),
        "kills": dict(sorted(kills.items()))}, indent=1) + "\n")
    print(f"{len(kills)} of {len(names)} mutants killed (by a suite case, a relation check, a crash or a hang); "
          f"wrote {record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
