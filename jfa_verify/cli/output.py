"""What the commands print with: the console, progress lines for a CI log, the table of case verdicts."""

from __future__ import annotations

import sys


def make_console():
    from rich.console import Console

    # Wide enough for the tables when output goes to a file or a CI log; lines of text are never folded
    # (soft_wrap): a replay command or a path broken across two lines does not paste.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 160, soft_wrap=True)


class ProgressLines:
    """Progress as plain lines, at most one per ``interval`` seconds and one at the end: for output that is not a
    terminal (a CI log), where a live bar shows nothing. Used as a context manager, it also prints a heartbeat line
    when no line came for ``heartbeat`` seconds (a case running for minutes left a CI log silent, as if the run had
    hung); ``waiting`` says what the heartbeat waits on."""

    def __init__(self, console, what: str, total: int, interval: float = 10.0, heartbeat: float = 60.0,
                 waiting: str = ""):
        import threading
        import time
        from collections import Counter

        self.console, self.what, self.total, self.interval = console, what, total, interval
        self.heartbeat, self.waiting = heartbeat, waiting
        self.t0 = self.last = time.monotonic()
        self.statuses: Counter = Counter()
        self._lock, self._stop, self._thread = threading.Lock(), threading.Event(), None

    def __enter__(self) -> "ProgressLines":
        import threading

        self._thread = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        import time

        while not self._stop.wait(min(self.heartbeat, 5.0)):
            with self._lock:
                now = time.monotonic()
                if now - self.last >= self.heartbeat:
                    self.last = now
                    self._print(now, f"; no verdict for {self.heartbeat:g} s, still running{self.waiting}")

    def _print(self, now: float, tail: str = "") -> None:
        counts = ", ".join(f"{v} {k}" for k, v in sorted(self.statuses.items()))
        n = sum(self.statuses.values())
        self.console.print(f"[{now - self.t0:6.0f} s] {self.what}: {n}/{self.total} cases"
                           + (f" ({counts})" if counts else "") + tail, highlight=False, markup=False)

    def add(self, result) -> None:
        import time

        with self._lock:
            self.statuses[result.status] += 1
            now, n = time.monotonic(), sum(self.statuses.values())
            if now - self.last >= self.interval or n == self.total:
                self.last = now
                self._print(now)


def counting_progress(console, what: str, total: int, *, disable: bool = False):
    """A terminal's progress bar that counts the verdicts as they come (issue 43, 13: it showed none, where the
    progress lines of a log do): returns ``(progress, add)``, ``add`` called with each case's result."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("[green]{task.fields[passed]} passed[/], [red]{task.fields[failed]} failed[/]"
                                   "{task.fields[others]}"),
                        TimeElapsedColumn(), console=console, transient=True, disable=disable)
    task = progress.add_task(what, total=total, passed=0, failed=0, others="")
    counts = {"passed": 0, "failed": 0, "unsupported": 0}

    def add(result) -> None:
        key = "passed" if result.status == "pass" else "failed" if result.failed else "unsupported"
        counts[key] += 1
        others = f", {counts['unsupported']} unsupported" if counts["unsupported"] else ""
        progress.update(task, advance=1, passed=counts["passed"], failed=counts["failed"], others=others)

    return progress, add


def results_table(results, title: str):
    from rich.table import Table

    table = Table(title=title)
    for col in ("case", "status", "dtype", "worst output", "error / allowance", "verdict"):
        table.add_column(col)
    for r in results:
        w = r.worst
        if r.status in ("error", "crash", "hang") or w is None:
            err, worst = ("contract", "-") if r.findings_of("contract") else ("-", "-")
        else:
            err = "non-finite" if w.problem else f"{w.kernel_error:.2e} / {w.allowance:.2e}"
            worst = w.name
        verdict = {"pass": "[green]pass", "fail": "[red]FAIL", "error": "[red]ERROR", "crash": "[red]CRASH",
                   "hang": "[red]HANG", "unsupported": "[yellow]skip"}[r.status]
        table.add_row(r.case.name or r.case.case_id(), r.status, r.case.dtype, worst, err, verdict)
    return table


def print_campaign(report: dict, console) -> None:
    """A campaign's summary: counts, each finding with its replay command, fixed files, notes, coverage."""
    from pathlib import Path

    from jfa_verify.fuzz.workers import distinct_failures
    from jfa_verify.run.corpus import NOW_PASSING, replay_command
    from jfa_verify.run.parallelism import counted

    new = set(report["new_findings"])
    console.print(f"campaign on {report['kernel']} ({report['device']}, {counted(report['workers'], 'worker')}, seed "
                  f"{report['seed']}): {counted(report['cases'], 'case')} run in {report['seconds']:.1f} s "
                  f"({report['cases_per_minute']:.0f}/min; {report['drawn']} drawn, "
                  + (f"{covering} of the covering array, " if (covering := report.get("covering")) else "")
                  + "and saved findings replayed and shrink steps run besides; a draw of a case judged before "
                  "runs nothing"
                  + (f"; {counted(packs['launches'], 'packed launch', 'packed launches')}, {packs['split']} split "
                     f"to find the failing case"
                     if (packs := report.get("packs", {})).get("launches") else "") + ")"
                  + "".join(f", {k} {v}" for k, v in sorted(report["statuses"].items()))
                  + (" -- interrupted" if report["interrupted"] else ""), highlight=False, markup=False)
    # One entry per distinct failure, grouped as `jfa-verify findings` groups rows (a new user's campaign printed one
    # planted bug as two NEW findings, a covering campaign as 49): its head, then each further finding file of it.
    rows, plugins = report["findings"], report["config"]["run"]["plugins"]
    failures = distinct_failures(rows, new)
    for failure in failures:
        f, more = rows[failure["rows"][0]], failure["rows"][1:]
        tag = "NEW " if failure["new"] else ""
        console.print(f"  {tag}finding {f['id'] or '(unmerged)'} [{f['status']}] {f['error_kind']} "
                      f"{'/'.join(f['outputs']) or '-'}: {f['case']}, {counted(failure['examples'], 'example')}"
                      + (f", {counted(len(more), 'more finding file', 'more finding files')} of the same failure "
                         f"(below)" if more else "") + "\n"
                      f"    replay: {replay_command(f['path'], f['kernel'], plugins)}",
                      highlight=False, markup=False)
        for other in (rows[i] for i in more):
            console.print(f"    same failure: {'new ' if other['id'] in new else ''}finding {other['id']}: "
                          f"{other['case']}, {counted(other['examples'], 'example')}; replay: "
                          f"{replay_command(other['path'], other['kernel'], plugins)}", highlight=False, markup=False)
    if rows:  # (the same findings counted by failure; the exit status is their worst status, as before)
        fresh = sum(failure["new"] for failure in failures)
        console.print(f"  {counted(len(failures), 'distinct failure', 'distinct failures')} ({fresh} new) in "
                      f"{counted(len(rows), 'finding file', 'finding files')}; `jfa-verify findings` lists each "
                      f"file",
                      highlight=False, markup=False)
    else:
        console.print("  no findings", highlight=False, markup=False)
    for p in report["fixed"]:
        console.print(f"  fixed (now passes; its file moved to {Path(p).parent / NOW_PASSING}): {Path(p).name}",
                      highlight=False, markup=False)
    for w, d in report["worker_errors"].items():
        console.print(f"  worker {w} died: {d['why']}", highlight=False, markup=False)
    for n in report["notes"]:
        console.print(f"  note: {n}", highlight=False, markup=False)
    cov = report["coverage"]
    outside = cov["outside_capabilities"]
    console.print(f"coverage: {cov['drawn']}/{cov['expected']} input classes drawn; never drawn: "
                  f"{', '.join(cov['never_drawn']) or 'none'}"
                  + (f"; not counted, outside the kernel's capabilities: {', '.join(outside)}" if outside else ""),
                  highlight=False, markup=False)
