"""Kernels x cases in one table: ``jfa-verify matrix``.

Every kernel runs the same cases (a built-in suite, built once with generic tiles so the columns line
up) through :class:`jfa_verify.run.loop.Verifier`, the one run loop, and optionally a short campaign of its
own (:func:`jfa_verify.fuzz.run_campaign`: it keeps searching after a finding, one shrunk case per finding).
The result holds every :class:`~jfa_verify.run.runner.CaseResult`; it renders as JSON, Markdown (the
table, a summary per kernel with its worst headroom, and the findings with their reproducers and
replay commands) and a PNG heat map of headroom (kernel x case). Findings are grouped per kernel by
the key of :func:`jfa_verify.fuzz.findings.key_of` (status, error kind, lead output). Results of several
processes (one per kernel, so that a peer
that wrecks its CUDA context cannot take the others down) merge with :meth:`Matrix.merge`.

Cell statuses: ``pass``, ``fail``, ``error``, ``crash``, ``hang`` (the last four are findings; an error that ran out of
device memory is run once more, alone, before it stands), ``unsupported`` (the kernel's declared capabilities, with
the reason), and ``not run`` (the deadline, or a Ctrl-C or SIGTERM, came first: the matrix then says it was
interrupted). An accepted convention (``--accept``) is a pass marked ``accepted``; a convention that explains a failure
without ``--accept`` stays a failure.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from jfa_verify.cases.case import Case
from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.exits import ExitCode, exit_code_for
from jfa_verify.core.json_text import finite
from jfa_verify.core.paths import DEFAULT_REPRODUCERS
from jfa_verify.judge.compare import OUTPUTS
from jfa_verify.run.runner import FAILING_STATUSES, STATUSES
from jfa_verify.run.settings import RunSettings

__all__ = ["Cell", "Finding", "Matrix", "run_matrix"]

NOT_RUN = "not run"
# Share of --deadline the cases may use when campaigns follow (the campaigns share the rest).
CASES_SHARE = 0.65


@dataclass(frozen=True)
class Cell:
    """One kernel on one case: status, worst headroom (error / allowance; inf for non-finite trouble; None
    when nothing was compared), the finding's signature, reproducer and replay command, and the message."""

    kernel: str
    case_id: str
    status: str
    headroom: Optional[float] = None
    signature: str = ""
    reproducer: Optional[str] = None
    replay: Optional[str] = None
    message: str = ""
    conventions: tuple[str, ...] = ()
    accepted: bool = False
    detail: str = ""

    @classmethod
    def of(cls, result) -> "Cell":
        worst = result.worst
        return cls(result.kernel, result.case.case_id(), result.status, worst.headroom if worst else None,
                   kind_of(result.to_dict()) if result.failed else "", result.reproducer,
                   result.replay_command() if result.failed else None,
                   (result.message or "").splitlines()[0] if result.message else "",
                   tuple(result.conventions), result.accepted, _symptom(result.explain()))

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["conventions"] = list(self.conventions)
        d["headroom"] = finite(d["headroom"])  # (JSON has no infinity: "inf", as every report writes it)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Cell":
        d = dict(d)
        if isinstance(d.get("headroom"), str):
            d["headroom"] = float(d["headroom"])
        d["conventions"] = tuple(d.get("conventions", ()))
        return cls(**d)


@dataclass(frozen=True)
class Finding:
    """One kind of failure of one kernel: its signature, the cells (suite) or campaign cases that show it,
    and the smallest one's case, reproducer and replay command."""

    kernel: str
    signature: str
    source: str  # "suite" or "campaign"
    count: int
    case: Case
    reproducer: Optional[str]
    replay: Optional[str]
    conventions: tuple[str, ...] = ()
    found_after: Optional[int] = None  # campaign: examples the campaign drew in all
    detail: str = ""  # the smallest case's symptom: the exception's first line, or the first failing output's
    found_at: Optional[int] = None  # campaign: its cases run when it first met this finding (that one included)
    status: str = ""  # the verdict: fail, error, crash or hang (it decides the exit status)

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "signature": self.signature, "source": self.source, "count": self.count,
                "status": self.status,
                "found_after": self.found_after, "found_at": self.found_at, "detail": self.detail,
                "case": self.case.to_dict(), "describe": self.case.describe(), "reproducer": self.reproducer,
                "replay": self.replay, "conventions": list(self.conventions)}


@dataclass
class Matrix:
    """Kernels x cases: ``cells[(kernel, case_id)]``; ``campaigns[kernel]``: a campaign summary's dict."""

    kernels: list[str]
    cases: list[Case]
    cells: dict = field(default_factory=dict)
    campaigns: dict = field(default_factory=dict)
    campaign_findings: list[Finding] = field(default_factory=list)
    device: str = ""
    suite_note: str = ""
    seconds: dict = field(default_factory=dict)
    interrupted: bool = False  # Ctrl-C or SIGTERM ended the run: the cells hold the verdicts given by then

    def not_run(self) -> list[tuple[str, str]]:
        """``(kernel, case id)`` of the cells without a verdict: the deadline or a stop came first."""
        return [(k, c.case_id()) for k in self.kernels for c in self.cases if self.cell(k, c).status == NOT_RUN]

    # -- queries -----------------------------------------------------------------------------------
    def cell(self, kernel: str, case: Case) -> Cell:
        return self.cells.get((kernel, case.case_id()), Cell(kernel, case.case_id(), NOT_RUN))

    def counts(self, kernel: str) -> dict[str, int]:
        out = {s: 0 for s in (*STATUSES, NOT_RUN)}
        for case in self.cases:
            status = self.cell(kernel, case).status
            out[status] = out.get(status, 0) + 1
        return out

    def worst_headroom(self, kernel: str) -> Optional[float]:
        """The largest headroom over the kernel's compared cells (inf: non-finite trouble); None if none."""
        values = [c.headroom for c in (self.cell(kernel, case) for case in self.cases) if c.headroom is not None]
        return max(values, default=None)

    def findings(self) -> list[Finding]:
        """Suite findings grouped per (kernel, signature), the smallest case first; then the campaigns'."""
        groups: dict[tuple[str, str], list[tuple[Case, Cell]]] = {}
        for kernel in self.kernels:
            for case in self.cases:
                c = self.cell(kernel, case)
                if c.status in FAILING_STATUSES:
                    groups.setdefault((kernel, c.signature), []).append((case, c))
        out = []
        for (kernel, sig), members in groups.items():
            case, c = min(members, key=lambda m: (m[0].tokens(), m[0].batch))
            out.append(Finding(kernel, sig, "suite", len(members), case, c.reproducer, c.replay, c.conventions,
                               None, c.message or c.detail, status=c.status))
        return out + list(self.campaign_findings)

    @property
    def failed(self) -> bool:
        return bool(self.findings())

    def exit_code(self) -> ExitCode:
        """As for ``jfa-verify run``: a crash (4) before a hang (3) before any other finding (1); 0 with none."""
        return exit_code_for(f.status for f in self.findings())

    # -- serialization -----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        from jfa_verify.run.corpus import environment

        return {
            "format": "jfa-verify-matrix/1", "device": self.device, "suite_note": self.suite_note,
            "environment": environment(), "kernels": self.kernels, "seconds": self.seconds,
            "interrupted": self.interrupted,
            "not_run": [{"kernel": k, "case_id": case_id} for k, case_id in self.not_run()],
            "cases": [{"case_id": c.case_id(), "name": c.name, "describe": c.describe(), "case": c.to_dict()}
                      for c in self.cases],
            "cells": [cell.to_dict() for cell in self.cells.values()],
            "summary": {k: {"counts": self.counts(k), "worst_headroom": finite(self.worst_headroom(k))}
                        for k in self.kernels},
            "findings": [f.to_dict() for f in self.findings()],
            "campaigns": self.campaigns,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Matrix":
        """Rebuild from :meth:`to_dict` output (to merge or render again)."""
        cases = [Case.from_dict(c["case"]) for c in d["cases"]]
        m = cls(list(d["kernels"]), cases, device=d.get("device", ""), suite_note=d.get("suite_note", ""),
                seconds=d.get("seconds", {}), campaigns=d.get("campaigns", {}), interrupted=d.get("interrupted", False))
        for c in d["cells"]:
            cell = Cell.from_dict(c)
            m.cells[(cell.kernel, cell.case_id)] = cell
        m.campaign_findings = [Finding(f["kernel"], f["signature"], f["source"], f["count"], Case.from_dict(f["case"]),
                                       f["reproducer"], f["replay"], tuple(f.get("conventions", ())),
                                       f.get("found_after"), f.get("detail", ""), f.get("found_at"),
                                       # files written before the field: the signature starts with the status
                                       f.get("status") or f["signature"].split(" ", 1)[0])
                               for f in d.get("findings", []) if f["source"] == "campaign"]
        return m

    @classmethod
    def merge(cls, parts: Sequence["Matrix"]) -> "Matrix":
        """One matrix from several (kernels appended in order, cases united in first-seen order).

        Raises:
            InvalidInput: two parts hold the same kernel (one kernel's verdicts would silently replace the
                other's), or the parts ran on different devices.
        """
        owners: dict[str, int] = {}
        for i, part in enumerate(parts):
            for k in part.kernels:
                if k in owners:
                    raise InvalidInput(f"--from-json: kernel {k!r} is in matrix {owners[k] + 1} and matrix {i + 1}; "
                                       f"merge one matrix per kernel (run it once with every case instead)")
                owners[k] = i
        devices = sorted({p.device for p in parts if p.device})
        if len(devices) > 1:
            raise InvalidInput(f"--from-json: the matrices ran on different devices {devices}; merge one device's")
        out = cls([], [])
        seen: set[str] = set()
        for part in parts:
            out.kernels += [k for k in part.kernels if k not in out.kernels]
            for case in part.cases:
                if case.case_id() not in seen:
                    seen.add(case.case_id())
                    out.cases.append(case)
            out.cells.update(part.cells)
            out.campaigns.update(part.campaigns)
            out.campaign_findings += part.campaign_findings
            out.seconds.update(part.seconds)
            out.device = out.device or part.device
            out.interrupted = out.interrupted or part.interrupted  # (its cells not run stay so, and are named)
            out.suite_note = out.suite_note or part.suite_note
        return out

    # -- rendering ---------------------------------------------------------------------------------
    def to_markdown(self) -> str:
        """The table (a row per case, a column per kernel), a summary per kernel, then the findings."""
        lines = [f"# jfa-verify matrix ({self.device})", ""]
        if self.suite_note:
            lines += [self.suite_note, ""]
        if self.interrupted:
            total = len(self.kernels) * len(self.cases)
            lines += [f"Interrupted (Ctrl-C or SIGTERM): {len(self.not_run())} of {total} cells did not run (`not run` "
                      f"below); the others hold their verdicts.", ""]
        lines += ["Each cell: the verdict and the headroom, the worst output's error / its allowance (above 1 "
                  "fails; inf: NaN or an infinity of the wrong sign). A kernel without a backward on this device "
                  "is judged on its forward outputs only (`jfa-verify kernels` says which).", ""]
        lines.append("| case | " + " | ".join(self.kernels) + " |")
        lines.append("|---|" + "---|" * len(self.kernels))
        for case in self.cases:
            row = [_cell_text(self.cell(k, case)) for k in self.kernels]
            lines.append(f"| {case.name or case.case_id()} | " + " | ".join(row) + " |")
        lines += ["",
                  "| kernel | pass | fail | error | crash | hang | unsupported | not run | worst headroom | campaign |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for k in self.kernels:
            n = self.counts(k)
            camp = self.campaigns.get(k)
            camp_text = (f"{camp['cases_run']} cases, {len(camp['failures'])} finding(s)" if camp else "-")
            lines.append(f"| {k} | {n['pass']} | {n['fail']} | {n['error']} | {n['crash']} | {n['hang']} | "
                         f"{n['unsupported']} | {n[NOT_RUN]} | "
                         f"{_headroom_text(self.worst_headroom(k))} | {camp_text} |")
        findings = self.findings()
        lines += ["", f"## Findings ({len(findings)})", ""]
        for i, f in enumerate(findings, 1):
            conv = f" (explained by the declared convention {', '.join(f.conventions)})" if f.conventions else ""
            took = (f"campaign of {f.found_after} examples: first met at its case {f.found_at if f.found_at else '?'}, "
                    f"{f.count} failing case(s) with the shrink's" if f.source == "campaign"
                    else f"{f.count} suite case(s)")
            lines += [f"{i}. **{f.kernel}** ({took}): `{f.signature}`{conv}",
                      f"   - symptom: {f.detail}",
                      f"   - smallest case: {f.case.describe()} lengths={list(f.case.kv_lengths)}"
                      + (f" q_lengths={list(f.case.q_lengths)}" if f.case.q_lengths else ""),
                      f"   - reproducer: `{f.reproducer}`", f"   - replay: `{f.replay}`"]
        if not findings:
            lines.append("none")
        unsupported = {(k, self.cell(k, c).message) for k in self.kernels for c in self.cases
                       if self.cell(k, c).status == "unsupported"}
        if unsupported:
            lines += ["", "## Unsupported (declared)", ""]
            lines += [f"- {k}: {msg}" for k, msg in sorted(unsupported)]
        return "\n".join(lines) + "\n"

    def heatmap(self, path: "str | Path") -> Path:
        """A PNG of headroom, kernel (rows) x case (columns), log color scale; fail/error/unsupported/not run
        marked in the cell. Needs matplotlib (``pip install jfa-verify[plots]``)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
        from matplotlib.colors import LogNorm

        data = np.full((len(self.kernels), len(self.cases)), np.nan)
        marks = {}
        for i, k in enumerate(self.kernels):
            for j, case in enumerate(self.cases):
                c = self.cell(k, case)
                if c.headroom is not None and math.isfinite(c.headroom) and c.headroom > 0:
                    data[i, j] = c.headroom
                mark = {"fail": "F", "error": "E", "unsupported": "-", NOT_RUN: "."}.get(c.status, "")
                if c.status == "fail" and c.headroom is not None and not math.isfinite(c.headroom):
                    mark = "inf"
                if c.accepted:
                    mark = "A"
                marks[(i, j)] = mark
        fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(self.cases) + 3), 0.5 * len(self.kernels) + 2.5))
        finite = data[np.isfinite(data)]
        lo = max(1e-4, float(finite.min())) if finite.size else 1e-3
        hi = max(2.0, float(finite.max())) if finite.size else 2.0
        img = ax.imshow(np.ma.masked_invalid(data), aspect="auto", cmap="viridis", norm=LogNorm(vmin=lo, vmax=hi))
        for (i, j), mark in marks.items():
            if mark:
                ax.text(j, i, mark, ha="center", va="center", fontsize=7,
                        color="red" if mark in ("F", "E", "inf") else "grey")
        ax.set_yticks(range(len(self.kernels)), self.kernels)
        ax.set_xticks(range(len(self.cases)), [c.name or c.case_id() for c in self.cases], rotation=90, fontsize=6)
        fig.colorbar(img, ax=ax, label="headroom (error / allowance; > 1 fails)")
        ax.set_title(f"jfa-verify matrix: headroom per kernel and case ({self.device})\n"
                     f"F fail, E error, inf non-finite, - unsupported, . not run, A accepted convention", fontsize=8)
        fig.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path


# an output's line in CaseResult.explain: "<output>: max abs error X > allowance Y (...)" or "<output>: <problem>"
_OUTPUT_LINE = re.compile(rf"^({'|'.join(OUTPUTS)}): (?:max abs error (\S+) > allowance (\S+))?")


def _symptom(explanation: str) -> str:
    """The line of a verdict (:meth:`CaseResult.explain`) that says what went wrong, without the header: of
    the failing outputs, the worst one (a problem such as NaN before any error over its allowance, then the
    largest error / allowance), as the cell's headroom is; otherwise the first line that says what happened."""
    lines = [line.strip() for line in explanation.splitlines()[1:] if line.strip()]
    lines = [line for line in lines
             if not line.startswith(("replay:", "explained by", "accepted", "worst at", "wrong in"))]

    def badness(line: str) -> float:
        m = _OUTPUT_LINE.match(line)
        if m.group(2) is None:
            return math.inf  # NaN, infinities of the wrong sign, a wrong -inf pattern
        try:
            return float(m.group(2)) / float(m.group(3))
        except (ValueError, ZeroDivisionError):
            return math.inf

    outputs = [line for line in lines if _OUTPUT_LINE.match(line)]
    if outputs:
        return max(outputs, key=badness)  # the first of equals: max keeps the earliest
    return lines[0] if lines else ""


def kind_of(verdict: dict) -> str:
    """A finding's kind as text, from :func:`jfa_verify.fuzz.findings.key_of` (the campaigns' dedup key):
    ``"error RuntimeError"``, ``"fail non_finite in lse"``."""
    from jfa_verify.fuzz.findings import key_of

    _, status, kind, outputs = key_of(verdict)
    return f"{status} {kind}" + (f" in {', '.join(outputs)}" if outputs else "")


def _headroom_text(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return "inf" if not math.isfinite(x) else f"{x:.3g}"


def _cell_text(c: Cell) -> str:
    if c.status == "pass":
        return ("accepted " if c.accepted else "pass ") + _headroom_text(c.headroom)
    if c.status == "fail":
        return f"**FAIL** {_headroom_text(c.headroom)}"
    if c.status == "error":
        return "**ERROR**"
    return c.status


def run_matrix(kernels: Sequence, cases: Sequence[Case], device, settings: Optional[RunSettings] = None, *,
               reproducers: "str | Path", campaign_examples: int = 0, deadline_s: Optional[float] = None,
               suite_note: str = "", on_result: Optional[Callable] = None, jobs: int = 1) -> Matrix:
    """Run every case through every kernel (and a campaign per kernel); returns the :class:`Matrix`.

    Args:
        kernels: registered :class:`~jfa_verify.protocol.kernel.Kernel` objects.
        cases: the cases (the same for every kernel).
        device: a ``torch.device``.
        settings: how every case runs and is judged (:class:`~jfa_verify.run.settings.RunSettings`; None: the
            defaults): its ``plugins`` are the files the kernels came from (every replay command names them all),
            ``backward``, ``accept``, ``timeout_s`` as :class:`jfa_verify.run.loop.Verifier` reads them, ``seed``
            the campaigns' Hypothesis seed, ``isolate`` runs every case in a worker process
            (:mod:`jfa_verify.run.isolation`): a crash or a sticky CUDA error is that case's finding and the next
            case gets a fresh worker.
        reproducers: folder of failing-case files (campaigns use ``<reproducers>/campaign``).
        campaign_examples: examples of a campaign per kernel after its cases (0: none); the campaign
            keeps searching after a finding, one shrunk case per kind of finding.
        deadline_s: wall-clock seconds for the whole call; with campaigns, cells not started within
            :data:`CASES_SHARE` of it are ``not run`` and the campaigns share what is left (no case of
            theirs starts after it); without, cells not started by then are ``not run``. The cases' time is
            shared by the kernels in turn: each gets an equal part of what is left when its turn comes, and
            the time that fast kernels leave goes, in a further pass, to the cells a slower one did not reach.
        on_result: called with each :class:`~jfa_verify.run.runner.CaseResult` as it finishes (progress).
        jobs: worker processes per kernel (:meth:`jfa_verify.run.loop.Verifier.verify_all`): a kernel's cases run
            that many at a time, each in an isolated worker (more than 1 implies ``isolate``); they overlap
            Triton's compiling on the host. The verdicts do not depend on it; which cells a deadline leaves
            ``not run`` does. The campaigns do not use it.

    Cells that ran out of device memory are run once more, one at a time, after the kernel's other cells
    (:meth:`jfa_verify.run.loop.Verifier.verify_all`); the suite note says how many, and how many then ran.
    """
    from jfa_verify.run.corpus import campaign_folder
    from jfa_verify.run.loop import Verifier

    start = time.monotonic()
    matrix = Matrix([k.name for k in kernels], list(cases), device=str(device), suite_note=suite_note)
    late = lambda: deadline_s is not None and time.monotonic() - start > deadline_s  # noqa: E731
    # with campaigns, the cases get CASES_SHARE of the deadline: a slow suite must not starve the search
    cases_deadline = None if deadline_s is None else deadline_s * (CASES_SHARE if campaign_examples else 1.0)
    pending = {k.name: list(matrix.cases) for k in kernels}
    settings = settings or RunSettings()
    memory_reruns = [0, 0]  # cells run again, alone, after running out of device memory; those that then did not
    matrix.seconds.update({k.name: 0.0 for k in kernels})

    def run_cells(kernel, cells: list, workers: int, until: Optional[float]) -> list:
        """Run ``cells`` (cases) of ``kernel`` on ``workers`` worker processes, none started after ``until``;
        record each verdict in its cell and the time in the kernel's seconds; returns the results (None: not
        started)."""
        t0 = time.monotonic()
        each = settings.replace(isolate=settings.isolate or jobs > 1, jobs=workers)

        def record(result) -> None:  # each verdict as it comes: a Ctrl-C or SIGTERM must not lose those given
            matrix.cells[(kernel.name, result.case.case_id())] = Cell.of(result)
            if on_result is not None:
                on_result(result)

        try:
            with Verifier(kernel, device, reproducers, each) as verifier:
                results = verifier.verify_all(cells, on_result=record, deadline=until)
        finally:
            matrix.seconds[kernel.name] = round(matrix.seconds[kernel.name] + time.monotonic() - t0, 2)
        memory_reruns[0] += verifier.memory_reruns[0]
        memory_reruns[1] += verifier.memory_reruns[1]
        for case, result in zip(cells, results):
            if result is not None:  # None: not started by the deadline, so the cell stays "not run" for now
                # (a cell run again after running out of device memory: this is its verdict)
                matrix.cells[(kernel.name, case.case_id())] = Cell.of(result)
        return results

    # Passes over the kernels: each turn gets an equal part of the cases' time left (a slow kernel must not starve
    # the next); a later pass gives what the fast ones left to the cells a deadline skipped. It stops when every
    # cell has run, the time is spent, or a whole pass started no case.
    try:
        while True:
            todo = [k for k in kernels if pending[k.name]]
            started = 0
            for i, kernel in enumerate(todo):
                now = time.monotonic()
                own = None if cases_deadline is None else now + (start + cases_deadline - now) / (len(todo) - i)
                results = run_cells(kernel, pending[kernel.name], jobs, own)
                pending[kernel.name] = [c for c, r in zip(pending[kernel.name], results) if r is None]
                started += sum(r is not None for r in results)
            if not started or not any(pending.values()):
                break
            if cases_deadline is not None and time.monotonic() - start >= cases_deadline:
                break
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the verdicts given stand (as `run` keeps its); the rest "not run"
        matrix.interrupted = True
    if memory_reruns[0]:
        note = (f"{memory_reruns[0]} cell(s) that ran out of device memory were run again, one at a time: "
                f"{memory_reruns[1]} no longer did")
        matrix.suite_note = f"{matrix.suite_note}; {note}" if matrix.suite_note else note
    # the cells in the cases' order, whichever pass or worker ran them
    matrix.cells = {key: matrix.cells[key] for key in ((k.name, c.case_id()) for k in kernels for c in matrix.cases)
                    if key in matrix.cells}
    for i, kernel in enumerate(kernels):
        if campaign_examples and not late() and not matrix.interrupted:
            # the time left is shared by the campaigns still to run
            share = None if deadline_s is None else (deadline_s - (time.monotonic() - start)) / (len(kernels) - i)
            _campaign(matrix, kernel, device, campaign_folder(reproducers), settings, campaign_examples, share)
    return matrix


def _campaign(matrix: Matrix, kernel, device, corpus, settings: RunSettings, examples, deadline_s) -> None:
    from jfa_verify.fuzz.campaign import Campaign
    from jfa_verify.run.corpus import replay_command

    plugins = settings.plugins
    t0 = time.monotonic()
    deadline = None if deadline_s is None else time.time() + max(0.0, deadline_s)
    summary = Campaign(kernel, settings, max_examples=examples, corpus_dir=corpus, device=device,
                       deadline=deadline).run()
    matrix.interrupted = matrix.interrupted or summary.interrupted  # (it keeps the stop to itself: no campaign after)
    matrix.campaigns[kernel.name] = summary.to_dict()
    matrix.seconds[f"{kernel.name} campaign"] = round(time.monotonic() - t0, 2)
    for f in summary.failures:
        replay = replay_command(f.path, kernel.name, plugins) if f.path else None
        sig = f.signature or {}
        kind = f"{f.status} {sig.get('error_kind', '')}".strip() + (
            f" in {', '.join(sig['outputs'])}" if sig.get("outputs") else "")
        matrix.campaign_findings.append(Finding(kernel.name, kind, "campaign", 1 + f.examples, f.case,
                                                str(f.path) if f.path else None, replay, (), summary.generated,
                                                _symptom(f.explanation), f.found_at, f.status))


@dataclass(frozen=True)
class MatrixOptions:
    """What ``jfa-verify matrix`` runs (kernels by name, the suites' cases) or merges (``from_json``), and writes."""

    kernels: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()  # built-in suite names (none: the default suite)
    campaign: int = 0  # examples of a campaign per kernel after the cases
    device: Optional[str] = None  # "cuda", "cpu" or None (the GPU when there is one)
    # how every case runs (plugins, accepted conventions, timeout, backward, isolation) and the suites' seed
    settings: RunSettings = field(default_factory=lambda: RunSettings(isolate=True))
    reproducers: Optional[str] = DEFAULT_REPRODUCERS
    filter: Optional[str] = None  # only cases whose name contains this text
    max_cases: Optional[int] = None
    deadline_s: Optional[float] = None
    jobs: int = 1
    quiet: bool = False  # no line per case
    from_json: tuple[str, ...] = ()  # merge these matrices instead of running
    json: Optional[str] = None
    markdown: Optional[str] = None
    png: Optional[str] = None


def command(options: MatrixOptions) -> int:
    """``jfa-verify matrix``: run (or merge ``options.from_json``), write JSON/Markdown/PNG, print the summary.

    Returns the exit status: 4 when a finding is a crash, else 3 when one is a hang, else 1 when there is a
    finding, 2 when no cell was inside any kernel's capabilities (nothing was checked), 0 otherwise
    (:class:`jfa_verify.core.exits.ExitCode`).
    """

    import contextlib

    from jfa_verify.run.interrupts import stops_held

    if options.from_json:
        matrix = Matrix.merge([_read_matrix(f) for f in options.from_json])
    else:
        matrix = _run(options)
    stopped = matrix.interrupted and not options.from_json  # this run was stopped (a merge only names its parts')
    # a second Ctrl-C while an interrupted run writes what it has must not cost that report
    with stops_held() if stopped else contextlib.nullcontext():
        _write_outputs(matrix, options)
    skipped = sum(matrix.counts(k)[NOT_RUN] for k in matrix.kernels)
    if stopped:
        print(f"jfa-verify matrix: interrupted: {skipped} of {len(matrix.kernels) * len(matrix.cases)} cells not run"
              + (" (report written)" if options.json or options.markdown else ""), file=sys.stderr, flush=True)
        return int(ExitCode.INTERRUPTED)
    if skipped:  # not a finding, but not a full pass either: say so, whatever the exit status
        print(f"jfa-verify matrix: {skipped} of {len(matrix.kernels) * len(matrix.cases)} cells not run "
              "(--deadline came first, or cases not in every merged matrix): this is not a full run", flush=True)
    checked = [c for c in matrix.cells.values() if c.status not in ("unsupported", NOT_RUN)]
    if matrix.failed:
        return int(matrix.exit_code())
    if not checked:
        print("jfa-verify matrix: error: no cell was inside any kernel's capabilities: nothing was checked")
        return int(ExitCode.USAGE)
    return int(ExitCode.OK)


def _write_outputs(matrix: Matrix, options: MatrixOptions) -> None:
    """Write the JSON, Markdown and PNG asked for, and print the table and what was written."""
    if options.json:
        from jfa_verify.run.report import write_json

        write_json(options.json, matrix.to_dict())
    text = matrix.to_markdown()
    if options.markdown:
        Path(options.markdown).write_text(text)
    if options.png:
        matrix.heatmap(options.png)
    print(text, flush=True)
    written = [str(p) for p in (options.json, options.markdown, options.png) if p]
    if written:
        print("wrote " + ", ".join(written), flush=True)


def _read_matrix(path: str) -> Matrix:
    """A matrix written by ``jfa-verify matrix --json``.

    Raises:
        InvalidInput: the file is not JSON, or not a matrix (a run report, a case file, another version).
    """
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidInput(f"--from-json {path}: not a readable JSON file ({type(e).__name__}: {e})") from None
    if not isinstance(doc, dict) or doc.get("format") != "jfa-verify-matrix/1":
        found = doc.get("format", "no 'format' key") if isinstance(doc, dict) else type(doc).__name__
        raise InvalidInput(f"--from-json {path}: not a matrix written by `jfa-verify matrix --json` "
                           f"(format {found!r}, want 'jfa-verify-matrix/1')")
    try:
        return Matrix.from_dict(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidInput(f"--from-json {path}: a damaged matrix file ({type(e).__name__}: {e})") from None


def _run(options: MatrixOptions) -> Matrix:
    from jfa_verify.checks.suites import get_suite
    from jfa_verify.core.device import device_label, select_device
    from jfa_verify.protocol.registry import get_kernel, load_plugins

    if not options.kernels:
        raise InvalidInput("matrix needs --kernel NAME at least once (or --from-json FILES to merge)")
    # first: on the CPU it turns on Triton's interpreter, which must happen before any kernel module imports Triton
    device = select_device(options.device)
    load_plugins(options.settings.plugins)
    kernels = [get_kernel(name) for name in dict.fromkeys(options.kernels)]
    cases, notes = [], []
    for name in options.suites or ("default",):
        # generic tiles: one set of columns for every kernel
        suite = get_suite(name, device.type, options.settings.seed)
        picked = suite.matching(options.filter)
        if options.max_cases:
            picked = picked[: max(0, options.max_cases - len(cases))]
        cases += picked
        notes.append(f"suite {name}: {suite.note_for(picked)}")
    if not cases:
        raise InvalidInput(f"no case of suites {list(options.suites) or ['default']} matches "
                           f"--filter {options.filter!r}")
    where = device_label(device)
    print(f"jfa-verify matrix: {len(kernels)} kernel(s) x {len(cases)} case(s) on {where}"
          + (f", {options.jobs} workers per kernel" if options.jobs > 1 else "")
          + (f", campaign of {options.campaign} per kernel" if options.campaign else ""), flush=True)

    def progress(result) -> None:
        if not options.quiet:
            print(f"  {result.kernel:22s} {result.status:11s} {result.case.name}", flush=True)

    return run_matrix(kernels, cases, device, options.settings, reproducers=options.reproducers,
                      campaign_examples=options.campaign, deadline_s=options.deadline_s,
                      suite_note="; ".join(notes), on_result=progress, jobs=options.jobs)
