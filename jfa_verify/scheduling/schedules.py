"""Host-side tile schedulers for persistent JFA kernels (pure Python and numpy).

A *workload* is the list of tiles one kernel pass would run: one :class:`Tile`
per (sequence, query block) for the forward, per (sequence, KV block) for the
backward. A *scheduler* maps those tiles onto ``num_sms`` persistent programs
(one per SM) and returns a :class:`Schedule`; :meth:`Schedule.flat_order` gives
the CSR arrays a persistent kernel walks. Invariant checks live in
:mod:`jfa_verify.scheduling.invariants`.

Schedulers (all prune empty tiles first, all deterministic):

* :func:`launch_order`: tile ``i`` to SM ``i % num_sms`` in input order; the
  unbalanced baseline.
* :func:`zigzag`: sort by cost, descending, deal in boustrophedon passes. The
  forward-pass scheme of Meta's Jagged Flash Attention kernel on TLX (see
  ``DOMAIN.md``, "Tile scheduling"; Meta reports about 20% of forward time
  recovered).
* :func:`round_robin`: block-innermost input order (L2 reuse of a sequence's
  blocks), padded with sentinel tiles to a multiple of the cluster size for the
  2-CTA path; Meta's backward (dK/dV) scheme, same source.
* :func:`dynamic`: host simulation of Cluster Launch Control (CLC) work stealing:
  each tile goes to the SM that becomes free first.

Load bound. :func:`zigzag` and :func:`dynamic` guarantee
``max_load <= total / num_sms + max_cost`` (Graham's list-scheduling bound:
R. L. Graham, "Bounds for certain multiprocessing anomalies", Bell System
Technical Journal 45, 1966, and "Bounds on multiprocessing timing anomalies",
SIAM J. Appl. Math. 17, 1969). For zigzag: the tile an SM gets in pass ``k >= 1``
costs no more than the cheapest tile of the full pass ``k - 1``, hence no more
than that pass's mean; summing over passes gives the bound. For dynamic: the
most loaded SM started its last tile when every SM was busy.
"""

from __future__ import annotations

import heapq
import operator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Mapping, Sequence

import numpy as np

from jfa_verify.core.contract import CAUSAL_ALIGNMENTS, check_window, keys_seen, rows_seeing
from jfa_verify.core.errors import InvalidInput

__all__ = [
    "Tile",
    "SENTINEL",
    "Schedule",
    "SCHEDULERS",
    "workloads_forward",
    "workloads_backward",
    "prune_empty",
    "launch_order",
    "round_robin",
    "zigzag",
    "dynamic",
]

@dataclass(frozen=True)
class Tile:
    """One unit of work of a kernel pass.

    Attributes:
        index: position of the tile in the workload list it came from (``-1``
            for a sentinel). Schedules and visit counters refer to tiles by it.
        sequence: sequence id ``b`` (``-1`` for a sentinel).
        block: block id inside the sequence: query block (forward) or KV block
            (backward); the tile covers rows ``[block * block_size,
            block * block_size + rows)`` of that dimension.
        cost: work units, an int >= 0. Forward: KV positions the tile loops over.
            Backward: query rows that see the KV block. ``cost == 0`` with
            ``rows > 0`` is *not* empty: the tile still writes its output
            (O = 0 and LSE = -inf forward, dK = dV = 0 backward).
        rows: valid rows of the tile, ``min(block_size, length - block *
            block_size)``; ``0`` marks an *empty* tile (a sequence with no rows
            in the blocked dimension), which must be pruned, never run.
        block_size: BLOCK_M (forward) or BLOCK_N (backward); 0 for a sentinel.
        length: length of the sequence along the blocked dimension (L_q
            forward, L_k backward); 0 for a sentinel.
        sentinel: a padding tile (round-robin cluster padding); the kernel
            skips it. Sentinels have ``index == -1`` in the flat order.
    """

    index: int
    sequence: int
    block: int
    cost: int
    rows: int
    block_size: int = 0
    length: int = 0
    sentinel: bool = False

    @property
    def empty(self) -> bool:
        """True for a tile with no valid rows (pruned by every scheduler)."""
        return self.rows == 0

    def describe(self) -> str:
        """Short human name, e.g. ``tile 7 (sequence 2, block 1, cost 96)``."""
        if self.sentinel:
            return "sentinel tile"
        return f"tile {self.index} (sequence {self.sequence}, block {self.block}, cost {self.cost})"


SENTINEL = Tile(index=-1, sequence=-1, block=-1, cost=0, rows=0, sentinel=True)
"""The padding tile used by :func:`round_robin`."""


@dataclass(frozen=True, eq=True)
class Schedule:
    """Tiles assigned to ``num_sms`` persistent programs.

    Attributes:
        name: scheduler that built it (``"zigzag"``, ...).
        num_sms: number of programs (SMs), >= 1.
        sm_tiles: per SM, its tiles in the order that SM runs them.
        bounded: the scheduler guarantees the list-scheduling bound
            (:attr:`bound`); checked by :func:`jfa_verify.scheduling.invariants.check_schedule`.
        tile_overhead: fixed cost per tile used in the bound, in cost units
            (see :func:`dynamic`); 0 for every other scheduler.
    """

    name: str
    num_sms: int
    sm_tiles: tuple[tuple[Tile, ...], ...] = field(repr=False)
    bounded: bool = False
    tile_overhead: int = 0

    def __repr__(self) -> str:
        return (
            f"Schedule(name={self.name!r}, num_sms={self.num_sms}, tiles={self.num_tiles}, "
            f"max_load={self.max_load}, imbalance={self.imbalance:.3f})"
        )

    @cached_property
    def num_tiles(self) -> int:
        """Real (non-sentinel) tile slots in the schedule."""
        return sum(1 for tiles in self.sm_tiles for t in tiles if not t.sentinel)

    @cached_property
    def num_sentinels(self) -> int:
        """Sentinel slots in the schedule."""
        return sum(1 for tiles in self.sm_tiles for t in tiles if t.sentinel)

    @cached_property
    def assignments(self) -> Mapping[int, tuple[int, int]]:
        """``{tile index: (sm, position in that SM's list)}`` for real tiles.

        A tile listed twice (a broken schedule) keeps its first slot here; use
        :func:`jfa_verify.scheduling.invariants.check_schedule` to find duplicates.
        """
        out: dict[int, tuple[int, int]] = {}
        for sm, tiles in enumerate(self.sm_tiles):
            for pos, t in enumerate(tiles):
                if not t.sentinel:
                    out.setdefault(t.index, (sm, pos))
        return out

    @cached_property
    def loads(self) -> tuple[int, ...]:
        """Per SM, the sum of its tiles' costs (sentinels cost 0)."""
        return tuple(sum(t.cost for t in tiles) for tiles in self.sm_tiles)

    @property
    def total_load(self) -> int:
        return sum(self.loads)

    @property
    def max_load(self) -> int:
        return max(self.loads, default=0)

    @property
    def mean_load(self) -> float:
        return self.total_load / self.num_sms

    @property
    def imbalance(self) -> float:
        """``max_load / mean_load`` over all SMs (1.0 is perfect; 1.0 when the
        total load is 0, since there is nothing to balance)."""
        total = self.total_load
        return 1.0 if total == 0 else self.max_load * self.num_sms / total

    @property
    def max_tile_cost(self) -> int:
        return max((t.cost for tiles in self.sm_tiles for t in tiles if not t.sentinel), default=0)

    @property
    def bound(self) -> float:
        """Graham's list-scheduling bound on the largest per-SM duration:
        ``sum(d) / num_sms + max(d)`` with ``d = cost + tile_overhead`` per real
        tile (``total / num_sms + max_tile_cost`` when ``tile_overhead == 0``)."""
        o = self.tile_overhead
        return (self.total_load + o * self.num_tiles) / self.num_sms + (self.max_tile_cost + o if self.num_tiles else 0)

    @property
    def durations(self) -> tuple[int, ...]:
        """Per SM, ``load + tile_overhead * real tiles``: what :attr:`bound` bounds."""
        o = self.tile_overhead
        return tuple(sum(t.cost + o for t in tiles if not t.sentinel) for tiles in self.sm_tiles)

    def flat_order(self) -> tuple[np.ndarray, np.ndarray]:
        """The schedule as CSR arrays for a persistent kernel.

        Returns:
            ``(flat, prog_tile_start)``: int64 arrays of shapes ``[S]`` (S = tile
            slots, sentinels included) and ``[num_sms + 1]``. Program ``p`` runs
            tile indices ``flat[prog_tile_start[p]:prog_tile_start[p + 1]]`` in
            order; ``-1`` is a sentinel the kernel must skip.
        """
        counts = np.fromiter((len(t) for t in self.sm_tiles), dtype=np.int64, count=len(self.sm_tiles))
        start = np.zeros(len(self.sm_tiles) + 1, dtype=np.int64)
        np.cumsum(counts, out=start[1:])
        flat = np.fromiter(
            (-1 if t.sentinel else t.index for tiles in self.sm_tiles for t in tiles),
            dtype=np.int64,
            count=int(start[-1]),
        )
        return flat, start


# --------------------------------------------------------------------------- validation


def _check_int(name: str, value, *, minimum: int) -> int:
    if isinstance(value, bool):
        raise InvalidInput(f"{name}={value!r} is a bool; pass an int >= {minimum}")
    try:
        v = operator.index(value)
    except TypeError:
        raise InvalidInput(f"{name}={value!r} is not an integer; pass an int >= {minimum}") from None
    if v < minimum:
        raise InvalidInput(f"{name}={v} is below {minimum}; pass an int >= {minimum}")
    return v


def _check_lengths(name: str, lengths) -> list[int]:
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Iterable):
        raise InvalidInput(f"{name}={lengths!r} is not a sequence; pass a list of per-sequence token counts")
    out = []
    for i, x in enumerate(lengths):
        if isinstance(x, bool):
            raise InvalidInput(f"{name}[{i}]={x!r} is a bool; pass whole token counts (ints >= 0)")
        try:
            v = operator.index(x)
        except TypeError:
            raise InvalidInput(f"{name}[{i}]={x!r} is not an integer; pass whole token counts (ints >= 0)") from None
        if v < 0:
            raise InvalidInput(f"{name}[{i}]={v} is negative; token counts must be >= 0")
        out.append(v)
    return out


def _check_pair(q_lengths, k_lengths, causal, causal_alignment) -> tuple[list[int], list[int]]:
    q = _check_lengths("q_lengths", q_lengths)
    k = _check_lengths("k_lengths", k_lengths)
    if len(q) != len(k):
        raise InvalidInput(
            f"len(q_lengths)={len(q)} != len(k_lengths)={len(k)}; pass one query and one key length per sequence"
        )
    if not isinstance(causal, bool):
        raise InvalidInput(f"causal={causal!r} is not a bool; pass True or False")
    if causal_alignment not in CAUSAL_ALIGNMENTS:
        raise InvalidInput(f"causal_alignment={causal_alignment!r} is unknown; pass one of {CAUSAL_ALIGNMENTS}")
    return q, k


def _check_workloads(workloads) -> list[Tile]:
    if isinstance(workloads, Tile) or not isinstance(workloads, Iterable):
        raise InvalidInput(f"workloads={workloads!r} is not a list of Tile; build it with workloads_forward/backward")
    tiles = list(workloads)
    seen: set[int] = set()
    for i, t in enumerate(tiles):
        if not isinstance(t, Tile):
            raise InvalidInput(f"workloads[{i}]={t!r} is not a Tile; build the list with workloads_forward/backward")
        if t.sentinel:
            raise InvalidInput(f"workloads[{i}] is a sentinel tile; pass real tiles only (schedulers add padding)")
        if t.index < 0 or t.cost < 0 or t.rows < 0:
            raise InvalidInput(
                f"workloads[{i}] has index={t.index}, cost={t.cost}, rows={t.rows}; all must be >= 0"
            )
        if t.index in seen:
            raise InvalidInput(f"workloads[{i}].index={t.index} repeats an earlier tile; tile indices must be distinct")
        seen.add(t.index)
    return tiles


# --------------------------------------------------------------------------- workloads


def workloads_forward(
    q_lengths: Sequence[int],
    k_lengths: Sequence[int],
    block_m: int,
    *,
    causal: bool = False,
    causal_alignment: str = "top_left",
    window=None,
) -> list[Tile]:
    """Forward tiles: one per (sequence, query block of ``block_m`` rows).

    Args:
        q_lengths: per-sequence query counts ``L_q`` (ints >= 0), length B.
        k_lengths: per-sequence key counts ``L_k`` (ints >= 0), length B.
        block_m: BLOCK_M, query rows per tile (>= 1).
        causal: apply the causal mask per sequence.
        causal_alignment: ``"top_left"`` (key j visible to query i iff j <= i)
            or ``"bottom_right"`` (iff j <= i + L_k - L_q), per sequence.
        window: sliding window ``(left, right)`` around the aligned diagonal (-1 unbounded), or None
            (:func:`jfa_verify.core.contract.key_range` has the rule).

    Returns:
        Tiles in sequence-major, block-innermost order; ``tile.index`` is the
        list position. ``cost`` is the KV extent the tile loops over: the
        number of keys visible to at least one of its queries (``L_k``
        unmasked; the causal prefix up to its last query, or the window's span, otherwise).
        A sequence with ``L_q == 0`` yields one *empty* tile (``rows == 0``,
        block 0) so that pruning is explicit and checkable. A tile with rows
        but cost 0 (``L_k == 0``, or bottom-right with no visible key) is not
        empty: it must still write O = 0 and LSE = -inf.

    Raises:
        InvalidInput: lengths not non-negative ints, lists of different lengths,
            ``block_m < 1`` or an unknown ``causal_alignment``.
    """
    q, k = _check_pair(q_lengths, k_lengths, causal, causal_alignment)
    window = check_window(window)
    m = _check_int("block_m", block_m, minimum=1)
    tiles: list[Tile] = []
    for b, (lq, lk) in enumerate(zip(q, k)):
        if lq == 0:
            tiles.append(Tile(len(tiles), b, 0, 0, 0, m, 0))
            continue
        for blk in range(-(-lq // m)):
            first = blk * m
            rows = min(m, lq - first)
            cost = keys_seen(first, first + rows - 1, lq, lk, causal, causal_alignment, window)
            tiles.append(Tile(len(tiles), b, blk, cost, rows, m, lq))
    return tiles


def workloads_backward(
    q_lengths: Sequence[int],
    k_lengths: Sequence[int],
    block_n: int,
    *,
    causal: bool = False,
    causal_alignment: str = "top_left",
    window=None,
) -> list[Tile]:
    """Backward (dK/dV) tiles: one per (sequence, KV block of ``block_n`` rows).

    Args: as :func:`workloads_forward`, with ``block_n`` (BLOCK_N, >= 1) KV rows
    per tile.

    Returns:
        Tiles in sequence-major, block-innermost order (the round-robin order
        that keeps a sequence's Q in L2); ``tile.index`` is the list position.
        ``cost`` is the number of query rows that see at least one key of the
        block (``L_q`` non-causal). A sequence with ``L_k == 0`` yields one empty
        tile (``rows == 0``). A tile with rows but cost 0 still writes
        dK = dV = 0.

    Raises:
        InvalidInput: as :func:`workloads_forward`.
    """
    q, k = _check_pair(q_lengths, k_lengths, causal, causal_alignment)
    window = check_window(window)
    n = _check_int("block_n", block_n, minimum=1)
    tiles: list[Tile] = []
    for b, (lq, lk) in enumerate(zip(q, k)):
        if lk == 0:
            tiles.append(Tile(len(tiles), b, 0, 0, 0, n, 0))
            continue
        for blk in range(-(-lk // n)):
            first = blk * n
            rows = min(n, lk - first)
            cost = rows_seeing(first, first + rows, lq, lk, causal, causal_alignment, window)
            tiles.append(Tile(len(tiles), b, blk, cost, rows, n, lk))
    return tiles


def prune_empty(tiles: Iterable[Tile]) -> list[Tile]:
    """The tiles with ``rows > 0``, in their given order (sentinels dropped too).

    A CLC-driven kernel cannot tell an empty tile from a real one, so the host
    removes them before scheduling.
    """
    return [t for t in tiles if t.rows > 0 and not t.sentinel]


# --------------------------------------------------------------------------- schedulers


def _deal(tiles: Sequence[Tile], order_of_sms: Iterable[int], num_sms: int) -> tuple[tuple[Tile, ...], ...]:
    lists: list[list[Tile]] = [[] for _ in range(num_sms)]
    for t, sm in zip(tiles, order_of_sms):
        lists[sm].append(t)
    return tuple(tuple(x) for x in lists)


def launch_order(workloads: Sequence[Tile], num_sms: int) -> Schedule:
    """Baseline: prune empty tiles, then tile ``i`` (in input order) to SM ``i % num_sms``.

    Args:
        workloads: tiles from :func:`workloads_forward` / :func:`workloads_backward`.
        num_sms: number of persistent programs (>= 1).

    Returns:
        A :class:`Schedule` with no load guarantee (``bounded=False``).

    Raises:
        InvalidInput: ``num_sms < 1`` or ``workloads`` not a list of distinct real tiles.
    """
    n = _check_int("num_sms", num_sms, minimum=1)
    tiles = prune_empty(_check_workloads(workloads))
    return Schedule("launch_order", n, _deal(tiles, (i % n for i in range(len(tiles))), n))


def round_robin(workloads: Sequence[Tile], num_sms: int, cluster_size: int = 1) -> Schedule:
    """Round-robin in block-innermost order, padded for clusters (backward dK/dV).

    Prunes empty tiles, keeps the input order, appends ``(-len) % cluster_size``
    :data:`SENTINEL` tiles (fewer than ``cluster_size``) so the slot count is a
    multiple of the cluster size, then deals slot ``i`` to SM ``i % num_sms``;
    consecutive slots land on the SMs of one cluster. Meta's JFA backward
    scheme (``DOMAIN.md``, "Tile scheduling"): equal-cost dK/dV tiles against a
    shared dense Q, block-innermost for L2 reuse, padded for the 2-CTA path.

    Args:
        workloads: tiles, block-innermost (as :func:`workloads_backward` makes them).
        num_sms: number of persistent programs (>= 1), a multiple of ``cluster_size``.
        cluster_size: CTAs per cluster (>= 1; 2 for the 2-CTA MMA path).

    Returns:
        A :class:`Schedule`; sentinels sit at the end of their SM's list.

    Raises:
        InvalidInput: ``num_sms < 1``, ``cluster_size < 1``, ``num_sms`` not a
            multiple of ``cluster_size``, or bad ``workloads``.
    """
    n = _check_int("num_sms", num_sms, minimum=1)
    c = _check_int("cluster_size", cluster_size, minimum=1)
    if n % c:
        raise InvalidInput(
            f"num_sms={n} is not a multiple of cluster_size={c}; launch whole clusters "
            f"(num_sms={n - n % c or c})"
        )
    tiles = prune_empty(_check_workloads(workloads))
    slots = tiles + [SENTINEL] * (-len(tiles) % c)
    return Schedule("round_robin", n, _deal(slots, (i % n for i in range(len(slots))), n))


def zigzag(workloads: Sequence[Tile], num_sms: int) -> Schedule:
    """Cost-sorted boustrophedon dealing (forward load balancing).

    Prunes empty tiles, sorts by cost descending (ties: ascending tile index,
    so equal-cost tiles keep their relative order), then deals pass by pass:
    pass 0 to SMs ``0 .. n-1``, pass 1 to ``n-1 .. 0``, pass 2 to ``0 .. n-1``,
    and so on. This is the forward scheme of Meta's JFA kernel (``DOMAIN.md``,
    "Tile scheduling"). Guarantees ``max_load <= total / num_sms + max_cost``
    (Graham 1966/1969; proof in the module docstring).

    Args:
        workloads: tiles from :func:`workloads_forward` (any tiles work).
        num_sms: number of persistent programs (>= 1).

    Returns:
        A :class:`Schedule` with ``bounded=True``.

    Raises:
        InvalidInput: ``num_sms < 1`` or bad ``workloads``.
    """
    n = _check_int("num_sms", num_sms, minimum=1)
    tiles = sorted(prune_empty(_check_workloads(workloads)), key=lambda t: (-t.cost, t.index))

    def sms():
        for i in range(len(tiles)):
            p, r = divmod(i, n)
            yield r if p % 2 == 0 else n - 1 - r

    return Schedule("zigzag", n, _deal(tiles, sms(), n), bounded=True)


def dynamic(workloads: Sequence[Tile], num_sms: int, *, tile_overhead: int = 0) -> Schedule:
    """Host simulation of on-demand tile stealing (Cluster Launch Control).

    Prunes empty tiles (CLC cannot see them), then hands out tiles in the given
    order, each to the SM that becomes free first. An SM's clock is
    ``load + tile_overhead * tiles_taken``. Ties go to the SM that has taken
    fewer tiles, then to the lowest SM id. With the default ``tile_overhead=0``
    this models a tiny per-tile cost (an epsilon): cost-0 tiles (which still
    write outputs) spread over idle SMs deterministically instead of piling on
    SM 0. Guarantees the list-scheduling bound on ``cost + tile_overhead``
    (Graham 1966/1969), see :attr:`Schedule.bound`.

    Args:
        workloads: tiles in the order the kernel's tile counter hands them out.
        num_sms: number of persistent programs (>= 1).
        tile_overhead: fixed per-tile cost in cost units (int >= 0).

    Returns:
        A :class:`Schedule` with ``bounded=True``.

    Raises:
        InvalidInput: ``num_sms < 1``, ``tile_overhead < 0`` or bad ``workloads``.
    """
    n = _check_int("num_sms", num_sms, minimum=1)
    o = _check_int("tile_overhead", tile_overhead, minimum=0)
    tiles = prune_empty(_check_workloads(workloads))
    heap = [(0, 0, sm) for sm in range(n)]  # (clock, tiles taken, sm): already a heap
    order = []
    for t in tiles:
        clock, taken, sm = heapq.heappop(heap)
        order.append(sm)
        heapq.heappush(heap, (clock + t.cost + o, taken + 1, sm))
    return Schedule("dynamic", n, _deal(tiles, order, n), bounded=True, tile_overhead=o)


SCHEDULERS = {
    "launch_order": launch_order,
    "round_robin": round_robin,
    "zigzag": zigzag,
    "dynamic": dynamic,
}
"""Name -> scheduler, in report order."""
