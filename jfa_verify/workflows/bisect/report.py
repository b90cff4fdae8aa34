"""The report of ``jfa-verify bisect``: the first bad commit, what failed there and where, the reproducer,
and every tested commit; as text, Markdown and JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from jfa_verify.core.exits import ExitCode
from jfa_verify.workflows.bisect.config import StepRecord

__all__ = ["BisectReport", "format_markdown", "format_text", "write_reports"]

# How a bisect ended, and the exit status of ``jfa-verify bisect`` for it.
OUTCOMES = {
    "found": ExitCode.OK,  # git named one first bad commit
    "inconclusive": ExitCode.FINDING,  # untestable (skipped) commits hide it: several candidates
    "usage": ExitCode.USAGE,  # the endpoints do not bracket a change (or cannot be tested); nothing bisected
}


@dataclass
class BisectReport:
    """What a bisect found. Commits are full hashes; ``steps`` holds every tested commit in test order
    (the two endpoint checks first); ``candidates``: the commits the first bad one may be (one when
    found); ``seconds``: the whole bisect's wall time."""

    repo: str
    good: str
    bad: str
    kernel: str
    mode: str
    target: str
    status: str
    message: str
    commits_in_range: int
    first_bad: Optional[str] = None
    first_bad_subject: str = ""
    candidates: list[str] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    reproducer: Optional[str] = None
    replay: Optional[str] = None
    seconds: float = 0.0
    framework: str = ""

    @property
    def exit_code(self) -> int:
        return int(OUTCOMES[self.status])

    @property
    def first_bad_record(self) -> Optional[StepRecord]:
        return next((s for s in self.steps if s.commit == self.first_bad and s.verdict == "bad"), None)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["exit_code"] = self.exit_code
        return d


def _evidence(report: BisectReport) -> list[str]:
    """What the first bad commit did: failing outputs with locations, drift, or timings."""
    rec = report.first_bad_record
    if rec is None:
        return []
    d, lines = rec.details, []
    for o in d.get("outputs", []):
        lines.append(f"{o['output']}: {o['what']}" + (f" at {o['location']}" if o.get("location") else ""))
    for m in d.get("drift", []):
        what = m["note"] or (f"{m['changed']} / {m['total']} element(s) moved, max |diff| {m['max_abs']:.3g}, "
                             f"{m['before']!r} -> {m['after']!r}")
        lines.append(f"{m['name']}: {what}" + (f" at {m['location']}" if m.get("location") else ""))
    if d.get("message"):
        lines.append(f"kernel raised: {d['message'].splitlines()[0]}")
    if "slowdown" in d:
        s = d["slowdown"]
        lines.append(f"batch {d['batch']} ({d['case']}), {d['pass']} on {d['device']}: median "
                     f"{s['candidate_ms']:.4g} ms vs good {s['baseline_ms']:.4g} ms over {s['rounds']} "
                     f"interleaved rounds")
        good = next((x for x in report.steps if x.role == "good"), None)
        if good is not None and "slowdown" in good.details:
            lines.append(good.reason)
    return lines


def _table_rows(report: BisectReport) -> list[tuple[str, ...]]:
    return [(str(i), s.commit[:10], s.subject[:48], s.role, s.verdict, f"{s.seconds:.1f}", s.reason)
            for i, s in enumerate(report.steps)]


HEADER = ("#", "commit", "subject", "role", "verdict", "seconds", "reason")


def format_text(report: BisectReport, *, width: int = 160) -> str:
    """The report as plain text (what the command prints)."""
    lines = [f"jfa-verify bisect ({report.mode}) of {report.kernel} in {report.repo}: {report.good[:10]} (good) .. "
             f"{report.bad[:10]} (bad), {report.commits_in_range} commit(s); testing {report.target}"]
    if report.status == "found":
        lines.append(f"FIRST BAD COMMIT: {report.first_bad} {report.first_bad_subject}")
        rec = report.first_bad_record
        if rec is not None:
            lines.append(f"  {rec.reason}")
        lines.extend(f"  {e}" for e in _evidence(report))
    else:
        lines.append(("INCONCLUSIVE: " if report.status == "inconclusive" else "NOT BISECTED: ") + report.message)
        lines.extend(f"  candidate {c}" for c in report.candidates)
    if report.reproducer:
        lines.append(f"  reproducer: {report.reproducer}")
    if report.replay:
        lines.append(f"  replay: {report.replay}")
    rows = [HEADER] + _table_rows(report)
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    lines.append("tested commits:")
    for r in rows:
        head = "  ".join(c.ljust(w) for c, w in zip(r, widths))
        lines.append(("  " + head + "  " + r[-1])[:width])
    lines.append(f"{len(report.steps)} commit(s) tested in {report.seconds:.1f} s; framework {report.framework}")
    return "\n".join(lines)


def format_markdown(report: BisectReport) -> str:
    """The report as Markdown (for a pull request or an issue)."""
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = [f"# jfa-verify bisect: {report.kernel} ({report.mode})", "",
             f"Repository `{report.repo}`, good `{report.good[:10]}`, bad `{report.bad[:10]}` "
             f"({report.commits_in_range} commits), testing {esc(report.target)}.", ""]
    if report.status == "found":
        lines.append(f"**First bad commit: `{report.first_bad}`** {esc(report.first_bad_subject)}")
        rec = report.first_bad_record
        if rec is not None:
            lines += ["", f"- {esc(rec.reason)}"]
        lines += [f"- {esc(e)}" for e in _evidence(report)]
    else:
        lines.append(f"**{'Inconclusive' if report.status == 'inconclusive' else 'Not bisected'}:** "
                     f"{esc(report.message)}")
        lines += [f"- candidate `{c}`" for c in report.candidates]
    if report.reproducer:
        lines.append(f"- reproducer: `{report.reproducer}`")
    if report.replay:
        lines.append(f"- replay: `{report.replay}`")
    lines += ["", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in _table_rows(report)]
    lines += ["", f"{len(report.steps)} commits tested in {report.seconds:.1f} s; framework {report.framework}.", ""]
    return "\n".join(lines)


def write_reports(report: BisectReport, out: "str | Path") -> list[Path]:
    """Write ``bisect.txt``, ``bisect.md`` and ``bisect.json`` into the folder ``out`` (created)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {"bisect.txt": format_text(report, width=10_000) + "\n", "bisect.md": format_markdown(report),
             "bisect.json": json.dumps(report.to_dict(), indent=2, default=str) + "\n"}
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / name for name in files]
