"""Tile workloads of a block-sparse call: each tile's cost cut to the blocks its selection visits.

A block-sparse kernel (:class:`~jfa_verify.core.selection.BlockSelection`) runs the framework's tiles
(:func:`~jfa_verify.scheduling.schedules.workloads_forward`,
:func:`~jfa_verify.scheduling.schedules.workloads_backward`) but does only the work its selection keeps: a
persistent schedule that balances the dense costs balances work the kernel never does. :func:`selected_workloads`
prices the tiles as the kernel runs them, so every scheduler of :mod:`jfa_verify.scheduling.planning` deals a sparse
call's real work; :func:`transposed_selection` is the selection read by KV block, which both the dK/dV costs and a
dK/dV kernel need.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Optional

from jfa_verify.core.contract import JaggedProblem

__all__ = ["TransposedSelection", "selected_workloads", "transposed_selection"]

# (starts, offsets, indices): see transposed_selection
TransposedSelection = tuple[list[int], list[int], list[int]]


def transposed_selection(problem: JaggedProblem) -> TransposedSelection:
    """The selection of a block-sparse ``problem`` by KV block: ``(starts, offsets, indices)`` int lists, sequence
    ``b``'s KV block ``j`` (flattened ``starts[b] + j``; ``B + 1`` starts) selected by the query blocks
    ``indices[offsets[t]:offsets[t + 1]]`` of the sequence, increasing.

    Raises:
        ValueError: ``problem`` has no block selection.
    """
    sel = problem.block_selection
    if sel is None:
        raise ValueError("transposed_selection: the problem is dense (no block_selection)")
    starts = [0]
    for lk in problem.k_lengths:
        starts.append(starts[-1] + -(-lk // sel.block_n))
    by_kv: list[list[int]] = [[] for _ in range(starts[-1])]
    for b in range(problem.batch):
        for m in range(sel.query_blocks(b)):
            for j in sel.selected(b, m):
                by_kv[starts[b] + j].append(m)
    offsets = [0]
    for rows in by_kv:
        offsets.append(offsets[-1] + len(rows))
    return starts, offsets, [m for rows in by_kv for m in rows]


def _overlap(a: int, z: int, lo: int, hi: int) -> int:
    return max(0, min(z, hi) - max(a, lo))


def selected_workloads(problem: JaggedProblem, fwd: list, bwd: list,
                       transposed: Optional[TransposedSelection] = None) -> tuple[list, list]:
    """The forward and dK/dV workloads ``fwd``, ``bwd`` of a block-sparse ``problem`` with each tile's cost cut to the
    selected blocks.

    A query tile's cost is the keys of its mask span (the contract's :meth:`JaggedProblem.key_range` of its first
    and last rows) inside its query block's selected KV blocks; a KV tile's cost is the query rows that see one of
    its keys (a contiguous run, both ends of ``key_range`` being non-decreasing in the row) inside the query blocks
    that selected its KV block. Tiles must lie inside one selection block (a kernel's tiles no larger than the
    selection's blocks). Empty tiles stay as they are.

    Args:
        problem: a validated problem with a block selection.
        fwd, bwd: its :class:`~jfa_verify.scheduling.schedules.Tile` workloads (query tiles, KV tiles).
        transposed: :func:`transposed_selection` of ``problem`` when already made (a kernel passes the selection
            by KV block to its dK/dV launch too); None makes it.

    Returns:
        ``(fwd, bwd)`` with their costs replaced (units: keys per query tile, query rows per KV tile).
    """
    sel = problem.block_selection
    bm, bn = sel.block_m, sel.block_n

    def fwd_cost(t):
        first = t.block * t.block_size
        lo = problem.key_range(first, t.sequence)[0]
        hi = problem.key_range(first + t.rows - 1, t.sequence)[1]
        return sum(_overlap(j * bn, (j + 1) * bn, lo, hi) for j in sel.selected(t.sequence, first // bm))

    starts, offsets, indices = transposed if transposed is not None else transposed_selection(problem)

    def bwd_cost(t):
        b, first = t.sequence, t.block * t.block_size
        end, q_len = first + t.rows, problem.q_lengths[b]
        rows = range(q_len)
        start = bisect.bisect_right(rows, first, key=lambda i: problem.key_range(i, b)[1])  # first with hi > first
        stop = bisect.bisect_left(rows, end, key=lambda i: problem.key_range(i, b)[0])  # first with lo >= end
        kv = starts[b] + first // bn
        return sum(_overlap(m * bm, min((m + 1) * bm, q_len), start, stop)
                   for m in indices[offsets[kv]:offsets[kv + 1]])

    return ([t if t.empty else dataclasses.replace(t, cost=fwd_cost(t)) for t in fwd],
            [t if t.empty else dataclasses.replace(t, cost=bwd_cost(t)) for t in bwd])
