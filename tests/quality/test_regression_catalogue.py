"""The CI gate on the regression catalogue: the default suite kills at least 95% of its planted bugs.

``tests/quality/regression_catalogue.json`` holds 54 realistic one-line bugs of ``triton_jfa``: 38 were
written blind (from the kernel and the contract, without reading the suite or the strategies), but the
catalogue is **no longer blind**: its survivors were read and the contract model grew from them
(``docs/evidence/detection-2026-12-01/README.md``). It is a regression set: it says the suite still kills
what it was shown to kill, not how it does on bugs nobody has read. That is the blind set's gate
(``tests/quality/test_blind_set.py``; rotating sets: ``docs/mutation.md``).

Each mutant runs the default suite (``jfa-verify mutants --stage suite``) in its own process (a crash is
a kill, not the end of the gate), stopping at its first failing case. A mutant whose every case raised
(its kernel does not compile, say) is "broken", not killed (``MutantResult.broken``), and fails the gate.

To fit the CI budget (~15 minutes on 2 cores for everything) the gate runs the
suite's covering array (every pair of contract classes the kernel supports; it
comes first in the suite, cheap dense cases first) and the suite's relation checks,
not the real-length cases that follow the array.

Each mutant runs first the case that killed it last time (``regression_kills.json``, written by
``python tests/quality/record_regression_kills.py``), as a failing test is rerun first: the verdicts are those of
the suite in its order (a mutant that case no longer kills runs the others), only sooner. In order, three mutants
killed late in the array took 169 of the gate's 360 s (this project's 2-core CPU, another job beside it,
2026-12-07). A record gone stale costs time, not verdicts; the test warns of it (a mutant whose bug depends on the
calls before it, or on memory it does not own, can die on another case when its record's case runs first). The
mutants the record names run first; once their kills alone reach the rate, the others (last time's survivors) run
their first case only (:func:`kill_gate`). With both, the 75-mutant gate took 72 s beside the blind gate on 2 cores.
"""

import json
import warnings
from pathlib import Path
from typing import Optional

import pytest

CATALOGUE = Path(__file__).parent / "regression_catalogue.json"
KILLS = Path(__file__).parent / "regression_kills.json"
TARGET_KILL_RATE = 0.95


def gate_cases(device_type: str) -> int:
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.cases.pairs import covering_array
    from jfa_verify.protocol.registry import get_kernel

    return len(covering_array(Target(get_kernel("triton_jfa"), device_type)))


def gate_kills(results) -> dict:
    """``{mutant: name of the suite case or relation check that killed it}`` of a gate's results; ``"(crash)"`` or
    ``"(hang)"`` for one killed so (no case to run first: it still counts as killed last time)."""
    return {r.name: r.killed_by or f"({r.stage})" for r in results if r.killed}


def kill_gate(catalogue: Path, device, minimum: int, target: float = TARGET_KILL_RATE, blind: bool = False,
              first_cases: Optional[dict] = None) -> list:
    """Run the default suite's gate cases against every CPU-judgeable mutant of ``catalogue`` and assert the kill
    rate; returns the results. A kernel that raises on every case is "broken" (``MutantResult.broken``), never a
    kill, and fails the gate. Verdicts only, never which mutant survived; ``blind``: not even which mutant was broken
    or not judged (the failure says counts only, so that reading it does not unblind the set).

    ``first_cases`` (``{mutant: what killed it last time}``, :func:`gate_kills`): each such mutant runs that case first
    (``run_mutants``; the same verdicts), and they run before the others. When their kills alone reach the rate, the
    gate holds whatever the others do, and the others run their first case only: enough to show each is judged (its
    patch applies and its kernel does not raise on every case), which the gate also asserts. The mutants the record
    does not name are those that survived last time; each ran the whole array (67 s on the CPU) to say nothing the
    rate needs."""
    from jfa_verify.fuzz.mutation import format_table, load_catalogue, run_mutants

    cat = load_catalogue(str(catalogue))
    names = [n for n, m in cat.mutants.items() if not m.gpu_only]
    assert len(names) >= minimum, f"{catalogue.name} needs at least {minimum} mutants that the CPU can judge"
    first = [n for n in names if n in (first_cases or {})]
    rest = [n for n in names if n not in first]
    # a covering-array case takes seconds on the interpreter; a mutant stuck in one for a minute hangs
    common = dict(catalogue=str(catalogue), device=device, stage="suite", jobs=1, isolate=True, case_timeout_s=60,
                  first_cases=first_cases)
    results = run_mutants(first, max_cases=gate_cases(device.type), **common) if first else []
    decided = sum(r.killed for r in results) >= target * len(names)
    if rest:
        results += run_mutants(rest, max_cases=1 if decided else gate_cases(device.type), **common)
    killed = sum(r.killed for r in results)
    # the verdicts only: the suite is not to be tuned to which mutants survive
    assert killed >= target * len(names), (
        f"default suite killed {killed}/{len(names)} mutants of {catalogue.name} (< {target:.0%}); "
        f"not judged: {sum(r.status == 'error' for r in results)}; "
        f"broken: {sum(r.status == 'broken' for r in results)}")
    unjudged = [r for r in results if r.status in ("error", "broken")]
    assert not unjudged, (f"{len(unjudged)} mutant(s) not judged or broken (`jfa-verify mutants --catalogue "
                          f"{catalogue}` names them, and unblinds the set)" if blind else format_table(unjudged))
    return results


@pytest.mark.skipif(not CATALOGUE.is_file(), reason="tests/quality/regression_catalogue.json is absent")
def test_default_suite_kills_at_least_95_percent_of_the_regression_catalogue(jfa_device):
    recorded = json.loads(KILLS.read_text())["kills"] if KILLS.is_file() else {}
    results = kill_gate(CATALOGUE, jfa_device, minimum=15, first_cases=recorded)
    stale = sorted(n for n, case in gate_kills(results).items() if recorded.get(n) != case)
    if stale:  # (slower, not wrong: those mutants ran cases before their killer)
        warnings.warn(f"{len(stale)} mutant(s) of the regression catalogue died on another case than the one "
                      f"{KILLS.name} records ({', '.join(stale[:5])}...): refresh it with `python "
                      f"tests/quality/record_regression_kills.py` (a mutant whose bug depends on the calls before "
                      f"it, or on memory it does not own, can die on another case when its record's case runs "
                      f"first)", stacklevel=1)
