"""Verdict of one planted-bug run from its `jfa-verify run --report` and exit status: one line `VERDICT|BY`.

usage: python ci/mutant_verdict.py REPORT.json EXIT_STATUS [LIMIT_S]

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


def main(argv) -> int:
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
