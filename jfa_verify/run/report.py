"""The JSON report of a run of cases (``jfa-verify run --report``): one format, written by the library."""

from __future__ import annotations

import json
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

    Raises:
        OSError: the folder cannot be created or the file written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(path)
    return path
