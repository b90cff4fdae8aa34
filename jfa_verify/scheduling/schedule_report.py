"""Compare the tile schedulers on one batch of lengths, as numbers and as a plot.

Plain inputs and outputs (lists, dicts, a PNG path) so a CLI can wrap them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence, Union

from jfa_verify.core.errors import InvalidInput
from jfa_verify.scheduling.schedules import SCHEDULERS, Schedule, workloads_backward, workloads_forward

__all__ = ["compare_schedulers", "plot_per_sm_load"]


def _row(schedule: Schedule) -> dict:
    return {
        "name": schedule.name,
        "num_sms": schedule.num_sms,
        "num_tiles": schedule.num_tiles,
        "max_load": schedule.max_load,
        "mean_load": schedule.mean_load,
        "imbalance": schedule.imbalance,
        "bound": schedule.bound,
        "bounded": schedule.bounded,
        "within_bound": max(schedule.durations, default=0) <= schedule.bound + 1e-9,
        "loads": list(schedule.loads),
    }


def compare_schedulers(
    q_lengths: Sequence[int],
    k_lengths: Sequence[int],
    *,
    num_sms: int,
    block_m: int,
    causal: bool = False,
    causal_alignment: str = "top_left",
    backward: bool = False,
    cluster_size: int = 1,
) -> list[dict]:
    """Schedule one batch with every scheduler and summarize the per-SM loads.

    Args:
        q_lengths, k_lengths: per-sequence query and key counts (ints >= 0).
        num_sms: persistent programs (SMs), >= 1.
        block_m: tile rows: BLOCK_M for the forward, BLOCK_N when ``backward``.
        causal, causal_alignment: as :func:`jfa_verify.scheduling.schedules.workloads_forward`.
        backward: schedule the dK/dV tiles instead of the forward tiles.
        cluster_size: cluster size for round-robin padding.

    Returns:
        One dict per scheduler, in the order launch_order, round_robin, zigzag,
        dynamic, with keys ``name``, ``num_sms``, ``num_tiles``, ``max_load``,
        ``mean_load``, ``imbalance`` (max / mean), ``bound`` (total / num_sms +
        max tile cost), ``bounded`` (the scheduler guarantees ``bound``),
        ``within_bound`` and ``loads`` (per SM, a list). Loads are in cost units
        (KV positions forward, query rows backward).

    Raises:
        InvalidInput: bad lengths, sizes or options.
    """
    make = workloads_backward if backward else workloads_forward
    tiles = make(q_lengths, k_lengths, block_m, causal=causal, causal_alignment=causal_alignment)
    rows = []
    for name, fn in SCHEDULERS.items():
        s = fn(tiles, num_sms, cluster_size=cluster_size) if name == "round_robin" else fn(tiles, num_sms)
        rows.append(_row(s))
    return rows


def plot_per_sm_load(results_or_schedules: Sequence[Union[dict, Schedule]], path) -> Path:
    """Write a PNG with one bar chart of per-SM load per scheduler.

    Args:
        results_or_schedules: the dicts of :func:`compare_schedulers`, or
            :class:`~jfa_verify.scheduling.schedules.Schedule` objects (any mix).
        path: where to write the PNG; parent folders are created.

    Returns:
        The path written. Each panel marks the mean load and, for bounded
        schedulers, the list-scheduling bound. Needs matplotlib (the ``plots``
        extra); imported here, with the Agg backend, not at module import.

    Raises:
        InvalidInput: an empty list or an entry that is neither a dict nor a Schedule.
    """
    rows = []
    for i, r in enumerate(results_or_schedules):
        if isinstance(r, Schedule):
            rows.append(_row(r))
        elif isinstance(r, dict) and "loads" in r and "name" in r:
            rows.append(r)
        else:
            raise InvalidInput(
                f"results_or_schedules[{i}]={r!r} is neither a Schedule nor a compare_schedulers dict; "
                "pass the output of compare_schedulers or schedulers' Schedules"
            )
    if not rows:
        raise InvalidInput("results_or_schedules=[] is empty; pass at least one schedule")

    # An Agg canvas on a bare Figure: no pyplot, so the global backend is untouched.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(10, 2.2 * len(rows)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(rows), 1, sharey=True, squeeze=False)
    for ax, r in zip(axes[:, 0], rows):
        loads = r["loads"]
        ax.bar(range(len(loads)), loads, width=1.0, color="#4c72b0", edgecolor="none")
        mean = sum(loads) / max(len(loads), 1)
        ax.axhline(mean, color="black", linestyle="--", linewidth=1, label=f"mean {mean:.0f}")
        if r.get("bounded"):
            ax.axhline(r["bound"], color="#c44e52", linewidth=1, label=f"bound {r['bound']:.0f}")
        imb = max(loads, default=0) / mean if mean else 1.0
        ax.set_title(f"{r['name']}: max/mean = {imb:.3f}", fontsize=10)
        ax.set_xlim(-0.5, len(loads) - 0.5)
        ax.set_ylabel("load")
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("SM (program id)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
