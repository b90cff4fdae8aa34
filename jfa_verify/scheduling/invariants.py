"""Invariants of a tile schedule, checked on the host and against an instrumented run.

A scheduler is right only if every valid tile runs exactly once, no empty tile
runs, and the per-SM load stays within a provable bound of the mean
(``DOMAIN.md``, "Tile scheduling"). Checks collect every :class:`Violation`
and return them; :func:`assert_schedule_ok` raises once with all of them.

Violation kinds:

========================  =====================================================
``num_sms``               ``len(sm_tiles) != num_sms`` or ``num_sms < 1``
``workload``              the workload list itself is malformed
``out_of_range``          a tile index that is not in the workload list
``mismatch``              a scheduled tile differs from the workload tile of its index
``duplicate``             a valid tile scheduled more than once
``missing``               a valid (rows > 0) tile not scheduled
``empty``                 an empty (rows == 0) tile scheduled
``block_bounds``          ``block * block_size >= length`` or wrong ``rows``
``sentinel_position``     a sentinel before a real tile in an SM's list
``sentinel_count``        ``cluster_size`` or more sentinels
``cluster_padding``       slot count or ``num_sms`` not a multiple of ``cluster_size``
``bound``                 an SM above the list-scheduling bound (bounded schedulers)
``nondeterministic``      two runs of a scheduler on the same input differ
``mutated_input``         a scheduler changed its input list
``visits_shape``          a visit or program-id array of the wrong shape
``visit_count``           a tile visited a number of times other than scheduled
``program_id``            a tile run by a program other than its scheduled SM
``device_plan``           launch arrays planned on the device differ from the host planner's
========================  =====================================================
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from jfa_verify.core.errors import InvalidInput, JFAError
from jfa_verify.protocol.kernel import LaunchPlan, Visits
from jfa_verify.scheduling.schedules import Schedule, Tile

__all__ = [
    "Violation",
    "ScheduleInvariantError",
    "check_schedule",
    "check_deterministic",
    "check_visits",
    "check_instrumented_run",
    "imbalance",
    "assert_schedule_ok",
    "format_violations",
]

_MAX_LISTED = 100


@dataclass(frozen=True)
class Violation:
    """One broken invariant.

    Attributes:
        kind: short machine-readable name (see the module docstring table).
        message: human sentence naming the tile and SM involved.
        tile: the tile index involved, if any.
        sm: the SM (program id) involved, if any.
    """

    kind: str
    message: str
    tile: Optional[int] = None
    sm: Optional[int] = None

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


class ScheduleInvariantError(JFAError, AssertionError):
    """A schedule or an instrumented run breaks a scheduling invariant.

    ``violations`` holds every :class:`Violation`; the message lists them.
    """

    def __init__(self, message: str, violations: Sequence[Violation] = ()):
        super().__init__(message)
        self.violations = list(violations)


def imbalance(schedule: Schedule) -> float:
    """``max_load / mean_load`` over the schedule's SMs (1.0 for zero total load)."""
    return schedule.imbalance


def _tile_bounds(t: Tile) -> Optional[str]:
    if t.block_size < 1 or t.block < 0 or t.block * t.block_size >= t.length:
        return (
            f"block={t.block} with block_size={t.block_size} starts at row {t.block * t.block_size}, "
            f"outside the sequence's length={t.length}"
        )
    want = min(t.block_size, t.length - t.block * t.block_size)
    if t.rows != want:
        return f"rows={t.rows} but block {t.block} of length={t.length} with block_size={t.block_size} has {want}"
    return None


def check_schedule(
    schedule: Schedule,
    workloads: Sequence[Tile],
    *,
    cluster_size: int = 1,
    bound: bool = True,
) -> list[Violation]:
    """Every invariant a schedule of ``workloads`` must meet.

    Args:
        schedule: the schedule under test.
        workloads: the tiles it was built from (before pruning, or any list of
            tiles with distinct indices); tiles are matched by ``tile.index``.
        cluster_size: CTAs per cluster; up to ``cluster_size - 1`` sentinel
            tiles are allowed, only at the end of an SM's list, and for
            ``cluster_size > 1`` the slot count and ``num_sms`` must be
            multiples of it.
        bound: check ``max_duration <= schedule.bound`` (Graham's
            list-scheduling bound) when the scheduler claims it
            (``schedule.bounded``: zigzag and dynamic).

    Returns:
        All violations, in a stable order; empty when the schedule is right.
    """
    out: list[Violation] = []
    by_index: dict[int, Tile] = {}
    for pos, w in enumerate(workloads):
        if not isinstance(w, Tile) or w.sentinel or w.index < 0:
            out.append(Violation("workload", f"workloads[{pos}]={w!r} is not a real tile"))
        elif w.index in by_index:
            out.append(Violation("workload", f"workloads[{pos}] repeats tile index {w.index}", tile=w.index))
        else:
            by_index[w.index] = w
            if w.rows > 0 and (msg := _tile_bounds(w)):
                out.append(Violation("block_bounds", f"workload {w.describe()}: {msg}", tile=w.index))

    if schedule.num_sms < 1 or len(schedule.sm_tiles) != schedule.num_sms:
        out.append(
            Violation(
                "num_sms",
                f"schedule has num_sms={schedule.num_sms} but {len(schedule.sm_tiles)} per-SM lists",
            )
        )

    slots: dict[int, list[tuple[int, int]]] = {}
    sentinels = 0
    for sm, tiles in enumerate(schedule.sm_tiles):
        seen_sentinel_at: Optional[int] = None
        for pos, t in enumerate(tiles):
            where = f"SM {sm} position {pos}"
            if t.sentinel:
                sentinels += 1
                if seen_sentinel_at is None:
                    seen_sentinel_at = pos
                continue
            if seen_sentinel_at is not None:
                out.append(
                    Violation(
                        "sentinel_position",
                        f"{t.describe()} at {where} runs after a sentinel (position {seen_sentinel_at}); "
                        "sentinels may only pad the end",
                        tile=t.index,
                        sm=sm,
                    )
                )
            w = by_index.get(t.index)
            if w is None:
                out.append(
                    Violation(
                        "out_of_range",
                        f"{t.describe()} at {where} has an index that is not in the workload list "
                        f"({len(by_index)} tiles)",
                        tile=t.index,
                        sm=sm,
                    )
                )
                continue
            if t != w:
                out.append(
                    Violation("mismatch", f"{where} holds {t!r}, but the workload tile is {w!r}", tile=t.index, sm=sm)
                )
            if w.rows == 0:
                out.append(
                    Violation(
                        "empty",
                        f"empty {w.describe()} (rows=0) scheduled at {where}; prune it before scheduling",
                        tile=t.index,
                        sm=sm,
                    )
                )
            slots.setdefault(t.index, []).append((sm, pos))

    for idx, places in sorted(slots.items()):
        if len(places) > 1 and by_index[idx].rows > 0:
            where = ", ".join(f"SM {sm} position {pos}" for sm, pos in places)
            out.append(
                Violation(
                    "duplicate",
                    f"{by_index[idx].describe()} scheduled {len(places)} times: {where}",
                    tile=idx,
                    sm=places[1][0],
                )
            )
    for idx, w in sorted(by_index.items()):
        if w.rows > 0 and idx not in slots:
            out.append(Violation("missing", f"{w.describe()} is valid (rows={w.rows}) but on no SM", tile=idx))

    if sentinels and sentinels >= cluster_size:
        out.append(
            Violation(
                "sentinel_count",
                f"{sentinels} sentinel tiles with cluster_size={cluster_size}; padding needs fewer than cluster_size",
            )
        )
    if cluster_size > 1:
        total_slots = sum(len(tiles) for tiles in schedule.sm_tiles)
        if total_slots % cluster_size:
            out.append(
                Violation(
                    "cluster_padding",
                    f"{total_slots} tile slots is not a multiple of cluster_size={cluster_size}; "
                    "pad with sentinels",
                )
            )
        if schedule.num_sms % cluster_size:
            out.append(
                Violation(
                    "cluster_padding",
                    f"num_sms={schedule.num_sms} is not a multiple of cluster_size={cluster_size}",
                )
            )

    if bound and schedule.bounded and schedule.num_sms >= 1:
        limit = schedule.bound
        for sm, d in enumerate(schedule.durations):
            if d > limit + 1e-9:
                out.append(
                    Violation(
                        "bound",
                        f"SM {sm} load {d} exceeds the list-scheduling bound {limit:.3f} "
                        f"(total/num_sms + max tile cost, tile_overhead={schedule.tile_overhead})",
                        sm=sm,
                    )
                )
    return out


def check_deterministic(
    fn: Callable[..., Schedule], workloads: Sequence[Tile], num_sms: int, **kwargs
) -> list[Violation]:
    """Run scheduler ``fn(workloads, num_sms, **kwargs)`` twice (on two copies of
    the list) and report any difference, or any change to the input list."""
    before = list(workloads)
    first = fn(list(workloads), num_sms, **kwargs)
    second = fn(list(workloads), num_sms, **kwargs)
    out: list[Violation] = []
    if list(workloads) != before:
        out.append(Violation("mutated_input", f"{getattr(fn, '__name__', fn)!r} changed its workloads list"))
    if first.num_sms != second.num_sms or first.sm_tiles != second.sm_tiles:
        for sm, (a, b) in enumerate(zip(first.sm_tiles, second.sm_tiles)):
            if a != b:
                ia = [t.index for t in a]
                ib = [t.index for t in b]
                out.append(
                    Violation("nondeterministic", f"SM {sm} ran tiles {ia} then {ib} on the same input", sm=sm)
                )
        if len(first.sm_tiles) != len(second.sm_tiles):
            out.append(
                Violation(
                    "nondeterministic",
                    f"runs built {len(first.sm_tiles)} and {len(second.sm_tiles)} per-SM lists",
                )
            )
    return out


def _as_int_array(name: str, values, out: list[Violation]) -> Optional[np.ndarray]:
    if hasattr(values, "detach"):  # torch tensor, without importing torch
        values = values.detach().cpu().numpy()
    arr = np.asarray(values)
    if arr.ndim != 1:
        out.append(Violation("visits_shape", f"{name} has shape {arr.shape}; record one entry per tile index"))
        return None
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.number) or not np.all(arr == np.round(arr)):
            out.append(Violation("visits_shape", f"{name} has dtype {arr.dtype} with non-integer entries"))
            return None
    return arr.astype(np.int64)


def check_visits(
    schedule: Schedule,
    visits,
    program_ids=None,
    *,
    num_tiles: Optional[int] = None,
) -> list[Violation]:
    """Compare an instrumented kernel run with its schedule.

    Args:
        schedule: the schedule the kernel walked.
        visits: per tile index, how many times the kernel ran that tile; a
            1-D list, numpy array or torch tensor of length ``num_tiles``.
            Scheduled tiles must read 1, every other index (pruned or empty)
            0. Sentinels have no index and are not counted.
        program_ids: optional, same shape: the program (SM) id that ran each
            tile; checked against the schedule for scheduled tiles only.
        num_tiles: expected length of the arrays (the workload size); defaults
            to ``len(visits)``.

    Returns:
        All violations; empty when the run matches the schedule.
    """
    out: list[Violation] = []
    v = _as_int_array("visits", visits, out)
    if v is None:
        return out
    n = len(v) if num_tiles is None else int(num_tiles)
    if len(v) != n:
        out.append(Violation("visits_shape", f"visits has {len(v)} entries but num_tiles={n}"))
        return out
    expected = np.zeros(n, dtype=np.int64)
    assign = schedule.assignments
    for idx in assign:
        if 0 <= idx < n:
            expected[idx] = 1
        else:
            out.append(
                Violation("visits_shape", f"scheduled tile {idx} has no entry in visits (length {n})", tile=idx)
            )
    for idx in np.flatnonzero(v != expected).tolist():
        if idx in assign:
            sm, pos = assign[idx]
            why = "missing visit" if v[idx] == 0 else "visited more than once"
            msg = f"tile {idx} visited {v[idx]} times, scheduled once on SM {sm} position {pos} ({why})"
        else:
            sm = None
            msg = f"tile {idx} visited {v[idx]} times but is not scheduled (pruned or empty); expected 0"
        out.append(Violation("visit_count", msg, tile=idx, sm=sm))
    if program_ids is not None:
        p = _as_int_array("program_ids", program_ids, out)
        if p is None:
            return out
        if len(p) != n:
            out.append(Violation("visits_shape", f"program_ids has {len(p)} entries but num_tiles={n}"))
            return out
        for idx, (sm, pos) in sorted(assign.items()):
            if 0 <= idx < n and p[idx] != sm:
                out.append(
                    Violation(
                        "program_id",
                        f"tile {idx} ran on program {p[idx]} but is scheduled on SM {sm} position {pos}",
                        tile=idx,
                        sm=sm,
                    )
                )
    return out


def format_violations(violations: Sequence[Violation], *, header: str = "", max_listed: int = _MAX_LISTED) -> str:
    """One message for many violations: a count per kind, then each one
    (the first ``max_listed``; the rest are counted)."""
    counts = Counter(v.kind for v in violations)
    summary = ", ".join(f"{k}: {c}" for k, c in counts.items())
    lines = [f"{header}{len(violations)} violation(s) ({summary})"]
    lines += [f"  - {v}" for v in violations[:max_listed]]
    if len(violations) > max_listed:
        lines.append(f"  ... and {len(violations) - max_listed} more (see the error's .violations)")
    return "\n".join(lines)


def assert_schedule_ok(
    schedule: Schedule,
    workloads: Sequence[Tile],
    *,
    cluster_size: int = 1,
    bound: bool = True,
    visits=None,
    program_ids=None,
) -> None:
    """Raise :class:`ScheduleInvariantError` listing every violation of
    :func:`check_schedule` (and of :func:`check_visits` when ``visits`` is
    given, with ``num_tiles`` = the workload size)."""
    __tracebackhide__ = True
    violations = check_schedule(schedule, workloads, cluster_size=cluster_size, bound=bound)
    if visits is not None:
        num_tiles = max((t.index for t in workloads if isinstance(t, Tile)), default=-1) + 1
        violations += check_visits(schedule, visits, program_ids, num_tiles=num_tiles)
    elif program_ids is not None:
        raise InvalidInput("program_ids given with visits=None; pass both arrays from the instrumented run")
    if violations:
        header = f"schedule {schedule.name!r} (num_sms={schedule.num_sms}, {schedule.num_tiles} tiles): "
        raise ScheduleInvariantError(format_violations(violations, header=header), violations)


def _plan_alone(kind: str, planned) -> list[Violation]:
    """A pass's plan without visits: its schedule's invariants (:func:`check_schedule`) or, for a pass no framework
    schedule built (a grid), each valid tile listed in exactly one program slot and no empty tile listed."""
    if planned.schedule is not None:
        return [Violation(v.kind, f"{kind}: {v.message}", tile=v.tile, sm=v.sm)
                for v in check_schedule(planned.schedule, planned.workloads, cluster_size=planned.cluster_size)]
    listed = np.zeros(len(planned.workloads), dtype=np.int64)
    for prog in planned.programs:
        for idx in prog:
            if 0 <= idx < len(listed):
                listed[idx] += 1
    out = []
    for idx, t in enumerate(planned.workloads):
        want = 0 if t.empty else 1
        if listed[idx] != want:
            what = "an empty tile is planned" if want == 0 else "a valid tile is not planned exactly once"
            out.append(Violation("visit_count", f"{kind}: tile {idx} (sequence {t.sequence}, block {t.block}) is in "
                                 f"the plan {listed[idx]} times: {what}", tile=idx))
    return out


def check_instrumented_run(plan: LaunchPlan, visits: Optional[Visits], *, passes: Sequence[str] = ("fwd", "dq", "dkdv")
                           ) -> list[Violation]:
    """Check an instrumented kernel run (:class:`~jfa_verify.protocol.kernel.KernelRun`'s ``plan`` and ``visits``).

    Independent of what the scheduler claimed: for every pass and head, each
    tile with rows must have run exactly once and each empty tile never, and
    each tile must have run on the program its plan gave it. When a framework
    scheduler built the pass (``PassPlan.schedule``), the host invariants of
    :func:`check_schedule` are checked too. A kernel that records no visits
    (``visits=None``: ``gluon_jfa``) has its plan judged alone: the
    schedules' invariants and the device plan against the host planner's.

    Args:
        plan: the :class:`~jfa_verify.protocol.kernel.LaunchPlan` the kernel ran.
        visits: the :class:`~jfa_verify.protocol.kernel.Visits` it recorded, or None when it records none.
        passes: which passes ran (omit the backward ones after a forward-only run).

    Returns:
        All violations, each message prefixed with its pass and head.
    """
    out: list[Violation] = []
    for kind in passes:
        planned = plan.passes[kind]
        if visits is None:
            out += _plan_alone(kind, planned)
            continue
        tiles = planned.workloads
        counts = np.asarray(visits.counts[kind].cpu())
        ran_on = np.asarray(visits.programs[kind].cpu())
        if counts.shape[0] != len(tiles) or ran_on.shape != counts.shape:
            out.append(Violation("visits_shape", f"{kind}: visits {counts.shape} and programs {ran_on.shape} for "
                                 f"{len(tiles)} tiles; record one row per tile"))
            continue
        expected = np.array([0 if t.empty else 1 for t in tiles], dtype=np.int64)
        scheduled_on = np.full(len(tiles), -1, dtype=np.int64)
        for p, prog in enumerate(planned.programs):
            for idx in prog:
                scheduled_on[idx] = p
        for h in range(counts.shape[1]):
            for idx in np.flatnonzero(counts[:, h] != expected).tolist():
                t = tiles[idx]
                what = "an empty tile ran" if expected[idx] == 0 else "a valid tile did not run exactly once"
                out.append(Violation("visit_count", f"{kind} head {h}: tile {idx} (sequence {t.sequence}, block "
                                     f"{t.block}) ran {counts[idx, h]} times: {what}", tile=idx))
            for idx in np.flatnonzero((counts[:, h] > 0) & (ran_on[:, h] != scheduled_on)).tolist():
                out.append(Violation("program_id", f"{kind} head {h}: tile {idx} ran on program {ran_on[idx, h]} "
                                     f"but was scheduled on {scheduled_on[idx]}", tile=idx, sm=int(scheduled_on[idx])))
        if planned.schedule is not None:
            for v in check_schedule(planned.schedule, planned.workloads, cluster_size=planned.cluster_size):
                out.append(Violation(v.kind, f"{kind}: {v.message}", tile=v.tile, sm=v.sm))
    if plan.arrays is not None and plan.reference is not None:  # every launch's arrays, the passes' and others'
        from jfa_verify.scheduling.device_plan import disagreement

        for kind in sorted(set(plan.arrays) & set(plan.reference)):
            why = disagreement(plan.arrays[kind], plan.reference[kind])
            if why is not None:
                out.append(Violation("device_plan", f"{kind}: the launch arrays planned on the device are not the "
                                     f"host planner's: {why}"))
    return out
