"""The CI gate on the blind set: the default suite kills at least 95% of planted bugs that nobody has read.

``tests/quality/blind_set.json`` is ``docs/evidence/cpu-2026-12-07-blind8/blind8.json`` (blind set 8), copied in
unread on 2026-12-07: 24 one-line bugs of ``triton_jfa`` (23 the CPU can judge, one gpu-only) written by a helper
that had not read the suite, the strategies, the cases, the checks or any other catalogue. The set before it
(``blind3``, 21 mutants, some of whose names and patched lines had been seen) was rotated into the regression
catalogue then, as ``blind2`` was on 2026-12-04. Nobody working on the suite reads
it, its survivors included; it is used through this gate's counts only. Once anyone reads it (a survivor to fix,
say), it is no longer blind: it then joins the regression catalogue and a fresh blind set replaces it
(``docs/mutation.md``, "Rotating the blind set").

Same gate as ``test_regression_catalogue.py``: the suite's covering array and relation checks, each mutant
in its own process, a mutant that raises on every case "broken" (a failure of the gate, not a kill). Like that gate,
each mutant runs first the case that killed it last time (``blind_kills.json``, written by ``python
tests/quality/record_regression_kills.py blind``, unread like the set): the same verdicts, sooner (the gate took
104-136 s of CI's 2 cores in order, 2026-12-07).
"""

import json
import warnings
from pathlib import Path

import pytest

from .test_regression_catalogue import gate_kills, kill_gate

BLIND_SET = Path(__file__).parent / "blind_set.json"
BLIND_KILLS = Path(__file__).parent / "blind_kills.json"


@pytest.mark.skipif(not BLIND_SET.is_file(), reason="tests/quality/blind_set.json is absent: a blind set is copied "
                    "in unread (docs/mutation.md)")
def test_default_suite_kills_at_least_95_percent_of_the_unread_blind_set(jfa_device):
    recorded = json.loads(BLIND_KILLS.read_text())["kills"] if BLIND_KILLS.is_file() else {}
    results = kill_gate(BLIND_SET, jfa_device, minimum=10, blind=True, first_cases=recorded)
    stale = sum(recorded.get(n) != case for n, case in gate_kills(results).items())
    if stale:  # counts only: the names would unblind the set
        warnings.warn(f"{stale} blind-set mutant(s) died on another case than the one {BLIND_KILLS.name} records: "
                      f"refresh it with `python tests/quality/record_regression_kills.py blind`", stacklevel=1)
