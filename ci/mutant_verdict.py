"""Verdict of one planted-bug run from its `jfa-verify run --report` and exit status: one line `VERDICT|BY`.

usage: python ci/mutant_verdict.py REPORT.json EXIT_STATUS [LIMIT_S]

The first case that failed, hung or crashed kills the mutant, whatever the exit status: a run cut by the
caller's time limit (124/137) still wrote the verdicts it had (an H200 table of 2026-12-03 called ten runs
"inconclusive" whose reports held eight kills). Cases "not judged" (out of device memory beside other work)
kill nothing. Otherwise: exit 0 is "survived", a cut run is "inconclusive", 2 is "error" (usage or
configuration), any other status without such a case "inconclusive".
"""

import json
import sys
from pathlib import Path

from jfa_verify.runner import FAILING_STATUSES, is_unjudged

KILLING = (*FAILING_STATUSES, "timeout")  # "timeout": older reports' name of a hang


def verdict(report: dict, rc: int, limit_s: str = "the limit") -> tuple[str, str]:
    if rc == 2:  # stopped before any case (no device, a plugin that does not load): whatever report lies there is old
        return "error", "usage or configuration"
    cases = report.get("cases", [])
    bad = [c for c in cases if c.get("status") in KILLING and not is_unjudged(c["status"], c.get("message", ""))]
    passed = sum(c.get("status") == "pass" for c in cases)
    if bad:
        c = bad[0]
        outs = [n for n, o in (c.get("outputs") or {}).items() if not o.get("passed", True)]
        what = ",".join(outs) or (c.get("message") or "")[:70].replace("\n", " ")
        label = {"hang": "hang (watchdog)", "timeout": "hang (watchdog)", "crash": "crash"}.get(c["status"], c["status"])
        return "killed", f"{label}: {what} ({len(bad)} of {len(cases)} cases)"
    if report.get("relations"):  # a broken relation check (permutation, batch invariance) is a finding too
        return "killed", f"relation: {str(report['relations'][0])[:70]}"
    if rc == 0:
        return "survived", f"- ({passed} cases passed)"
    if rc == 3:
        return "killed", "hang (watchdog; exit 3)"
    if rc in (124, 137):
        return "inconclusive", f"the run passed {limit_s} s ({passed} cases passed by then)"
    if rc == 1:
        return "inconclusive", f"only cases not judged failed ({passed} cases passed)"
    return "killed", f"crash (exit {rc})"  # 4, or the process died of a signal


def main(argv) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    path, rc = Path(argv[0]), int(argv[1])
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        report = {}
    v, by = verdict(report, rc, *argv[2:])
    print(f"{v}|{by.replace('|', '/')}")  # one markdown cell each
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
