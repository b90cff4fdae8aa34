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


def document_kind(payload) -> Optional[str]:
    """What jfa-verify document other than a case file ``payload`` (a parsed JSON file) is: ``"a run report"``,
    ``"a gate report"``, ``"a stress report"``, ``"a matrix report"``, or None (a case file, or not ours). A reader of
    a reproducers folder passes these over: a run's ``--report`` is often written beside its case files."""
    if not isinstance(payload, dict) or "case" in payload:
        return None
    if payload.get("format") == "jfa-verify-matrix/1":
        return "a matrix report"
    keys = set(payload)
    if {"summary", "cases", "environment"} <= keys:
        return "a run report"
    if {"results", "verdict", "environment"} <= keys:
        return "a gate report"
    if {"modes_run", "modes_skipped", "reruns", "cases"} <= keys:
        return "a stress report"
    return None


def document_kind_of(path: "str | Path") -> Optional[str]:
    """:func:`document_kind` of the file ``path`` (None when it is not one, or cannot be read as JSON)."""
    try:
        return document_kind(json.loads(Path(path).read_text()))
    except (OSError, ValueError):
        return None


def journal_path(report: "str | Path") -> Path:
    """Where a run that judges its cases in its own process (``--no-isolate``) appends each verdict as it comes (JSON
    lines, beside its report ``report``): a kernel that takes that process down (a segfault, ``os._exit``) ends it
    before it writes its report, and :func:`~jfa_verify.run.postmortem.record_death` reads the verdicts back from here
    (a new user's run lost the verdicts of the cases that had passed before the crash). Removed once the report
    holds them."""
    return Path(f"{report}.verdicts.jsonl")


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
    from jfa_verify.core.json_text import dumps

    text = dumps(payload, indent=2, default=str)
    final = isinstance(payload, dict) and payload.get("finished") is True
    with writing_verdict() if final else contextlib.nullcontext():
        if path.is_symlink() or (path.exists() and not path.is_file()):
            # a link, a pipe or a device is written through, never replaced by a file of its own (a new user's
            # --report /dev/full left a plain file where the device was)
            with open(path, "w") as f:
                f.write(text)
        else:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
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
