"""Launch plans computed on the offsets' device: the host planner's tiles and programs with no host round trip.

The host planner (:func:`~jfa_verify.scheduling.schedules.workloads_forward` /
:func:`~jfa_verify.scheduling.schedules.workloads_backward` dealt by a scheduler of
:mod:`jfa_verify.scheduling.planning`) is a Python loop per tile: tens of milliseconds a call on a
1,000-sequence batch, paid on every training step because every step brings new offsets. This module
builds the same launch arrays with a fixed number of tensor operations on the device that holds the
offsets, so a kernel's public call reads nothing back to the host (FA3 builds its scheduler metadata on
the GPU for the same reason; Dao, "FlashAttention-3", 2024).

Fixed capacity instead of a count read back: a pass over ``T`` rows in tiles of ``block`` rows has at most
``B + T // block`` tiles (``ceil(L / block) <= L // block + 1`` per sequence), known from the tensors'
shapes. Slots past the real tile count hold filler entries, and every program past the real ones is
empty (``prog_start[p] == prog_start[p + 1]``), so a kernel walking ``[prog_start[p], prog_start[p + 1])``
runs exactly the host plan's tiles.

Three device planners, the same arrays: :func:`device_tiles` then :func:`plan_pass` (torch operations, the
reference the others are tested against; about eighty small launches), :func:`fused_pass` (two Triton launches
and a sort, any size) and :func:`one_launch_pass` (one launch of one program, the passes of up to
``plan_kernels.PLAN_SLOTS`` slots: :class:`DeviceLaunchPlan` can plan a call's forward, offsets included, in that
one launch, on CUDA once :data:`ONE_LAUNCH_ON_CUDA` is on; each small launch cost the host 10-20 us on the H100 of
2026-12-07, a call's planning 0.23 ms).

The host planner stays the reference: :func:`plan_pass` returns arrays whose first ``count`` tiles and
whose programs equal :func:`host_arrays` of the host plan entry for entry (tested on drawn batches), and
:func:`to_pass_plan` reads a device plan back as a :class:`~jfa_verify.protocol.kernel.PassPlan` so the
framework's schedule checks judge it exactly as they judge a host plan.

Offsets are trusted, as FlashAttention's varlen API trusts ``cu_seqlens``: they are read through a
clamp to ``[0, T]`` and a running maximum, so bad offsets can give wrong tiles but never a tile outside
the buffer. Validate them first (:func:`jfa_verify.core.contract.validate_inputs`) where that matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from jfa_verify.core.contract import CallShape, JaggedProblem, _diagonal_bounds
from jfa_verify.core.errors import InvalidInput
from jfa_verify.protocol.kernel import LaunchPlan, PassPlan, TileSizes
from jfa_verify.scheduling.planning import GridScheduler, PersistentScheduler, default_num_sms
from jfa_verify.scheduling.schedules import Schedule, Tile, workloads_backward, workloads_forward

__all__ = ["DEVICE_SCHEDULERS", "DeviceLaunchPlan", "DeviceTiles", "PlanArrays", "capacity", "clamped_lengths",
           "clamped_offsets", "device_tiles", "disagreement", "flatten_programs", "fused_pass", "kernel_offsets",
           "launch_plan", "launch_tensors", "one_launch_fits", "one_launch_pass", "plannable", "plan_pass",
           "host_arrays", "read_back", "to_pass_plan"]

# Scheduler names a device plan reproduces. "grid": one tile per program (no persistent loop);
# "round_robin" drops cluster sentinels exactly as the host programs do, so it deals like "launch_order".
DEVICE_SCHEDULERS = ("grid", "launch_order", "round_robin", "zigzag")
# Whether a CUDA call plans its passes in one launch (one_launch_pass) without being asked. Off: on an H100 (gated
# green with it on, docs/evidence/h100-2026-12-08) it cut a forward call's host time on an idle GPU from 0.7-1.7 ms to
# 0.3-1.2 ms, so host-bound calls got faster (uniform-32 causal forward 0.93x -> 1.22x FA2), but calls that wait on
# the GPU got 1-7% slower (forward+backward 0-3%, every batch), likely its one 4,096-lane program's device time on the
# stream (not profiled). A training step waits on the GPU.
ONE_LAUNCH_ON_CUDA = False
# The block of the filler entries past a plan's real tiles (sequence 0, this block): past every sequence's rows, so
# a kernel that runs one program per slot (a grid) finds nothing to do there (plan_kernels.py writes the same).
FILLER_BLOCK = 1 << 30


def capacity(total_rows: int, batch: int, block: int) -> int:
    """Upper bound on a pass's tiles (empty ones included): ``B + T // block`` (0 for an empty batch, whose rows
    belong to no sequence); ints, no device work."""
    return batch + total_rows // block if batch else 0


def kernel_offsets(offsets: Optional[torch.Tensor], total_rows: int) -> Optional[torch.Tensor]:
    """``offsets`` (``[B + 1]`` int32/int64, or None) as a kernel reads them: int32 while ``total_rows < 2**31``
    (every value then fits), else as given; None stays None.

    A kernel's offsets pointer type is part of its compiled signature, so int64 offsets built every kernel variant a
    second time (a fifth of ``triton_jfa``'s variants for 1,000 drawn campaign cases, issue 39). The cast is one
    small device op for int64 callers (nested tensors' offsets) and none for int32 ones (FA2's ``cu_seqlens``)."""
    return offsets.to(torch.int32) if offsets is not None and total_rows < 2**31 else offsets


def clamped_offsets(offsets: torch.Tensor, total_rows: int) -> torch.Tensor:
    """``offsets`` clamped to ``[0, T]`` and made non-decreasing (a running maximum), on their device, in the
    dtype kernels read (:func:`kernel_offsets`): valid offsets come back with their values unchanged, bad ones can
    no longer point outside the buffer."""
    return kernel_offsets(_running_max_clamped(offsets, total_rows), total_rows)


def _running_max_clamped(offsets: torch.Tensor, total_rows: int) -> torch.Tensor:
    return torch.cummax(offsets.clamp(0, total_rows), dim=0).values


def clamped_lengths(offsets: torch.Tensor, total_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(starts [B], lengths [B])`` int64 of :func:`clamped_offsets`."""
    off = _running_max_clamped(offsets, total_rows).to(torch.int64)
    return off[:-1], off[1:] - off[:-1]


@dataclass(frozen=True)
class DeviceTiles:
    """The non-empty tiles of one pass, in the host workloads' order, as ``[capacity]`` int64 tensors.

    Entry ``i < count`` is the ``i``-th non-empty tile: ``seq`` its sequence, ``block`` its block in the
    sequence, ``index`` its position in the host workload list (which also lists one empty tile per
    sequence with no rows), ``cost`` its cost (:class:`~jfa_verify.scheduling.schedules.Tile`'s). ``valid``
    marks ``i < count``; ``count`` is a 0-d tensor (never read on the host by a launch).
    """

    seq: torch.Tensor
    block: torch.Tensor
    index: torch.Tensor
    cost: torch.Tensor
    valid: torch.Tensor
    count: torch.Tensor

    @property
    def capacity(self) -> int:
        return self.seq.numel()


def _ceil_div(x: torch.Tensor, d: int) -> torch.Tensor:
    return torch.div(x + (d - 1), d, rounding_mode="floor")


def _key_bounds(i, q_len, k_len, causal, alignment, window):
    """Vectorized :func:`jfa_verify.core.contract.key_range`: ``(lo, hi)`` int64 tensors."""
    lo, hi = _diagonal_bounds(i, q_len, k_len, causal, alignment, window)
    lo = torch.zeros_like(k_len) if lo is None else torch.minimum(lo.clamp(min=0), k_len)
    hi = k_len if hi is None else torch.minimum(hi.clamp(min=0), k_len)
    return lo, torch.maximum(lo, hi)


def device_tiles(lengths: torch.Tensor, other_lengths: torch.Tensor, block: int, cap: int, *, backward: bool,
                 causal: bool = False, causal_alignment: str = "top_left", window=None) -> DeviceTiles:
    """The non-empty tiles of a pass, computed on ``lengths``' device with no synchronization.

    Args:
        lengths: ``[B]`` int64, the blocked dimension's lengths (``L_q`` forward and dQ, ``L_k`` dK/dV).
        other_lengths: ``[B]`` int64, the other dimension's (``L_k`` forward, ``L_q`` dK/dV).
        block: BLOCK_M (forward) or BLOCK_N (dK/dV) rows per tile.
        cap: slots, at least the pass's workload count (:func:`capacity`).
        backward: dK/dV tiles (cost: query rows seeing the key block) instead of query tiles (cost: keys seen).
        causal, causal_alignment, window: the mask (:func:`jfa_verify.core.contract.key_range`'s rule).

    Returns:
        :class:`DeviceTiles` equal, entry for entry, to the non-empty tiles of ``workloads_forward`` (or
        ``workloads_backward``) of the same lengths.
    """
    dev = lengths.device
    nblk = _ceil_div(lengths, block)
    ends = torch.cumsum(nblk, 0)
    work_starts = torch.cumsum(nblk.clamp(min=1), 0) - nblk.clamp(min=1)  # one empty workload per empty sequence
    i = torch.arange(cap, device=dev)
    count = ends[-1] if lengths.numel() else torch.zeros((), dtype=torch.int64, device=dev)
    if lengths.numel() == 0:
        zeros = torch.zeros(cap, dtype=torch.int64, device=dev)
        return DeviceTiles(zeros, zeros, zeros, zeros, torch.zeros(cap, dtype=torch.bool, device=dev), count)
    seq = torch.searchsorted(ends, i, right=True).clamp(max=lengths.numel() - 1)
    valid = i < count
    blk = torch.where(valid, i - (ends[seq] - nblk[seq]), torch.zeros_like(i))
    length, other = lengths[seq], other_lengths[seq]
    first = blk * block
    rows = torch.minimum(length - first, torch.full_like(first, block))
    if backward:  # jfa_verify.core.contract.rows_seeing, vectorized: q_len = other, k_len = length
        q_len, k_len = other, length
        lo0, hi0 = _diagonal_bounds(torch.zeros_like(q_len), q_len, k_len, causal, causal_alignment, window)
        end_key = first + rows
        start = torch.zeros_like(first) if hi0 is None else (first - hi0 + 1).clamp(min=0)
        stop = q_len if lo0 is None else torch.minimum(q_len, end_key - lo0)
        cost = torch.where(q_len > 0, (stop - start).clamp(min=0), torch.zeros_like(first))
    else:  # jfa_verify.core.contract.keys_seen
        lo, _ = _key_bounds(first, length, other, causal, causal_alignment, window)
        _, hi = _key_bounds(first + rows - 1, length, other, causal, causal_alignment, window)
        cost = (hi - lo).clamp(min=0)
    zero = torch.zeros_like(i)
    return DeviceTiles(torch.where(valid, seq, zero), torch.where(valid, blk, torch.full_like(i, FILLER_BLOCK)),
                       torch.where(valid, work_starts[seq] + blk, i), torch.where(valid, cost, zero), valid, count)


@dataclass(frozen=True)
class PlanArrays:
    """A pass's launch arrays (int32, on the device): program ``p`` runs the tiles at positions
    ``prog_start[p] .. prog_start[p + 1] - 1`` of ``tile_seq``/``tile_block``/``tile_id`` (the host
    workload index, for instrumentation). ``programs`` is the launch grid's first axis (an int)."""

    tile_seq: torch.Tensor
    tile_block: torch.Tensor
    tile_id: torch.Tensor
    prog_start: torch.Tensor
    programs: int
    scheduler: str


def plan_pass(tiles: DeviceTiles, scheduler: str, num_programs: Optional[int] = None) -> PlanArrays:
    """Deal ``tiles`` to programs as the host scheduler ``scheduler`` does (one of :data:`DEVICE_SCHEDULERS`).

    ``num_programs``: persistent programs (the SM count; ignored by ``"grid"``, which launches one program per
    slot, the ones past the real tiles empty).

    Raises:
        InvalidInput: an unknown scheduler name or ``num_programs < 1`` for a persistent one.
    """
    if scheduler not in DEVICE_SCHEDULERS:
        raise InvalidInput(f"scheduler={scheduler!r} has no device plan; choose one of {DEVICE_SCHEDULERS}")
    cap = tiles.capacity
    dev = tiles.seq.device
    i = torch.arange(cap, device=dev)
    if scheduler == "grid":
        order = i
        starts = torch.minimum(torch.arange(cap + 1, device=dev), tiles.count)
        n = cap
    else:
        if num_programs is None or num_programs < 1:
            raise InvalidInput(f"num_programs={num_programs} for scheduler {scheduler!r}: pass the SM count (>= 1)")
        n = int(num_programs)
        if scheduler == "zigzag":
            # rank by (-cost, index); invalid slots after every real tile
            big = tiles.cost.max() + 1 if cap else 0
            key = torch.where(tiles.valid, (big - tiles.cost) * cap + i, (big + 1) * cap + i)
            by_rank = torch.argsort(key)
            rank = torch.empty_like(by_rank)
            rank[by_rank] = i
            r = rank % n
            program = torch.where((rank // n) % 2 == 0, r, n - 1 - r)
        else:
            rank, program = i, i % n
        program = torch.where(tiles.valid, program, torch.full_like(program, n))
        order = torch.argsort(program * cap + rank)
        counts = torch.zeros(n + 1, dtype=torch.int64, device=dev).index_add_(0, program, torch.ones_like(program))
        starts = torch.cat([torch.zeros(1, dtype=torch.int64, device=dev), torch.cumsum(counts[:n], 0)])
    i32 = torch.int32
    return PlanArrays(tiles.seq[order].to(i32), tiles.block[order].to(i32), tiles.index[order].to(i32),
                      starts.to(i32), n, scheduler)


_SCHED_CODES = {"grid": 0, "launch_order": 1, "round_robin": 1, "zigzag": 2}


def _scheduler_code(scheduler: str, num_programs: Optional[int], cap: int) -> tuple[int, int]:
    """``(code, programs)`` of a device scheduler for the planning kernels (0 grid: one program per slot, 1
    round-robin, 2 zigzag over ``num_programs``).

    Raises:
        InvalidInput: an unknown scheduler name or ``num_programs < 1`` for a persistent one.
    """
    if scheduler not in DEVICE_SCHEDULERS:
        raise InvalidInput(f"scheduler={scheduler!r} has no device plan; choose one of {DEVICE_SCHEDULERS}")
    code = _SCHED_CODES[scheduler]
    if code and (num_programs is None or num_programs < 1):
        raise InvalidInput(f"num_programs={num_programs} for scheduler {scheduler!r}: pass the SM count (>= 1)")
    return code, cap if code == 0 else int(num_programs)


def _window_sides(causal: bool, window) -> tuple[int, int]:
    """``(left, right)`` key spans the planning kernels read, -1 for an unbounded side (causal: right 0)."""
    left = window[0] if window is not None and window[0] >= 0 else -1
    right = 0 if causal else (window[1] if window is not None and window[1] >= 0 else -1)
    return left, right


def fused_pass(lengths: torch.Tensor, other_lengths: torch.Tensor, block: int, cap: int, scheduler: str,
               num_programs: Optional[int] = None, *, backward: bool, causal: bool = False,
               causal_alignment: str = "top_left", window=None, with_ids: bool = False) -> PlanArrays:
    """:func:`device_tiles` then :func:`plan_pass` in two Triton launches (:mod:`~jfa_verify.scheduling.plan_kernels`)
    and three tensor operations (the running tile count, and for zigzag a stable sort by cost), the same arrays.

    ``with_ids``: ``tile_id`` holds the host workload indices (instrumented launches read them); otherwise the
    slot (kernels that are not instrumented never read it). Runs wherever Triton runs ``lengths``' tensors (a
    CUDA device, or the interpreter on the CPU).

    Raises:
        InvalidInput: as :func:`plan_pass`.
    """
    from jfa_verify.scheduling import plan_kernels as pk

    code, n = _scheduler_code(scheduler, num_programs, cap)
    dev, batch = lengths.device, lengths.numel()
    i32 = dict(dtype=torch.int32, device=dev)
    tile_seq, tile_block, tile_id = (torch.empty(cap, **i32) for _ in range(3))
    if batch == 0 or cap == 0:
        return PlanArrays(tile_seq, tile_block, tile_id, torch.zeros(n + 1, **i32), n, scheduler)
    prog_start = torch.empty(n + 1, **i32)
    ends = torch.cumsum(torch.div(lengths + (block - 1), block, rounding_mode="floor"), 0)
    steps = batch.bit_length() + 1
    seq = blk = by_rank = ends  # unread unless zigzag
    if code == 2:
        seq, blk, key = (torch.empty(cap, dtype=torch.int64, device=dev) for _ in range(3))
        left, right = _window_sides(causal, window)
        pk._tiles_kernel[(triton_cdiv(cap, pk.SLOTS),)](
            ends, lengths, other_lengths, seq, blk, key, batch, cap, steps, max(left, 0), max(right, 0),
            BLOCK=block, WITH_COST=True, BACKWARD=backward, BOTTOM_RIGHT=causal_alignment == "bottom_right",
            HAS_LEFT=left >= 0, HAS_RIGHT=right >= 0, S=pk.SLOTS)
        by_rank = torch.sort(key, descending=True, stable=True).indices
    empty_before = ends
    if with_ids:
        empty = (lengths == 0).to(torch.int64)
        empty_before = torch.cumsum(empty, 0) - empty
    pk._deal_kernel[(triton_cdiv(max(cap, n + 1), pk.SLOTS),)](
        ends, lengths, seq, blk, by_rank, empty_before, tile_seq, tile_block, tile_id, prog_start, batch, cap, n,
        steps, BLOCK=block, SCHED=code, WITH_IDS=with_ids, S=pk.SLOTS)
    return PlanArrays(tile_seq, tile_block, tile_id, prog_start, n, scheduler)


def one_launch_fits(batch: int, cap: int, programs: int, total_rows: int, slots: Optional[int] = None) -> bool:
    """Whether :func:`one_launch_pass` plans a pass of ``batch`` sequences, ``cap`` slots and ``programs`` programs
    over offsets into ``total_rows`` rows: its one program holds each in ``slots`` lanes (default
    ``plan_kernels.PLAN_SLOTS``), and the offsets it writes are int32 (:func:`kernel_offsets`)."""
    from jfa_verify.scheduling.plan_kernels import PLAN_SLOTS

    slots = slots or PLAN_SLOTS
    return 1 <= batch < slots and cap < slots and programs < slots and total_rows < 2**31


def one_launch_pass(offsets: tuple, rows: tuple, batch: int, block: int, cap: int, scheduler: str,
                    num_programs: Optional[int] = None, *, backward: bool, causal: bool = False,
                    causal_alignment: str = "top_left", window=None, with_ids: bool = False,
                    same_lengths: tuple = (None, None), write: tuple = (None, None),
                    slots: Optional[int] = None) -> PlanArrays:
    """:func:`fused_pass`'s arrays in one launch of one program (``plan_kernels._plan_kernel``), from the caller's
    offsets: the clamp, the lengths, the tiles, the zigzag ranks and the deal, with no tensor operation but the
    outputs' allocation (a forward call's planning was about ten small launches and a sort, most of its host time
    on the H100, issue 38). Only where :func:`one_launch_fits`.

    Args:
        offsets: ``(a, b)`` ``[B + 1]`` int32/int64 offsets of the blocked dimension (queries forward and dQ, keys
            for dK/dV) and of the other, as the caller passed them (clamped here as :func:`clamped_offsets` does).
        rows: ``(T_a, T_b)``, the rows each indexes.
        same_lengths: ``(La, Lb)``: an int where every sequence of that dimension has that many rows (broadcast-Q's
            queries; its offsets are then not read), else None.
        write: ``(a_out, b_out)``: ``[B + 1]`` int32 tensors that receive the clamped offsets (the ones the
            attention kernels read), or None.
        block, cap, scheduler, num_programs, backward, causal, causal_alignment, window, with_ids: as
            :func:`fused_pass`.
        slots: the program's lanes, a power of two (:func:`one_launch_fits`; default ``plan_kernels.PLAN_SLOTS``,
            one compiled variant: tests in the interpreter pass fewer, whose sort it runs in Python).

    Raises:
        InvalidInput: as :func:`plan_pass`.
    """
    from jfa_verify.scheduling import plan_kernels as pk

    code, n = _scheduler_code(scheduler, num_programs, cap)
    a_off, b_off = offsets
    dev = b_off.device
    out = torch.empty(3 * cap + n + 1, dtype=torch.int32, device=dev)
    slots = slots or pk.PLAN_SLOTS
    scratch = torch.empty(6 * slots, dtype=torch.int64, device=dev)
    left, right = _window_sides(causal, window)
    la, lb = same_lengths
    a_out, b_out = write
    flags = ((pk.F_BACKWARD if backward else 0) | (pk.F_BOTTOM_RIGHT if causal_alignment == "bottom_right" else 0)
             | (pk.F_HAS_LEFT if left >= 0 else 0) | (pk.F_HAS_RIGHT if right >= 0 else 0)
             | (pk.F_A_ALL if la is not None else 0) | (pk.F_B_ALL if lb is not None else 0)
             | (pk.F_WRITE_A if a_out is not None else 0) | (pk.F_WRITE_B if b_out is not None else 0)
             | (pk.F_WITH_IDS if with_ids else 0) | code << pk.SCHED_SHIFT)
    tile_seq, tile_block, tile_id, prog_start = out[:cap], out[cap:2 * cap], out[2 * cap:3 * cap], out[3 * cap:]
    pk._plan_kernel[(1,)](
        b_off if a_off is None else a_off, b_off, out if a_out is None else a_out, out if b_out is None else b_out,
        scratch, tile_seq, tile_block, tile_id, prog_start, rows[0], rows[1], la or 0, lb or 0, batch, cap, n,
        batch.bit_length() + 1, max(left, 0), max(right, 0), block, flags, P=slots, num_warps=pk.PLAN_WARPS)
    return PlanArrays(tile_seq, tile_block, tile_id, prog_start, n, scheduler)


def triton_planner_runs(device: torch.device) -> bool:
    """Whether :func:`fused_pass` runs on ``device``'s tensors in this process: compiled on CUDA, or in the
    interpreter on the CPU. ``@triton.jit`` chose one of the two when the planner's module was first imported (a
    process that ran CUDA cases and then CPU ones, as the GPU gate's mutant tests do, has the compiled planner),
    so the module's own mode decides, not the environment now."""
    from jfa_verify.core.device import interpreting

    if device.type != "cuda" and not interpreting():
        return False
    from jfa_verify.scheduling import plan_kernels

    interpreted = type(plan_kernels._deal_kernel).__name__ == "InterpretedFunction"
    return interpreted == (device.type != "cuda")


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def flatten_programs(programs, num_tiles: int, *, drop_empty: bool = False) -> tuple[list[int], list[int]]:
    """The one schedule flattening: programs (lists of tile indices) as ``(order, prog_start)``, program ``p``
    running ``order[prog_start[p]:prog_start[p + 1]]``. ``drop_empty``: programs with no tile get no entry (a
    kernel that launches no CTA for them).

    Raises:
        InvalidInput: a program lists an index outside ``[0, num_tiles)`` (a ValueError).
    """
    order: list[int] = []
    starts = [0]
    for prog in programs:
        if drop_empty and len(prog) == 0:
            continue
        for idx in prog:
            idx = int(idx)
            if not 0 <= idx < num_tiles:
                raise InvalidInput(f"schedule tile index {idx} outside [0, {num_tiles}); a schedule lists tile "
                                   f"indices")
            order.append(idx)
        starts.append(len(order))
    return order, starts


def host_arrays(plan: PassPlan) -> dict:
    """The host plan's launch arrays as int lists: ``tile_seq``, ``tile_block``, ``tile_id`` (program order)
    and ``prog_start`` (``programs + 1`` entries), the reference a device plan must equal
    (:func:`flatten_programs` of its programs)."""
    order, starts = flatten_programs(plan.programs, len(plan.workloads))
    return dict(tile_seq=[plan.workloads[i].sequence for i in order],
                tile_block=[plan.workloads[i].block for i in order], tile_id=order, prog_start=starts)


def launch_tensors(lists: dict, device) -> dict:
    """:func:`host_arrays`' int lists as a launch's int32 tensors on ``device``, with ``programs`` (an int)."""
    as_i32 = lambda xs: torch.tensor(xs, dtype=torch.int32, device=device)  # noqa: E731
    out = {name: as_i32(lists[name]) for name in ("tile_seq", "tile_block", "tile_id", "prog_start")}
    out["programs"] = len(lists["prog_start"]) - 1
    return out


def read_back(arrays: PlanArrays) -> dict:
    """A device plan's launch arrays as int lists (one synchronization), :func:`host_arrays`' format with the
    entries the launch reads: the tiles of its programs."""
    starts = arrays.prog_start.tolist()
    used = starts[-1] if starts else 0
    return dict(tile_seq=arrays.tile_seq[:used].tolist(), tile_block=arrays.tile_block[:used].tolist(),
                tile_id=arrays.tile_id[:used].tolist(), prog_start=starts)


def disagreement(device: dict, host: dict) -> Optional[str]:
    """Where a device plan's arrays (:func:`read_back`) differ from the host planner's (:func:`host_arrays`, or a
    kernel's own host arrays in that format), or None. A grid's extra device programs past the host's are empty."""
    d_starts, h_starts = device["prog_start"], host["prog_start"]
    if d_starts[: len(h_starts)] != h_starts or set(d_starts[len(h_starts):]) - {h_starts[-1]}:
        first = next((p for p, (a, b) in enumerate(zip(d_starts, h_starts)) if a != b),
                     min(len(d_starts), len(h_starts)))
        return (f"program starts differ from program {first}: device {d_starts[first:first + 4]}, host "
                f"{h_starts[first:first + 4]} ({len(d_starts) - 1} device programs, {len(h_starts) - 1} host)")
    for name in ("tile_id", "tile_seq", "tile_block"):
        if device[name] != host[name]:
            i = next((i for i, (a, b) in enumerate(zip(device[name], host[name])) if a != b),
                     min(len(device[name]), len(host[name])))
            return (f"{name} differs at position {i}: device {device[name][i:i + 4]}, host {host[name][i:i + 4]} "
                    f"({len(device[name])} device entries, {len(host[name])} host)")
    return None


def to_pass_plan(arrays: PlanArrays, kind: str, workloads: list[Tile]) -> PassPlan:
    """Read a device plan back (one synchronization) as a :class:`PassPlan` over the host ``workloads``, so the
    framework's schedule checks judge what the kernel ran. A persistent plan carries a :class:`Schedule` named
    after its scheduler (zigzag's load bound is then checked too).

    Raises:
        InvalidInput: a program lists a tile index outside ``workloads`` (a planning bug, named).
    """
    starts = arrays.prog_start.tolist()
    ids = arrays.tile_id[: starts[-1]].tolist()
    programs = tuple(tuple(ids[starts[p]:starts[p + 1]]) for p in range(arrays.programs))
    for idx in ids:
        if not 0 <= idx < len(workloads):
            raise InvalidInput(f"device plan lists tile {idx} outside the {len(workloads)} workloads of pass {kind!r}")
    if arrays.scheduler == "grid":
        return PassPlan(kind, tuple(workloads), tuple(p for p in programs if p))
    schedule = Schedule(arrays.scheduler, arrays.programs,
                        tuple(tuple(workloads[i] for i in prog) for prog in programs),
                        bounded=arrays.scheduler == "zigzag")
    return PassPlan(kind, tuple(workloads), programs, schedule)


def scheduler_name(scheduler, kind: str) -> Optional[str]:
    """The :data:`DEVICE_SCHEDULERS` name a :mod:`~jfa_verify.scheduling.planning` hook deals pass ``kind`` by,
    or None when only the host planner knows it (a custom hook, the dynamic simulation). Exact types only: a
    subclass may deal otherwise (a planted scheduler bug is one), so only the host knows what it does."""
    if type(scheduler) is GridScheduler:
        return "grid"
    if type(scheduler) is PersistentScheduler:
        name = scheduler.backward if kind == "dkdv" else scheduler.forward
        return name if name in DEVICE_SCHEDULERS else None
    return None


def plannable(scheduler) -> bool:
    """Whether every pass of ``scheduler`` has a device plan."""
    return all(scheduler_name(scheduler, kind) is not None for kind in ("fwd", "dq", "dkdv"))


class DeviceLaunchPlan:
    """Every pass of one call planned on the offsets' device, each when first asked for (a forward-only call
    never plans the backward's passes); no host synchronization.

    Args:
        shape: the call (:func:`jfa_verify.core.contract.validate_call`, or a problem's ``call_shape()``).
        q_offsets, k_offsets: the call's offsets (``q_offsets`` None under broadcast-Q).
        scheduler: a :func:`plannable` hook (:class:`GridScheduler` or :class:`PersistentScheduler`).
        block_m: query rows per tile of the forward and dQ passes; block_n: keys per dK/dV tile.
        one_launch_slots: plan each pass that fits in one launch of that many lanes (:func:`one_launch_pass`), on
            any device Triton runs here; default: ``plan_kernels.PLAN_SLOTS`` lanes on CUDA where
            :data:`ONE_LAUNCH_ON_CUDA`, else the two-kernel planner.

    ``q_off``/``k_off`` are the offsets as :func:`clamped_offsets` makes them: kernels read these, so that
    trusted offsets never send a tile outside the buffers. Planned in one launch, the forward pass's launch writes
    them (at construction: a call's planning is then that one launch, a backward's one or two more).
    """

    def __init__(self, shape: CallShape, q_offsets, k_offsets, scheduler, block_m: int, block_n: int, *,
                 with_ids: bool = False, one_launch_slots: Optional[int] = None):
        self.shape, self.scheduler, self.block_m, self.block_n = shape, scheduler, block_m, block_n
        self.with_ids = with_ids
        self.slots = one_launch_slots
        # the Triton planner wherever Triton runs these tensors; else the torch reference (same arrays)
        self.fused = triton_planner_runs(shape.device)
        self._offsets = q_offsets, k_offsets
        self._lengths = None
        self._tiles: dict = {}
        self._arrays: dict = {}
        self._offsets_pending = False  # the next one-launch pass writes q_off/k_off
        self.self_attention = q_offsets is k_offsets and shape.total_q_rows == shape.total_k_rows
        if self._one_launch("fwd"):
            # the forward pass's launch also writes the clamped offsets the kernels read: a call's planning is one
            # launch (every call runs the forward, and plans it here, before any kernel reads them)
            make = lambda: torch.empty(shape.batch + 1, dtype=torch.int32, device=k_offsets.device)  # noqa: E731
            self.k_off = make()
            self.q_off = self.k_off if shape.mode == "broadcast_q" or self.self_attention else make()
            self._offsets_pending = True
            self.arrays("fwd")
            return
        self.k_off = clamped_offsets(k_offsets, shape.total_k_rows)
        if shape.mode == "broadcast_q" or self.self_attention:
            self.q_off = self.k_off  # broadcast-Q: never read; self-attention: one clamp
        else:
            self.q_off = clamped_offsets(q_offsets, shape.total_q_rows)

    @property
    def lengths(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q_len, k_len)`` ``[B]`` int64 of the clamped offsets (broadcast-Q: every query length ``L_q``), made
        when first asked for (a call planned in one launch per pass never needs them)."""
        if self._lengths is None:
            shape = self.shape
            k_len = (self.k_off[1:] - self.k_off[:-1]).to(torch.int64)
            if shape.mode == "broadcast_q":
                q_len = torch.full_like(k_len, shape.total_q_rows // max(shape.batch, 1))
            elif self.q_off is self.k_off:
                q_len = k_len
            else:
                q_len = (self.q_off[1:] - self.q_off[:-1]).to(torch.int64)
            self._lengths = q_len, k_len
        return self._lengths

    def _pass_size(self, kind: str, grid: bool = False) -> tuple[Optional[str], Optional[int], int, int]:
        """``(scheduler name, persistent programs or None, block, capacity)`` of pass ``kind``."""
        shape, backward = self.shape, kind == "dkdv"
        name = "grid" if grid else scheduler_name(self.scheduler, kind)
        num_sms = None if name == "grid" else (getattr(self.scheduler, "num_sms", None)
                                               or default_num_sms(shape.device))
        block = self.block_n if backward else self.block_m
        rows = shape.total_k_rows if backward else shape.total_q_rows
        return name, num_sms, block, capacity(rows, shape.batch, block)

    def _one_launch(self, kind: str, grid: bool = False) -> bool:
        """Whether pass ``kind`` is planned by :func:`one_launch_pass`: with ``one_launch_slots``, or on CUDA where
        :data:`ONE_LAUNCH_ON_CUDA` (the interpreter runs its sort in Python, slower than the two-kernel path), where it
        fits."""
        if not self.fused or (self.slots is None and not (ONE_LAUNCH_ON_CUDA and self.shape.device.type == "cuda")):
            return False
        name, num_sms, _, cap = self._pass_size(kind, grid)
        shape = self.shape
        return name is not None and one_launch_fits(shape.batch, cap, cap if name == "grid" else num_sms,
                                                    max(shape.total_q_rows, shape.total_k_rows), self.slots)

    def tiles(self, backward: bool) -> DeviceTiles:
        if backward not in self._tiles:
            shape, (q_len, k_len) = self.shape, self.lengths
            block = self.block_n if backward else self.block_m
            rows = shape.total_k_rows if backward else shape.total_q_rows
            self._tiles[backward] = device_tiles(
                k_len if backward else q_len, q_len if backward else k_len, block,
                capacity(rows, shape.batch, block), backward=backward, causal=shape.causal,
                causal_alignment=shape.causal_alignment, window=shape.window)
        return self._tiles[backward]

    def arrays(self, kind: str, *, grid: bool = False) -> PlanArrays:
        """Pass ``kind``'s launch arrays (``grid``: one tile per program, whatever the scheduler)."""
        key = ("fwd" if kind in ("fwd", "dq") else kind, grid)  # the dQ pass runs the forward's tiles and programs
        if key not in self._arrays:
            name, num_sms, block, cap = self._pass_size(kind, grid)
            shape, backward = self.shape, kind == "dkdv"
            mask = dict(causal=shape.causal, causal_alignment=shape.causal_alignment, window=shape.window)
            if self._one_launch(kind, grid):
                q_raw, k_raw = self._offsets
                broadcast = shape.mode == "broadcast_q"
                q_all = shape.total_q_rows // max(shape.batch, 1) if broadcast else None
                q_raw = k_raw if broadcast else q_raw
                first, self._offsets_pending = self._offsets_pending, False
                q_out = None if not first or broadcast or self.q_off is self.k_off else self.q_off
                k_out = self.k_off if first else None
                if backward:
                    offsets, totals, same, write = ((k_raw, q_raw), (shape.total_k_rows, shape.total_q_rows),
                                                    (None, q_all), (k_out, q_out))
                else:
                    offsets, totals, same, write = ((q_raw, k_raw), (shape.total_q_rows, shape.total_k_rows),
                                                    (q_all, None), (q_out, k_out))
                self._arrays[key] = one_launch_pass(offsets, totals, shape.batch, block, cap, name, num_sms,
                                                    backward=backward, with_ids=self.with_ids, same_lengths=same,
                                                    write=write, slots=self.slots, **mask)
            elif self.fused:
                q_len, k_len = self.lengths
                self._arrays[key] = fused_pass(
                    k_len if backward else q_len, q_len if backward else k_len, block, cap, name, num_sms,
                    backward=backward, with_ids=self.with_ids, **mask)
            else:
                self._arrays[key] = plan_pass(self.tiles(kind == "dkdv"), name, num_sms)
        return self._arrays[key]

    def pass_plans(self, problem: JaggedProblem) -> dict:
        """Every pass read back (synchronizes) as a :class:`PassPlan` over ``problem``'s host workloads."""
        mask = dict(causal=problem.causal, causal_alignment=problem.causal_alignment, window=problem.window)
        fwd = workloads_forward(problem.q_lengths, problem.k_lengths, self.block_m, **mask)
        bwd = workloads_backward(problem.q_lengths, problem.k_lengths, self.block_n, **mask)
        return {kind: to_pass_plan(self.arrays(kind), kind, tiles) for kind, tiles in (("fwd", fwd), ("dq", fwd),
                                                                                        ("dkdv", bwd))}


PASSES = ("fwd", "dq", "dkdv")


def launch_plan(planned: DeviceLaunchPlan, problem: JaggedProblem, tiles: TileSizes, *,
                grids: Optional[dict] = None) -> LaunchPlan:
    """The :class:`~jfa_verify.protocol.kernel.LaunchPlan` of an instrumented launch planned on the device: every
    pass of ``planned`` read back (one synchronization per pass) as a :class:`PassPlan` over ``problem``'s host
    workloads, and, per launch, the arrays it ran (:func:`read_back`) beside the host planner's for the same call
    (``planned.scheduler`` dealing the framework's workloads, :func:`host_arrays`): the framework's
    :func:`~jfa_verify.scheduling.invariants.check_instrumented_run` judges the schedules and reports a
    ``device_plan`` violation where the two disagree. Every native kernel that plans on the device builds its
    plan here.

    Args:
        planned: the :class:`DeviceLaunchPlan` the kernel launched from (``with_ids=True``, so ``tile_id`` holds
            the host workload indices).
        problem: the validated problem of the call (its lengths are the host planner's input).
        tiles: the kernel's tile sizes (``LaunchPlan.tiles``).
        grids: extra launches of one tile per program, ``{name: pass}`` (``triton_jfa``'s delta preprocess runs
            the dQ pass's tiles as a grid: ``{"pre": "dq"}``); checked against the host's grid of those tiles.
    """
    from jfa_verify.scheduling.planning import GridScheduler

    passes = planned.pass_plans(problem)
    scheduler = planned.scheduler
    host = {kind: scheduler(list(passes[kind].workloads), kind, problem) for kind in PASSES}
    device = {kind: planned.arrays(kind) for kind in PASSES}
    for name, kind in (grids or {}).items():
        device[name] = planned.arrays(kind, grid=True)
        host[name] = GridScheduler()(list(passes[kind].workloads), kind, problem)
    return LaunchPlan(tiles, passes, arrays={kind: read_back(a) for kind, a in device.items()},
                      reference={kind: host_arrays(p) for kind, p in host.items()})
