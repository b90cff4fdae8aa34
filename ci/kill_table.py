"""Kill-rate table (counts only) of `jfa-verify mutants --json` files: one row per file.

usage: python ci/kill_table.py LABEL=FILE.json [LABEL=FILE.json ...]

Prints a markdown table: killed, judged (gpu-only skipped mutants left out, and those with no verdict:
status error or timeout, counted apart as "not judged"), kill rate, median cases run up to the first
failure of the killed mutants, and how many were killed by a crash. A "kill" by the mutation harness's own
stale-patch error (files written before `run_mutant` checked that a mutant applies: every case failed on the patch,
not on the bug) is not judged either.
Names and descriptions of mutants are not printed (a blind catalogue is used by its verdicts only).
"""

import json
import statistics
import sys
from pathlib import Path


def stale(r: dict) -> bool:
    """A row "killed" by the harness's message for a mutant whose patch did not apply (jfa_verify.fuzz.mutation)."""
    return r["status"] == "killed" and "update the catalogue to the source" in (r.get("explanation") or "")


def row(label: str, path: Path) -> str:
    if not path.is_file():
        return f"| {label} | - | - | not measured | - | - | - |"
    rows = [dict(r, status="error") if stale(r) else r for r in json.loads(path.read_text())]
    results = [r for r in rows if r["status"] in ("killed", "survived")]
    not_judged = sum(r["status"] in ("error", "timeout") for r in rows)
    killed = [r for r in results if r["status"] == "killed"]
    counted = [r["cases_run"] for r in killed if r.get("cases_run") is not None]  # (older files may lack it)
    median = statistics.median(counted) if counted else "-"
    crashes = sum(r.get("killing_status") == "crash" for r in killed)
    rate = f"{100 * len(killed) / len(results):.0f}%" if results else "-"
    return f"| {label} | {len(killed)} | {len(results)} | {rate} | {median} | {crashes} | {not_judged} |"


def main(argv) -> int:
    if not argv or any("=" not in a for a in argv):
        print(__doc__, file=sys.stderr)
        return 2
    print("| measurement | killed | judged | kill rate | median cases to first failure | killed by a crash "
          "| not judged |")
    print("|---|---|---|---|---|---|---|")
    for arg in argv:
        label, _, file = arg.partition("=")
        print(row(label, Path(file)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
