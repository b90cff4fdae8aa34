"""Live progress of a campaign (rich), its timeline, and the PNG of cases and findings over time.

The coordinator feeds :class:`CampaignProgress` the workers' events; on a terminal it redraws a
table (cases, cases per minute, failures, findings, coverage of input classes, per worker); in a
log it prints one line every ``interval`` seconds.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from jfa_verify.cases.coverage import expected_classes

# The phases whose cases are new to the campaign (drawn by the search, or the --covering array's): they count toward
# coverage; a replay of a saved case or a shrink step does not (a --covering campaign once said "never drawn: cross,
# causal_bottom_right, float16" beside four findings of exactly those classes, all from its covering array).
NEW_CASE_PHASES = ("generate", "covering")

__all__ = ["CampaignProgress", "WorkerStats", "plot_timeline"]


@dataclass
class WorkerStats:
    """What one worker has done so far (from its events)."""

    worker: int
    device: str = ""
    seed: int = 0
    cases: int = 0
    failing: int = 0  # failing verdicts (examples of findings and shrink steps included)
    findings: int = 0
    state: str = "starting"
    started: float = field(default_factory=time.time)
    seconds: Counter = field(default_factory=Counter)  # where its case time went (breakdown keys)

    def rate(self, now: float) -> float:
        """Cases per minute since the worker started."""
        return 60.0 * self.cases / max(1e-9, now - self.started)


class CampaignProgress:
    """Aggregates worker events; shows them live (rich) or as periodic lines; keeps the timeline.

    Args:
        workers: number of workers. device_type, capabilities: the coverage column counts the classes expected
            of the kernel on that device (:func:`jfa_verify.cases.coverage.expected_classes`). console: a rich
            console (None: no output).
        interval: seconds between plain progress lines when the console is not a terminal.
    """

    def __init__(self, workers: int, *, device_type: str = "cpu", console=None, interval: float = 10.0,
                 capabilities=None):
        self.t0 = time.time()
        self.workers = {w: WorkerStats(w) for w in range(workers)}
        self.expected = expected_classes(device_type, capabilities)
        self.classes: Counter = Counter()
        self.statuses: Counter = Counter()
        self.phases: Counter = Counter()  # cases run per phase ("generate", "covering", "reuse", "shrink", ...)
        self.shrink_statuses: Counter = Counter()  # the verdicts of the shrink steps among ``statuses``
        self.findings: dict[str, dict] = {}  # signature id -> finding event (first seen)
        self.timeline: list[tuple[float, int, int]] = []  # (seconds, cases, findings)
        self.finding_times: list[tuple[float, str, str]] = []  # (seconds, id, status)
        self.console, self.interval = console, interval
        self._live = None
        self._last_line = 0.0

    # -- events ----------------------------------------------------------------------------------
    def event(self, worker: int, event: dict) -> None:
        stats = self.workers[worker]
        kind = event["event"]
        if kind == "start":
            stats.state, stats.device, stats.seed, stats.started = ("running", event["device"], event["seed"],
                                                                    time.time())
        elif kind == "case":
            stats.cases += 1
            self.statuses[event["status"]] += 1
            self.phases[event["phase"]] += 1
            if event["phase"] == "shrink":
                self.shrink_statuses[event["status"]] += 1
            if event["status"] in ("fail", "error", "crash", "hang"):
                stats.failing += 1
            if event["phase"] in NEW_CASE_PHASES:
                self.classes.update(event["classes"])
            for part, s in event.get("breakdown", {}).items():
                stats.seconds[part] += s
            stats.seconds["case"] += event["seconds"]
        elif kind == "finding":
            stats.findings += 1
            key = event.get("signature", event["id"])  # (one finding met by two workers: one signature)
            if key not in self.findings:
                self.findings[key] = {**event, "worker": worker, "seconds": time.time() - self.t0}
                self.finding_times.append((time.time() - self.t0, event["id"], event["status"]))
        elif kind == "done":
            stats.state = "interrupted" if event["summary"].get("interrupted") else "done"
        elif kind == "died":
            stats.state = f"died ({event['why']})"

    @property
    def cases(self) -> int:
        return sum(s.cases for s in self.workers.values())

    def coverage(self) -> tuple[int, int]:
        """(classes drawn, classes expected)."""
        return sum(1 for c in self.expected if self.classes.get(c)), len(self.expected)

    def tick(self) -> None:
        """Record the timeline and refresh the display (call often; it limits itself)."""
        now = time.time()
        if not self.timeline or now - self.t0 - self.timeline[-1][0] >= 1.0:
            self.timeline.append((now - self.t0, self.cases, len(self.findings)))
        if self.console is None:
            return
        if self._live is not None:
            self._live.update(self.table())
        elif now - self._last_line >= self.interval:
            self._last_line = now
            self.console.print(self.line(), highlight=False)

    # -- display ---------------------------------------------------------------------------------
    def line(self) -> str:
        now = time.time()
        drawn, expected = self.coverage()
        per = " ".join(f"w{s.worker}:{s.cases}" for s in self.workers.values())
        return (f"[{now - self.t0:6.0f} s] cases {self.cases} ({60 * self.cases / max(1e-9, now - self.t0):.0f}/min), "
                f"failing {sum(s.failing for s in self.workers.values())}, findings {len(self.findings)}, "
                f"coverage {drawn}/{expected} classes; {per}")

    def table(self):
        from rich.table import Table

        now = time.time()
        drawn, expected = self.coverage()
        table = Table(title=f"campaign: {now - self.t0:.0f} s, {self.cases} cases "
                            f"({60 * self.cases / max(1e-9, now - self.t0):.0f}/min), {len(self.findings)} finding(s), "
                            f"coverage {drawn}/{expected} input classes")
        for col in ("worker", "device", "seed", "state", "cases", "cases/min", "failing", "findings"):
            table.add_column(col)
        for s in self.workers.values():
            table.add_row(str(s.worker), s.device, str(s.seed), s.state, str(s.cases), f"{s.rate(now):.0f}",
                          str(s.failing), str(s.findings))
        return table

    def __enter__(self) -> "CampaignProgress":
        if self.console is not None and self.console.is_terminal:
            from rich.live import Live

            self._live = Live(self.table(), console=self.console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.update(self.table())
            self._live.__exit__(*exc)
            self._live = None
        elif self.console is not None:
            self.console.print(self.line(), highlight=False)

    def breakdown(self) -> dict[str, float]:
        """Seconds per part of a case, summed over workers (materialize, validate, kernel, reference, sdpa, compare,
        parts, invariants, io, ipc, and ``case``: the whole)."""
        total: Counter = Counter()
        for s in self.workers.values():
            total.update(s.seconds)
        return {k: round(v, 3) for k, v in sorted(total.items())}


def plot_timeline(progress: CampaignProgress, path: "str | Path", title: str = "") -> Path:
    """A PNG: cases over time (total) and findings over time (steps, one marker per finding, by status).

    Raises:
        ImportError: matplotlib is missing (``pip install 'jfa-verify[plots]'``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    t = [p[0] for p in progress.timeline] or [0.0]
    cases = [p[1] for p in progress.timeline] or [0]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax1.plot(t, cases, color="tab:blue")
    ax1.set_ylabel("cases verified")
    ax1.set_title(title or "campaign")
    times = [0.0] + [f[0] for f in progress.finding_times] + [t[-1]]
    counts = list(range(len(progress.finding_times) + 1)) + [len(progress.finding_times)]
    ax2.step(times, counts, where="post", color="tab:red")
    colors = {"fail": "tab:red", "error": "tab:orange", "crash": "black", "hang": "tab:purple"}
    for i, (ts, _, status) in enumerate(progress.finding_times, start=1):
        ax2.plot([ts], [i], "o", color=colors.get(status, "tab:gray"), label=status)
    handles = {h.get_label(): h for h in ax2.get_lines()[1:]}
    if handles:
        ax2.legend(handles.values(), handles.keys(), loc="lower right")
    ax2.set_ylabel("findings (unique)")
    ax2.set_xlabel("seconds")
    for ax in (ax1, ax2):  # counts: no tick at 0.5 of a case or a finding
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
