"""The device planner's Triton kernels: a pass's tiles and programs in two launches instead of about eighty
tensor operations (:mod:`jfa_verify.scheduling.device_plan` has the rules, the torch reference and the tests'
host reference). Imported on first use, so ``TRITON_INTERPRET`` is read after the device is chosen.

``_tiles_kernel``: per slot ``s`` of the pass's capacity, its sequence (a binary search for the first
``ENDS[b] > s``, ``ENDS`` the running count of non-empty tiles), its block, and for zigzag its sort key (the cost,
-1 past the real tiles). ``_deal_kernel``: per rank ``r`` (a slot, or the ``r``-th tile by descending cost), its
program and its place in that program's list, in closed form: round-robin and zigzag deal whole passes of ``n``
ranks, so program ``p`` holds ``f`` or ``f + 1`` tiles (``f = count // n``), and its list starts at
``p * f + (extra tiles of the programs before it)``.

``_plan_kernel``: both in one program for a pass of at most ``PLAN_SLOTS`` slots, from the caller's offsets (their
clamp and lengths too), the zigzag ranks by a sort of the costs in registers; its mask, scheduler and sizes are
runtime values, so it is one compiled variant. The two-kernel path stays for larger passes.
"""

from __future__ import annotations

import triton
import triton.language as tl

SLOTS = 128  # slots per program of both kernels
FILLER_BLOCK = 1 << 30  # the block of the filler entries past the real tiles: past every sequence's rows


@triton.jit
def _find_sequence(ENDS, s, B, STEPS):
    """Per slot ``s``: the first ``b`` with ``ENDS[b] > s`` (``B`` when none), by ``STEPS`` halvings."""
    lo = s * 0
    hi = lo + B
    for _ in range(STEPS):
        mid = (lo + hi) // 2
        e = tl.load(ENDS + mid, mask=mid < B, other=0)
        go = (mid < hi) & (e <= s)
        lo = tl.where(go, mid + 1, lo)
        hi = tl.where(go | (mid >= hi), hi, mid)
    return lo


@triton.jit
def _clamp(x, lo, hi):
    return tl.minimum(tl.maximum(x, lo), hi)


@triton.jit
def _tile_cost(la, lb, blk, BLOCK, WIN_LEFT, RIGHT, BACKWARD, BOTTOM_RIGHT, HAS_LEFT, HAS_RIGHT):
    """A tile's cost (int64): for query tiles (``la`` = L_q, ``lb`` = L_k) the keys it sees, for dK/dV tiles
    (``BACKWARD``: ``la`` = L_k, ``lb`` = L_q) the query rows seeing it, as ``contract.keys_seen`` /
    ``contract.rows_seeing``. The flags are constexpr in ``_tiles_kernel``, runtime in ``_plan_kernel`` (every
    variable keeps one type across each branch for that)."""
    first = blk * BLOCK
    rows = tl.minimum(la - first, BLOCK)
    shift = first * 0
    if BACKWARD:  # contract.rows_seeing: q_len = lb, k_len = la
        if BOTTOM_RIGHT:
            shift = la - lb
        start = first * 0
        if HAS_RIGHT:
            start = tl.maximum(first - (shift + RIGHT + 1) + 1, 0)
        stop = lb
        if HAS_LEFT:
            stop = tl.minimum(lb, first + rows - (shift - WIN_LEFT))
        cost = tl.where(lb > 0, tl.maximum(stop - start, 0), 0)
    else:  # contract.keys_seen: q_len = la, k_len = lb
        if BOTTOM_RIGHT:
            shift = lb - la
        lo = first * 0
        hi = lb
        hi_last_lo = first * 0  # the last row's lo, for hi = max(lo, hi) of that row
        if HAS_LEFT:
            lo = _clamp(first + shift - WIN_LEFT, 0, lb)
            hi_last_lo = _clamp(first + rows - 1 + shift - WIN_LEFT, 0, lb)
        if HAS_RIGHT:
            hi = _clamp(first + rows - 1 + shift + RIGHT + 1, 0, lb)
        cost = tl.maximum(tl.maximum(hi, hi_last_lo) - lo, 0)
    return cost


# The integer arguments vary with every batch (its size, the capacity, the window) and only bound loops and masks:
# specialized, each value class (1, a multiple of 16, other) built another variant of both kernels, a fifth of a cold
# suite's builds (issue 39, 3).
@triton.jit(do_not_specialize=["B", "CAP", "STEPS", "WIN_LEFT", "RIGHT"])
def _tiles_kernel(ENDS, LEN_A, LEN_B, SEQ, BLK, KEY, B, CAP, STEPS, WIN_LEFT, RIGHT,
                  BLOCK: tl.constexpr, WITH_COST: tl.constexpr, BACKWARD: tl.constexpr,
                  BOTTOM_RIGHT: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                  S: tl.constexpr):
    s = tl.program_id(0) * S + tl.arange(0, S)
    inside = s < CAP
    count = tl.load(ENDS + B - 1)
    seq = tl.minimum(_find_sequence(ENDS, s, B, STEPS), B - 1)
    end = tl.load(ENDS + seq)
    la = tl.load(LEN_A + seq).to(tl.int64)  # the blocked dimension: L_q forward, L_k dK/dV
    nblk = (la + BLOCK - 1) // BLOCK
    blk = s - (end - nblk)
    valid = s < count
    tl.store(SEQ + s, seq, mask=inside)
    tl.store(BLK + s, blk, mask=inside)
    if WITH_COST:
        lb = tl.load(LEN_B + seq).to(tl.int64)
        cost = _tile_cost(la, lb, blk, BLOCK, WIN_LEFT, RIGHT, BACKWARD, BOTTOM_RIGHT, HAS_LEFT, HAS_RIGHT)
        tl.store(KEY + s, tl.where(valid, cost, -1), mask=inside)


@triton.jit(do_not_specialize=["B", "CAP", "N", "STEPS"])
def _deal_kernel(ENDS, LEN_A, SEQ, BLK, BY_RANK, EMPTY_BEFORE, TILE_SEQ, TILE_BLOCK, TILE_ID, PROG_START, B, CAP, N,
                 STEPS, BLOCK: tl.constexpr, SCHED: tl.constexpr, WITH_IDS: tl.constexpr, S: tl.constexpr):
    """``SCHED``: 0 grid (one tile per program), 1 round-robin (launch order), 2 zigzag (``BY_RANK``: slots by
    descending cost, ties by slot; ``SEQ``/``BLK``: ``_tiles_kernel``'s). ``WITH_IDS``: ``TILE_ID`` gets the host
    workload index (``EMPTY_BEFORE[b]``: sequences with no rows before ``b``), else the slot (never read)."""
    r = tl.program_id(0) * S + tl.arange(0, S)
    count = tl.load(ENDS + B - 1)
    if SCHED == 2:
        t = tl.load(BY_RANK + r, mask=r < CAP, other=0)
        seq = tl.load(SEQ + t, mask=r < CAP, other=0)
        blk = tl.load(BLK + t, mask=r < CAP, other=0)
    else:
        t = r
        seq = tl.minimum(_find_sequence(ENDS, r, B, STEPS), B - 1)
        nblk = (tl.load(LEN_A + seq).to(tl.int64) + BLOCK - 1) // BLOCK
        blk = r - (tl.load(ENDS + seq) - nblk)
    _deal_store(r, t, seq, blk, count, N, CAP, EMPTY_BEFORE, TILE_SEQ, TILE_BLOCK, TILE_ID, PROG_START, SCHED,
                WITH_IDS)


@triton.jit
def _deal_store(r, t, seq, blk, count, N, CAP, EMPTY_BEFORE, TILE_SEQ, TILE_BLOCK, TILE_ID, PROG_START, SCHED,
                WITH_IDS):
    """Per rank ``r`` (tile ``t``, of sequence ``seq`` and block ``blk``): its program and place in that program's
    list, the fillers past the real tiles and the program starts (``r`` covers ``[0, max(CAP, N + 1))``). ``SCHED``
    and ``WITH_IDS`` as ``_deal_kernel``'s, constexpr there, runtime in ``_plan_kernel``."""
    f = count // N
    rem = count % N
    if SCHED == 0:
        pos = r.to(tl.int64)  # (both branches one type: SCHED is a runtime value in _plan_kernel)
    else:
        lap = r // N
        p = r % N
        if SCHED == 2:
            p = tl.where(lap % 2 == 0, p, N - 1 - p)
        if SCHED == 2:
            extra = tl.where(f % 2 == 0, tl.minimum(p, rem), tl.maximum(p - (N - rem), 0))
        else:
            extra = tl.minimum(p, rem)
        pos = p * f + extra + lap
    tile_id = t
    if WITH_IDS:  # the host workload list has one empty workload per sequence with no rows
        tile_id = t + tl.load(EMPTY_BEFORE + seq, mask=r < CAP, other=0)
    ok = r < count
    tl.store(TILE_SEQ + pos, seq.to(tl.int32), mask=ok)
    tl.store(TILE_BLOCK + pos, blk.to(tl.int32), mask=ok)
    tl.store(TILE_ID + pos, tile_id.to(tl.int32), mask=ok)
    # every position past the real tiles (those are 0 .. count - 1 in every mode) gets the filler tile, which a
    # kernel running one program per slot (a grid) finds empty: no row of sequence 0 lies in block FILLER_BLOCK
    filler = (r >= count) & (r < CAP)
    tl.store(TILE_SEQ + r, (r * 0).to(tl.int32), mask=filler)
    tl.store(TILE_BLOCK + r, (r * 0 + (1 << 30)).to(tl.int32), mask=filler)
    tl.store(TILE_ID + r, r.to(tl.int32), mask=filler)
    # program starts: p * f + (extra tiles before p), count at p = N; grid: min(p, count)
    q = r
    if SCHED == 0:
        starts = tl.minimum(q, count)
    elif SCHED == 2:
        starts = q * f + tl.where(f % 2 == 0, tl.minimum(q, rem), tl.maximum(q - (N - rem), 0))
    else:
        starts = q * f + tl.minimum(q, rem)
    tl.store(PROG_START + q, starts.to(tl.int32), mask=q <= N)


# ----------------------------------------------------------------------------- one launch for a small pass

# The slots, sequences + 1 and programs + 1 one program of ``_plan_kernel`` plans (each a power of two: the zigzag
# ranks are a sort of PLAN_SLOTS keys in registers). A pass past any of them takes the two kernels above.
PLAN_SLOTS = 4096
PLAN_WARPS = 16  # (4096 lanes: 8 per thread of each int64 array)

# ``_plan_kernel``'s FLAGS bits (runtime, not constexpr: one compiled variant for every mask, scheduler and batch).
F_BACKWARD, F_BOTTOM_RIGHT, F_HAS_LEFT, F_HAS_RIGHT, F_A_ALL, F_B_ALL, F_WRITE_A, F_WRITE_B, F_WITH_IDS = (
    1 << i for i in range(9))
SCHED_SHIFT = 9  # bits 9-10: 0 grid, 1 round-robin (launch order), 2 zigzag
# (the same bits as the kernel reads them: a @triton.jit function reads only constexpr globals)
_BACKWARD, _BOTTOM_RIGHT, _HAS_LEFT, _HAS_RIGHT, _A_ALL, _B_ALL, _WRITE_A, _WRITE_B, _WITH_IDS, _SCHED_SHIFT = (
    tl.constexpr(x) for x in (F_BACKWARD, F_BOTTOM_RIGHT, F_HAS_LEFT, F_HAS_RIGHT, F_A_ALL, F_B_ALL, F_WRITE_A,
                              F_WRITE_B, F_WITH_IDS, SCHED_SHIFT))


@triton.jit
def _max(a, b):
    return tl.maximum(a, b)


@triton.jit
def _clamped_bounds(OFF, T, i, B):
    """Per lane ``i``: the clamped running maximum of the offsets at ``i`` and at ``i + 1`` (int64), as
    ``device_plan.clamped_offsets`` makes them, without a shifted read of a register tensor: the second scan runs
    over ``OFF[1:]`` and takes ``OFF[0]`` in."""
    a = _clamp(tl.load(OFF + i, mask=i <= B, other=0).to(tl.int64), 0, T)
    b = _clamp(tl.load(OFF + i + 1, mask=i + 1 <= B, other=0).to(tl.int64), 0, T)
    first = _clamp(tl.load(OFF).to(tl.int64), 0, T)
    return tl.associative_scan(a, 0, _max), tl.maximum(tl.associative_scan(b, 0, _max), first)


@triton.jit(do_not_specialize=["A_OFF", "B_OFF", "T_A", "T_B", "LEN_A_ALL", "LEN_B_ALL", "B", "CAP", "N", "STEPS",
                               "WIN_LEFT", "RIGHT", "BLOCK", "FLAGS"])
def _plan_kernel(A_OFF, B_OFF, A_OUT, B_OUT, SCRATCH, TILE_SEQ, TILE_BLOCK, TILE_ID, PROG_START,
                 T_A, T_B, LEN_A_ALL, LEN_B_ALL, B, CAP, N, STEPS, WIN_LEFT, RIGHT, BLOCK, FLAGS,
                 P: tl.constexpr):
    """A whole pass in one program and one launch (``B + 1``, ``CAP`` and ``N + 1`` at most ``P``): the clamped
    offsets (written as the kernels read them, int32, where ``F_WRITE_A``/``F_WRITE_B``), the lengths, the tiles
    and their costs, the zigzag ranks (a sort of ``cost * P + (P - 1 - slot)``: descending cost, ties by slot, as
    the host's stable sort) and the deal, the same arrays as ``_tiles_kernel`` then ``_deal_kernel``.

    ``A`` is the blocked dimension (queries forward, keys for dK/dV), ``B`` the other; ``F_A_ALL``: every ``A`` length
    is ``LEN_A_ALL`` (broadcast-Q's queries; ``A_OFF`` unread), likewise ``F_B_ALL``. ``SCRATCH``: ``6 * P`` int64
    the program writes and reads back (running tile counts, lengths, empty sequences before, slots' sequences and
    blocks), after a barrier."""
    i = tl.arange(0, P)
    sched = (FLAGS >> _SCHED_SHIFT) & 3
    lo_b, hi_b = _clamped_bounds(B_OFF, T_B, i, B)
    if (FLAGS & _B_ALL) != 0:
        len_b = i.to(tl.int64) * 0 + LEN_B_ALL
    else:
        len_b = hi_b - lo_b
        if (FLAGS & _WRITE_B) != 0:
            tl.store(B_OUT + i, lo_b.to(tl.int32), mask=i <= B)
    if (FLAGS & _A_ALL) != 0:
        len_a = i.to(tl.int64) * 0 + LEN_A_ALL
    else:
        lo_a, hi_a = _clamped_bounds(A_OFF, T_A, i, B)
        len_a = hi_a - lo_a
        if (FLAGS & _WRITE_A) != 0:
            tl.store(A_OUT + i, lo_a.to(tl.int32), mask=i <= B)
    seq_lane = i < B
    len_a = tl.where(seq_lane, len_a, 0)
    len_b = tl.where(seq_lane, len_b, 0)
    nblk = (len_a + BLOCK - 1) // BLOCK
    ends = tl.cumsum(nblk, 0)
    count = tl.sum(nblk, 0)
    empty = (seq_lane & (len_a == 0)).to(tl.int64)
    tl.store(SCRATCH + i, ends)
    tl.store(SCRATCH + P + i, len_a)
    tl.store(SCRATCH + 2 * P + i, len_b)
    tl.store(SCRATCH + 3 * P + i, tl.cumsum(empty, 0) - empty)
    tl.debug_barrier()
    # per slot s: its sequence, its block, and for zigzag its cost (_tiles_kernel's rules)
    s = i
    seq = tl.minimum(_find_sequence(SCRATCH, s, B, STEPS), B - 1).to(tl.int64)
    la = tl.load(SCRATCH + P + seq)
    blk = s - (tl.load(SCRATCH + seq) - (la + BLOCK - 1) // BLOCK)
    t = s.to(tl.int64)  # (one type in both branches of the runtime `if` below)
    if sched == 2:
        lb = tl.load(SCRATCH + 2 * P + seq)
        cost = _tile_cost(la, lb, blk, BLOCK, WIN_LEFT, RIGHT, (FLAGS & _BACKWARD) != 0, (FLAGS & _BOTTOM_RIGHT) != 0,
                          (FLAGS & _HAS_LEFT) != 0, (FLAGS & _HAS_RIGHT) != 0)
        key = tl.where(s < count, cost, tl.where(s < CAP, -1, -2))
        ranked = tl.sort(key * P + (P - 1 - s), descending=True)
        tl.store(SCRATCH + 4 * P + s, seq)
        tl.store(SCRATCH + 5 * P + s, blk)
        tl.debug_barrier()
        t = (P - 1) - (ranked & (P - 1))  # the slot of rank s
        seq = tl.load(SCRATCH + 4 * P + t)
        blk = tl.load(SCRATCH + 5 * P + t)
    _deal_store(s, t, seq, blk, count, N, CAP, SCRATCH + 3 * P, TILE_SEQ, TILE_BLOCK, TILE_ID, PROG_START, sched,
                (FLAGS & _WITH_IDS) != 0)
