"""Verdict of one planted-bug run from its `jfa-verify run --report` and exit status: one line `VERDICT|BY`.

usage: python ci/mutant_verdict.py REPORT.json EXIT_STATUS [LIMIT_S]
       python ci/mutant_verdict.py --gate RUN_VERDICT RUN_BY GATE_EXIT_STATUS GATE.md

The second form folds a `jfa-verify gate` run on the same mutant into the suite run's verdict (`with_gate`).

The first case that failed, hung or crashed kills the mutant, whatever the exit status: a run cut by the
caller's time limit (124/137) or interrupted (130) still wrote the verdicts it had (an H200 table of
2026-12-03 called ten runs "inconclusive" whose reports held eight kills). Cases "not judged" (out of
device memory beside other work) kill nothing; a broken relation check kills. Without such a case:

- exit 2: "error" (usage or configuration; a report lying there is an old one and is not read);
- no readable report: "error";
- exit 0: "survived"; exit 3: killed by a hang; exit 4 or a death by signal (> 128, not 130/137): a crash;
- exit 124, 137 (cut by the limit), 130 (interrupted), or 1 with only cases not judged: "inconclusive".

Exits 2 itself on a bad EXIT_STATUS.
"""

import json
import sys
from pathlib import Path

from jfa_verify.run.runner import FAILING_STATUSES, is_unjudged

KILLING = (*FAILING_STATUSES, "timeout")  # "timeout": older reports' name of a hang


def verdict(report, rc: int, limit_s: str = "the limit") -> tuple[str, str]:
    """``(verdict, by)`` of a run that exited ``rc`` and wrote ``report`` (None: no readable report)."""
    if rc == 2:
        return "error", "usage or configuration"
    if report is None:
        return "error", f"no readable report (exit {rc})"
    cases = report.get("cases") or []
    bad = [c for c in cases if c.get("status") in KILLING and not is_unjudged(c["status"], c.get("message") or "")]
    passed = sum(c.get("status") == "pass" for c in cases)
    if bad:
        c = bad[0]
        outs = [n for n, o in (c.get("outputs") or {}).items() if not (o or {}).get("passed", True)]
        what = ",".join(outs) or (c.get("message") or "")[:70].replace("\n", " ")
        label = {"hang": "hang (watchdog)", "timeout": "hang (watchdog)",
                 "crash": "crash"}.get(c["status"], c["status"])
        return "killed", f"{label}: {what} ({len(bad)} of {len(cases)} cases)"
    if report.get("relations"):  # a broken relation check (permutation, batch invariance) is a finding too
        return "killed", f"relation: {str(report['relations'][0])[:70]}"
    if rc == 0:
        return "survived", f"- ({passed} cases passed)"
    if rc == 3:
        return "killed", "hang (watchdog; exit 3)"
    if rc in (124, 137):
        return "inconclusive", f"the run passed {limit_s} s ({passed} cases passed by then)"
    if rc == 130:
        return "inconclusive", f"interrupted ({passed} cases passed by then)"
    if rc == 1:
        return "inconclusive", f"only cases not judged failed ({passed} cases passed)"
    return "killed", f"crash (exit {rc})"  # 4, or the process died of a signal


def with_gate(run_verdict: str, run_by: str, gate_rc: int, gate_md: str | None) -> tuple[str, str]:
    """The mutant's ``(verdict, by)`` once its gate exited ``gate_rc`` (``gate_md``: the gate's markdown, None if
    it wrote none): a gate's finding (1), hang (3) or crash (4) kills a mutant whatever the suite run said, a
    run cut by its limit included (an H200 table of 2026-12-06 left "inconclusive" a mutant whose gate's stress
    check failed); exit 0 leaves the run's verdict; any other exit is a gate that could not judge (a sanitizer
    past its time), which kills nothing."""
    rows = [" ".join(line.split()) for line in (gate_md or "").splitlines()]
    if gate_rc in (1, 3, 4):
        failing = [r for r in rows if any(f"| {w} |" in r for w in ("fail", "hang", "crash"))][:3]
        gate_by = f"gate (exit {gate_rc}): " + ("; ".join(failing) if failing else "no markdown written")
        gate_v = "killed"
    elif gate_rc == 0:
        return run_verdict, (f"{run_by}; gate passed" if run_verdict != "survived" else run_by)
    else:
        gate_v = f"survived (gate inconclusive, exit {gate_rc})"
        gate_by = "; ".join([r for r in rows if "| error |" in r][:2]) or "no check row"
    if run_verdict == "killed":
        return "killed", f"{run_by}; {gate_by}"
    if gate_v == "killed":
        return "killed", gate_by if run_verdict == "survived" else f"{gate_by} (suite run: {run_verdict}, {run_by})"
    return (gate_v if run_verdict == "survived" else run_verdict), f"{run_by}; {gate_by}"


def main(argv) -> int:
    if argv[:1] == ["--gate"]:
        if len(argv) != 5 or not argv[3].lstrip("-").isdigit():
            print(__doc__, file=sys.stderr)
            return 2
        md = Path(argv[4])
        v, by = with_gate(argv[1], argv[2], int(argv[3]), md.read_text() if md.is_file() else None)
        print(f"{v}|{by.replace('|', '/')}")
        return 0
    if len(argv) not in (2, 3) or not argv[1].lstrip("-").isdigit():
        print(__doc__, file=sys.stderr)
        return 2
    path, rc = Path(argv[0]), int(argv[1])
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        report = None
    if not isinstance(report, dict):
        report = None
    v, by = verdict(report, rc, *argv[2:])
    print(f"{v}|{by.replace('|', '/')}")  # one markdown cell each
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
