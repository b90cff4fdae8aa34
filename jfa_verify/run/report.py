"""The JSON report of a run of cases (``jfa-verify run --report``): one format, written by the library."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Optional, Sequence

from jfa_verify.run.corpus import environment
from jfa_verify.run.runner import STATUSES, CaseResult

__all__ = ["STATUSES", "summary", "run_report", "write_json"]


def summary(results: Sequence[CaseResult]) -> dict[str, int]:
    """Cases per status (every status of :data:`STATUSES`, zeros included)."""
    return {s: sum(r.status == s for r in results) for s in STATUSES}


def run_report(results: Sequence[CaseResult], *, kernel: str, device, suite_note: str = "",
               coverage: Optional[dict] = None, extra: Optional[dict] = None) -> dict:
    """The report of one run: kernel, device, environment, summary, every case's verdict, and coverage."""
    payload = {
        "kernel": kernel,
        "device": str(device),
        "suite_note": suite_note,
        "environment": environment(),
        "summary": summary(results),
        "cases": [r.to_dict() for r in results],
    }
    if coverage is not None:
        payload["coverage"] = coverage
    payload.update(extra or {})
    return payload


def write_json(path: "str | Path", payload: "dict | list") -> Path:
    """Write ``payload`` as indented JSON (through a temporary file, so a reader never sees half of it).

    A run report that says ``"finished": true`` is the run's verdict: it is written under
    :func:`~jfa_verify.run.interrupts.writing_verdict`, so that a stop landing once it is on disk no longer makes
    the command exit 130 beside a report that says it finished (issue 43, 10).

    Raises:
        OSError: the folder cannot be created or the file written.
    """
    from jfa_verify.run.interrupts import writing_verdict

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    final = isinstance(payload, dict) and payload.get("finished") is True
    with writing_verdict() if final else contextlib.nullcontext():
        tmp.write_text(json.dumps(payload, indent=2, default=str))
        tmp.replace(path)
    if final:
        _after_final_report(path)
    return path


def _after_final_report(path: Path) -> None:
    """Tests: ``JFA_VERIFY_TEST_AFTER_REPORT=SECONDS`` waits that long once a finished report is on disk (and says
    so on stderr), so that a test can send a stop in exactly that moment."""
    wait = os.environ.get("JFA_VERIFY_TEST_AFTER_REPORT")
    if wait:
        import sys
        import time

        print(f"jfa-verify: test hook: report {path} written", file=sys.stderr, flush=True)
        time.sleep(float(wait))
