"""What a run that died mid-case leaves behind, made into its verdict: the case in flight is a crash (or a hang).

``jfa-verify run --no-isolate`` runs cases in the run's own process, so a kernel that segfaults or calls
``os._exit`` takes that process with it: no Python code runs after the signal. The case's file was written before
the kernel ran (status ``"running"``, :meth:`~jfa_verify.run.corpus.Corpus.guard`), so the finding survives; the
process that waited for the run (:mod:`jfa_verify.cli.supervise`) calls :func:`record_death`, which rewrites that
file as a crash and says in the run's report what happened (issue 43, 9: the report was left a placeholder and the
exit status was the raw signal's). A case past ``--timeout`` ends that process too, through its watchdog, which
marks the case file a hang and exits 3: :func:`record_hang` puts that case in the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple, Optional

from jfa_verify.core.exits import ExitCode
from jfa_verify.run.corpus import Corpus, replay_command
from jfa_verify.run.isolation import crash_result, death_in_words
from jfa_verify.run.report import journal_path, summary, write_json

__all__ = ["InFlight", "death_in_words", "record_death", "record_hang"]


class InFlight(NamedTuple):
    """The case a death took down: its case file and the one command that replays it (absolute paths, the kernel's
    ``--plugin`` named: :func:`~jfa_verify.run.corpus.replay_command`), as the report's ``"crash"`` holds them."""

    case_file: Path
    replay: str
    failed_before: int = 0  # cases of this run that failed before it (their verdicts, from their files, in the report)


def record_death(report: "Optional[str | Path]", reproducers: "str | Path", since: float, how: str, *,
                 who: str = "the process running this case in itself (--no-isolate)") -> Optional[InFlight]:
    """Record that the process running cases in itself died, ``how``
    (:func:`~jfa_verify.run.isolation.death_in_words`).

    Every case file of ``reproducers`` that it left ``"running"`` (written at or after ``since``, a
    :func:`time.time`, and held by no live process: :meth:`~jfa_verify.run.corpus.Corpus.mark_orphans`) becomes a
    crash with a verdict saying so; the report (``report``, this run's placeholder or its report before the relation
    checks; None: no report, as for ``stress``, whose process writes its report last) keeps what it had and adds
    ``"crash"`` (how, the case file, its replay command), counts the case as crashed, and says ``"finished": false,
    "interrupted": false``. ``who``: the process, in the verdicts' message. Returns the case in flight (the newest one
    left running: its file and replay command, :class:`InFlight`), or None when no case was running (the process
    died between cases: loading the kernel, or in the framework).
    """
    message = f"{who} {how}"
    crashes = []

    def as_crash(case, payload) -> dict:
        result = crash_result(case, payload.get("kernel") or "", "crash", message, tuple(payload.get("plugins", ())))
        crashes.append(result)
        return dict(status="crash", verdict=result.to_dict(), explanation=result.explain())

    # (through the corpus, under its lock: a case another live process still runs in the same folder is not this
    # death's, and no other writer's text is moved into place)
    marked = Corpus(reproducers).mark_orphans(since, as_crash)
    results = [(path, result) for (path, _), result in zip(marked, crashes)]
    for path, result in results:
        result.reproducer = str(path)
    earlier, planned = _verdicts_before(report, reproducers, since, exclude={p for p, _ in results})
    last = results[-1] if results else None
    in_flight = (InFlight(last[0], replay_command(last[0], last[1].kernel or None, last[1].plugins), _failing(earlier))
                 if last else None)
    if report is not None:
        _record_ending(report, earlier + [r.to_dict() for _, r in results], in_flight, "crash", how, ExitCode.CRASH,
                       planned)
    return in_flight


def record_hang(report: "Optional[str | Path]", reproducers: "str | Path", since: float) -> Optional[InFlight]:
    """Record in ``run``'s report (``report``; None: nothing to record) that the run's own process ended on a hang:
    a ``--no-isolate`` case ran past ``--timeout``, and the watchdog marked its case file a hang
    (:func:`~jfa_verify.run.corpus.mark_hang`) and ended the process with exit 3, before the report was written (a
    new user's trial: the report kept ``"cases": []`` and ``"exit_code": null``). The report gets the hung case
    (each ``"hang"`` file of ``reproducers`` written at or after ``since``, a :func:`time.time`), ``"hang"`` (the case
    file, its replay command), ``"finished": false`` and ``"exit_code": 3``. Returns the hung case, or None."""
    if report is not None:
        try:
            if json.loads(Path(report).read_text()).get("finished") is True:
                return None  # the run wrote its verdict itself (a hang its case workers judged): it stands
        except (OSError, ValueError, AttributeError):
            pass
    hung = []
    for path, case, payload in Corpus(reproducers).readable():
        try:
            if payload.get("status") != "hang" or path.stat().st_mtime < since - 1.0:  # (mtime granularity)
                continue
        except OSError:
            continue
        result = crash_result(case, payload.get("kernel") or "", "hang", payload.get("explanation") or "a hang",
                              tuple(payload.get("plugins", ())))
        result.reproducer = str(path)
        hung.append((path.stat().st_mtime, path, result))
    hung.sort(key=lambda t: t[0])
    earlier, planned = _verdicts_before(report, reproducers, since, exclude={p for _, p, _ in hung})
    in_flight = (InFlight(hung[-1][1], replay_command(hung[-1][1], hung[-1][2].kernel or None, hung[-1][2].plugins),
                          _failing(earlier)) if hung else None)
    if report is not None:
        how = hung[-1][2].message if hung else "ran past --timeout"
        _record_ending(report, earlier + [r.to_dict() for _, _, r in hung], in_flight, "hang", how, ExitCode.HANG,
                       planned)
    return in_flight


def _failing(verdicts: list[dict]) -> int:
    return sum(v.get("status") in ("fail", "error") for v in verdicts)


def _verdicts_before(report: "Optional[str | Path]", reproducers: "str | Path", since: float,
                     exclude: set) -> tuple[list[dict], Optional[int]]:
    """The verdicts of the cases a run that died had judged, and how many cases it had planned (None: not known):
    from the run's journal (:func:`~jfa_verify.run.report.journal_path`, removed once read) when it wrote one, every
    verdict in order; else the failing ones, from their case files (:func:`_failed_before`). A verdict whose case
    file is in ``exclude`` (the case the death took down, which may have been judged before in a rerun) is left
    out."""
    path = journal_path(report) if report is not None else None
    if path is None or not path.is_file():
        return _failed_before(reproducers, since, exclude), None
    verdicts, planned = [], None
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # (a line cut short by the death)
        if not isinstance(entry, dict):
            continue
        if "cases_planned" in entry:
            planned = entry["cases_planned"]
        elif entry.get("reproducer") is None or Path(entry["reproducer"]) not in exclude:
            verdicts.append(entry)
    path.unlink(missing_ok=True)
    return verdicts, planned


def _failed_before(reproducers: "str | Path", since: float, exclude: set) -> list[dict]:
    """The verdicts (as a report holds them) of the cases of this run that failed or raised before its process
    ended: each ``"fail"`` or ``"error"`` case file of ``reproducers`` written at or after ``since`` (a
    :func:`time.time`) and not in ``exclude``, oldest first. A run in its own process writes its report last, so
    without them the report of a run that died said "0 failed" beside their case files (a new user's trial)."""
    found = []
    for path, _, payload in Corpus(reproducers).readable():
        verdict = payload.get("verdict")
        if path in exclude or payload.get("status") not in ("fail", "error") or not isinstance(verdict, dict):
            continue
        try:
            written = path.stat().st_mtime
        except OSError:
            continue
        if written >= since - 1.0:  # (mtime granularity)
            found.append((written, dict(verdict, reproducer=str(path))))
    return [verdict for _, verdict in sorted(found, key=lambda t: t[0])]


def _record_ending(report: "str | Path", results: list[dict], in_flight: Optional[InFlight], key: str, how: str,
                   code: ExitCode, planned: Optional[int] = None) -> None:
    """Add to ``report`` (what it holds is kept) the verdicts ``results`` (as dicts: the failures before the end, then
    the case(s) the end took down), their counts, ``key`` (``"crash"`` or ``"hang"``: how, the case file, its replay
    command), ``"finished": false`` and the exit status ``code`` the command exits with, as a finished report records
    its own."""
    try:
        before = json.loads(Path(report).read_text())
    except (OSError, ValueError):
        before = {}
    if not isinstance(before, dict):
        before = {}
    cases = [c for c in before.get("cases", []) if isinstance(c, dict)]
    known = {c.get("reproducer") for c in cases} - {None}
    cases += [r for r in results if r.get("reproducer") not in known]
    counts = summary([])
    counts.update({s: sum(c.get("status") == s for c in cases) for s in counts})
    if planned is not None and before.get("cases_planned") is None:
        before["cases_planned"] = planned
    before.update(cases=cases, summary=counts, finished=False, interrupted=False, exit_code=int(code), **{key: {
        "how": how, "case_file": str(in_flight.case_file) if in_flight else None,
        "replay": in_flight.replay if in_flight else None,
        "note": "cases run in the run's own process (--no-isolate): the verdicts before it are here, read back from "
                "the run's journal of verdicts" if planned is not None else
                "cases run in the run's own process (--no-isolate): the verdicts of the cases before it that passed "
                "ended with it; the failing ones are here, read back from their case files"}})
    write_json(report, before)
