"""Plots of calibration records: error versus sequence length, and headroom histograms, per budget row.

Input: :class:`jfa_verify.workflows.calibrate.Record` lists (``jfa-verify calibrate`` writes them).
Output: two PNG files, one grid each (budget rows down, outputs across). Needs
matplotlib (the ``plots`` extra: ``pip install -e ".[plots]"``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Sequence

import numpy as np

from jfa_verify.judge.budgets import BudgetTable
from jfa_verify.judge.compare import OUTPUTS
from jfa_verify.workflows.calibrate import Record, record_headroom

__all__ = ["plot_error_vs_length", "plot_headroom", "write_report"]


def _grid(rows: Sequence[str]):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3.2 * len(OUTPUTS), 2.6 * len(rows)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(rows), len(OUTPUTS), squeeze=False)
    return fig, axes


def plot_error_vs_length(records: Sequence[Record], path: str | Path) -> Path:
    """Kernel and padded-SDPA maximum absolute error versus the case's longest key sequence.

    One dot per case and output (x: max_seqlen_k, tokens; y: max |error| against float64, in the
    output's units, log scale; exact results are drawn at 1e-12).
    """
    from matplotlib.ticker import NullFormatter

    rows = sorted({r.row for r in records})
    fig, axes = _grid(rows)
    for i, row in enumerate(rows):
        sub = [r for r in records if r.row == row]
        for j, out in enumerate(OUTPUTS):
            ax = axes[i][j]
            xs, ke, se = [], [], []
            for r in sub:
                if out not in r.outputs or out in r.problems:
                    continue
                e, s = r.outputs[out][:2]
                xs.append(max(1, r.case.get("max_seqlen_k", 1)))
                ke.append(max(e, 1e-12))
                se.append(max(s, 1e-12))
            if not xs:  # e.g. gradients of a forward-only row
                ax.set_title(f"{row} {out}: no data", fontsize=9)
                ax.set_axis_off()
                continue
            ax.scatter(xs, se, s=4, alpha=0.35, label="padded SDPA", color="tab:gray")
            ax.scatter(xs, ke, s=4, alpha=0.5, label="kernel", color="tab:blue")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels overlap on short ranges
            ax.set_title(f"{row} {out} ({len(xs)} cases)", fontsize=9)
            if i == len(rows) - 1:
                ax.set_xlabel("max_seqlen_k (tokens)")
            if j == 0:
                ax.set_ylabel("max abs error")
    axes[0][0].legend(fontsize=7, loc="upper left")
    path = Path(path)
    fig.savefig(path, dpi=110)
    return path


def plot_headroom(records: Sequence[Record], table: BudgetTable, path: str | Path) -> Path:
    """Histograms of log10(error / allowance) under ``table``; the red line at 0 is the pass/fail edge."""
    rows = sorted({r.row for r in records})
    fig, axes = _grid(rows)
    for i, row in enumerate(rows):
        values: dict = defaultdict(list)
        fails: dict = defaultdict(int)
        for r in (r for r in records if r.row == row):
            for out, numbers in r.outputs.items():
                if out in r.problems:
                    fails[out] += 1
                    continue
                h = record_headroom(numbers, table.budget(row, out))
                fails[out] += int(h > 1)
                values[out].append(math.log10(max(h, 1e-6)) if math.isfinite(h) else 1.0)
        for j, out in enumerate(OUTPUTS):
            ax = axes[i][j]
            v = np.asarray(values[out])
            if not v.size and not fails[out]:
                ax.set_title(f"{row} {out}: no data", fontsize=8)
                ax.set_axis_off()
                continue
            ax.hist(v, bins=np.linspace(-6, 0.5, 53), color="tab:green")
            ax.axvline(0.0, color="tab:red")
            p99 = float(np.quantile(v, 0.99)) if v.size else float("nan")
            ax.set_title(f"{row} {out}: n={v.size}, fail={fails[out]}, p99={10 ** p99:.2g}", fontsize=8)
            if i == len(rows) - 1:
                ax.set_xlabel("log10(error / allowance); exact at -6")
    fig.suptitle(f"headroom under budget table version {table.version}", fontsize=10)
    path = Path(path)
    fig.savefig(path, dpi=110)
    return path


def write_report(records: Sequence[Record], table: BudgetTable, out_dir: str | Path) -> list[Path]:
    """Both plots into ``out_dir`` (created): ``error_vs_length.png`` and ``headroom.png``.

    Raises:
        ValueError: no records.
    """
    if not records:
        raise ValueError("no calibration records to plot; pass files written by jfa-verify calibrate --records")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return [plot_error_vs_length(records, out_dir / "error_vs_length.png"),
            plot_headroom(records, table, out_dir / "headroom.png")]
